"""SHM011 shm-size-ignored-by-ipc: ``shm_size`` / ``--shm-size`` with an IPC mode that does
not use it.

Docker mounts a tmpfs of ``ShmSize`` only for the ``private`` and ``shareable`` modes
(moby ``daemon/container_operations_unix.go`` ``setupIPCDirs``): with ``host`` the host's
/dev/shm is bind-mounted, with ``container:x`` (Compose ``service:x``) the donor's, with
``none`` there is none, and the size is dropped without a word; ``docker inspect`` still shows
it (runtime_truth.md C, E). Podman 4.3 refuses ``--shm-size`` with ``--ipc=host|none``
(``cannot set shmsize when running in the {host } IPC Namespace``) and ignores it with
``container:x`` (runtime_truth.md G). podman-compose never reads ``ipc:``, so there the
``shm_size`` applies and ``ipc: host`` is what is lost (runtime_truth.md F).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, flag_loc, ipc_mode, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Fix
from shmguard.sources.k8s_model import text

_WHAT = {
    "host": "the host's /dev/shm is used",
    "none": "there is no /dev/shm at all",
    "container": "the other container's /dev/shm (and its size) is used",
}


def _fix(mode: str, compose: bool) -> Fix:
    key = "shm_size" if compose else "--shm-size"
    if mode == "container":
        text_ = (
            f"Size /dev/shm on the container whose IPC is shared (it must be `ipc: shareable`), "
            f"and drop {key} here."
        )
    else:
        ipc = "ipc" if compose else "--ipc"
        text_ = (
            f"Drop {ipc} {mode} to get a private /dev/shm of the {key} size (preferred: sized, "
            f"not shared with the host), or drop {key} to keep the host's."
        )
    return Fix("Keep one /dev/shm mechanism", text_)


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a shm size beside an IPC mode that ignores it."""
    if unit.service is not None:
        svc = unit.service
        size, ipc = svc.shm_size, text(svc.ipc)
        mode = ipc_mode(ipc)
        if size is None or mode not in _WHAT:
            return
        yield Violation(
            f"shm_size is ignored with ipc: {ipc}: {_WHAT[mode]} (Docker and Compose v1/v2 drop "
            "it silently; podman-compose instead ignores ipc and applies shm_size)",
            size.location(),
            _fix(mode, True),
        )
    elif unit.run is not None:
        rl = unit.run
        size_flag, ipc_flag = rl.last("--shm-size"), rl.last("--ipc")
        if size_flag is None or ipc_flag is None:
            return
        mode = ipc_mode(ipc_flag.value)
        if mode not in _WHAT:
            return
        if rl.tool == "podman" and mode in ("host", "none"):
            msg = (
                f"podman refuses --shm-size with --ipc={ipc_flag.value}: 'cannot set shmsize when "
                f"running in the {{{mode} }} IPC Namespace'"
            )
            variant: str | None = "podman-line-with-ipc-host-or-none"
        else:
            msg = f"--shm-size is ignored with --ipc={ipc_flag.value}: {_WHAT[mode]}"
            variant = None
        yield Violation(msg, flag_loc(unit, size_flag), _fix(mode, False), variant)


DOC = RuleDoc(
    what=f"""\
A Compose `shm_size` with `ipc: host`, `ipc: none` or `ipc: service:x` / `container:x`; a
`docker|podman run --shm-size` with `--ipc=host`, `--ipc=none` or `--ipc=container:x`. The
tool matters: Docker (CLI 20.10 and 28, daemon 20.10, run) and Compose v1/v2 ignore the size
silently; Podman 4.3 refuses host and none with an error (reported as an error) and ignores the
size with `container:x`; podman-compose 1.6 ignores `ipc:` itself, so there the size applies and
the host IPC is lost. Sources: {sources("compose", "docker-run", "podman-run")}.
""",
    why="""\
The file says /dev/shm has a size, the container gets something else: the host's /dev/shm
(shared with every host-IPC container, files left behind after exit), the donor's (64 MiB if it
was never sized) or none at all. `docker inspect` still shows the ShmSize, which hides it.""",
    fix="""\
Keep one mechanism: drop the IPC mode for a private /dev/shm of that size (preferred), or drop
the size to keep the host's. With `service:x`, size the donor (which must be `ipc: shareable`).
""",
    fix_safety="""\
Display-only: which of the two settings the author wanted cannot be told from the file.""",
    applies="display-only",
    variant_words={"podman-line-with-ipc-host-or-none": "when Podman refuses it"},
    bad=Example(
        "run.sh",
        """\
#!/bin/sh
docker run --ipc=host --shm-size=16g vllm/vllm-openai --model mistralai/Mistral-7B-v0.1
""",
    ),
    good=Example(
        "run.sh",
        """\
#!/bin/sh
docker run --shm-size=16g vllm/vllm-openai --model mistralai/Mistral-7B-v0.1
""",
    ),
)

RULE = Rule(
    code="SHM011",
    name="shm-size-ignored-by-ipc",
    summary="shm_size / --shm-size with ipc host, none or container:/service: (silently ignored)",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("compose", "docker-run", "podman-run"),
    why=(
        "With ipc host, none or another container's IPC, Docker does not mount a /dev/shm of that "
        "size: the setting is silently ignored (Podman rejects it with host or none)."
    ),
    doc=DOC,
    check=check,
    variants={"podman-line-with-ipc-host-or-none": Severity.ERROR},
)
