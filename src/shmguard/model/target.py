"""The tools and versions ``check`` assumes (``--target``, config ``target``).

What a value means depends on the tool that reads it (../shared/research/runtime_truth.md,
tables B-G): ``2Gi`` is 2 GiB to docker CLI 20.10 and Podman 4.3 (go-units v0.4) and an error
to docker CLI 28 (v0.5); Compose v2 (compose-go, YAML 1.2) drops ``shm_size: 1.5e9`` (a float)
while Compose v1 (PyYAML, YAML 1.1) reads it as the string ``"1.5e9"`` and applies
1,500,000,000 bytes; podman-compose ignores ``ipc:`` and drops an integer ``0``. Findings that
depend on the target name the one they assume.

Syntax: ``docker-cli=28,compose=v2,podman=4.3`` (any subset; the rest keeps its default).
Defaults: docker CLI 28 (current), Compose v2 (the ``docker compose`` plugin), Podman 4.3 (the
version runtime_truth.md ran).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The Compose implementations a target can name.
COMPOSE_TOOLS = ("v2", "v1", "podman-compose")


@dataclass(frozen=True)
class Target:
    """The assumed tools.

    Attributes:
        docker_cli: the docker CLI major version (20 and older parse sizes with go-units
            v0.4, which accepts ``2Gi``; 23 and newer with v0.5, which rejects it).
        compose: ``v2`` (compose-go), ``v1`` (docker-compose 1.x, PyYAML + docker-py) or
            ``podman-compose``.
        podman: the Podman version (``major.minor``).
    """

    docker_cli: int = 28
    compose: str = "v2"
    podman: str = "4.3"

    def __post_init__(self) -> None:
        if self.compose not in COMPOSE_TOOLS:
            raise ValueError(f"compose={self.compose}: expected one of {', '.join(COMPOSE_TOOLS)}")

    @property
    def legacy_docker_units(self) -> bool:
        """True when the docker CLI parses sizes with go-units v0.4 (CLI 20.10 and older)."""
        return self.docker_cli < 23

    def name(self, tool: str) -> str:
        """How a finding names the target it assumes: ``compose v2``, ``docker CLI 28``,
        ``Podman 4.3``."""
        if tool == "compose":
            return (
                "podman-compose" if self.compose == "podman-compose" else f"Compose {self.compose}"
            )
        if tool == "podman":
            return f"Podman {self.podman}"
        return f"docker CLI {self.docker_cli}"

    def __str__(self) -> str:
        return f"docker-cli={self.docker_cli},compose={self.compose},podman={self.podman}"


def parse_target(text: str, base: Target | None = None) -> Target:
    """Read ``docker-cli=28,compose=v2|v1|podman-compose,podman=4.3`` over ``base``.

    Raises:
        ValueError: an unknown tool, a missing ``=``, or a value of the wrong form (one line).
    """
    base = base or Target()
    docker, compose, podman = base.docker_cli, base.compose, base.podman
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not value:
            raise ValueError(f"{part!r}: expected TOOL=VERSION")
        if key == "docker-cli":
            major = value.split(".")[0]
            if not major.isdigit():
                raise ValueError(f"docker-cli={value}: expected a version such as 28 or 20.10")
            docker = int(major)
        elif key == "compose":
            compose = value.lower()
        elif key == "podman":
            if not all(x.isdigit() for x in value.split(".")):
                raise ValueError(f"podman={value}: expected a version such as 4.3")
            podman = value
        else:
            raise ValueError(f"{key}: unknown tool; expected docker-cli, compose or podman")
    return Target(docker, compose, podman)
