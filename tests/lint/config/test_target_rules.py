"""--target and the rules that depend on it (SHM014, 016, 017, 018, 021); Compose scalars
typed per target; fixed Compose files re-parse (PyYAML and the compose-go typing) to the
intended bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from shmguard.cli import app
from shmguard.lint.check import CheckOptions, check_loaded, fix_file
from shmguard.model.target import Target, parse_target
from shmguard.sources.compose_types import applied_size, docker_py_parse_bytes, yaml12
from shmguard.sources.load import load_bytes
from shmguard.sources.yamlnode import YScalar

COMPOSE = b"""\
services:
  a:
    image: pytorch/pytorch   # keep
    shm_size: 1.5e9
    mem_limit: 1g
    deploy: {resources: {limits: {memory: 2147483648}}}
  b:
    image: busybox
    shm_size: 0
    tmpfs: ["/dev/shm:size=1gb"]
  c:
    image: busybox
    shm_size: "1.5"
"""


def codes(data: bytes, compose: str = "v2", name: str = "c.yaml") -> list[tuple[str, int, str]]:
    r = check_loaded(load_bytes(data, name), CheckOptions(target=Target(compose=compose)))
    return [(f.code, f.location.line or 0, f.message) for f in r.findings if f.location]


def scalar(text: str) -> YScalar:
    lf = load_bytes(f"services:\n  a:\n    shm_size: {text}\n".encode(), "c.yaml")
    node = lf.compose[0].services[0].shm_size
    assert isinstance(node, YScalar)
    return node


def test_parse_target() -> None:
    assert parse_target("") == Target(28, "v2", "4.3")
    t = parse_target("compose=podman-compose, docker-cli=20.10")
    assert (t.docker_cli, t.compose, t.podman, t.legacy_docker_units) == (
        20,
        "podman-compose",
        "4.3",
        True,
    )
    assert parse_target("podman=5.0", t) == Target(20, "podman-compose", "5.0")
    for bad in ("compose=v3", "docker=28", "podman=x", "compose"):
        with pytest.raises(ValueError):
            parse_target(bad)


@pytest.mark.parametrize(
    ("text", "v2", "v1"),
    [
        ("1.5e9", 1.5e9, "1.5e9"),
        ("2147483648.0", 2147483648.0, 2147483648.0),
        ("012", 10, 10),
        ("0x10", 16, 16),
        ("on", "on", True),
        ("True", True, True),
        ('"1.5e9"', "1.5e9", "1.5e9"),
        ("1_000", 1000, 1000),
    ],
)
def test_scalars_typed_per_target(text: str, v2: object, v1: object) -> None:
    node = scalar(text)
    assert yaml12(node) == v2 and type(yaml12(node)) is type(v2)
    assert node.yaml11() == v1 and type(node.yaml11()) is type(v1)


@pytest.mark.parametrize(
    ("text", "v2", "v1", "pc"),
    [  # runtime_truth.md E, F and config_formats.md 2.2 [run]
        ("1.5e9", ("default", None), ("applied", 1_500_000_000), ("error", None)),
        ("1.5e+9", ("default", None), ("error", None), ("applied", 1_500_000_000)),
        ("2147483648", ("applied", 2 << 30), ("applied", 2 << 30), ("applied", 2 << 30)),
        ('"1.5"', ("applied", 1), ("applied", 1), ("applied", 1)),
        ("0", ("default", None), ("default", None), ("default", None)),
        ('"0"', ("default", None), ("default", None), ("unlimited", None)),
        (
            "1.5g",
            ("applied", 1_610_612_736),
            ("applied", 1_610_612_736),
            ("applied", 1_610_612_736),
        ),
        ("2Gi", ("error", None), ("error", None), ("applied", 2 << 30)),
    ],
)
def test_applied_shm_size(
    text: str, v2: tuple[str, int | None], v1: tuple[str, int | None], pc: tuple[str, int | None]
) -> None:
    node = scalar(text)
    for compose, want in (("v2", v2), ("v1", v1), ("podman-compose", pc)):
        r = applied_size(node, compose)
        assert (r.outcome, r.bytes) == want, compose


def test_docker_py_parse_bytes() -> None:
    assert docker_py_parse_bytes("2gb") == 2 << 30
    assert docker_py_parse_bytes("1e3m") == 1_048_576_000
    assert docker_py_parse_bytes("1.5e9") == 1_500_000_000


def test_findings_name_their_target() -> None:
    v2 = codes(COMPOSE)
    assert [(c, line) for c, line, _ in v2] == [
        ("SHM014", 4),
        ("SHM018", 5),
        ("SHM017", 6),
        ("SHM012", 9),
        ("SHM016", 9),
        ("SHM021", 10),
        ("SHM014", 13),
    ]
    assert "Compose v2 drops it and the 64 MiB default applies (target Compose v2)" in v2[0][2]
    v1 = codes(COMPOSE, "v1")
    assert ("SHM014", 4) not in [(c, line) for c, line, _ in v1]  # Compose v1 applies 1.5e9
    assert "Compose v1 applies the deploy value" in next(m for c, _, m in v1 if c == "SHM018")
    pc = codes(COMPOSE, "podman-compose")
    assert "podman-compose passes it on" in next(m for c, _, m in pc if c == "SHM017")


def test_run_lines_zero_and_kernel_syntax() -> None:
    data = (
        b"docker run --tmpfs /dev/shm:size=1.5g --shm-size=0 busybox\n"
        b"podman run --shm-size=0 --mount type=tmpfs,dst=/dev/shm,tmpfs-size=2Gi busybox\n"
    )
    got = codes(data, name="r.sh")
    msgs = {(c, line): m for c, line, m in got}
    assert "docker CLI 28 gives /dev/shm the runtime's default" in msgs[("SHM016", 1)]
    assert "Podman 4.3 gives /dev/shm no limit" in msgs[("SHM016", 2)]
    r = fix_file(data, "r.sh")
    assert r.data == data.replace(b"size=1.5g", b"size=1536m").replace(
        b"tmpfs-size=2Gi", b"tmpfs-size=2g"
    )


def test_fixed_compose_reparses_to_the_intended_bytes() -> None:
    r = fix_file(COMPOSE, "c.yaml")
    assert b"image: pytorch/pytorch   # keep\n" in r.data
    doc = yaml.safe_load(r.data)
    assert doc["services"]["a"]["shm_size"] == "1500000000"
    assert doc["services"]["a"]["deploy"]["resources"]["limits"]["memory"] == "2147483648"
    assert doc["services"]["b"]["tmpfs"] == ["/dev/shm:size=1g"]
    lf = load_bytes(r.data, "c.yaml")
    a = lf.compose[0].services[0]
    assert isinstance(a.shm_size, YScalar)
    for compose in ("v2", "v1", "podman-compose"):
        assert applied_size(a.shm_size, compose).bytes == 1_500_000_000
    left = {(f.code, f.location.line if f.location else 0) for f in r.remaining.findings}
    assert ("SHM014", 13) in left  # the fraction "1.5": intent unknown, no applied fix
    assert not {c for c, line in left if line != 13} & {"SHM014", "SHM017", "SHM021"}
    assert fix_file(r.data, "c.yaml").data == r.data


def test_cli_target_option_and_config(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_bytes(COMPOSE)
    r = CliRunner().invoke(app, ["check", "--target", "compose=v1", "--select", "SHM014", str(p)])
    assert "(target Compose v1)" in r.stdout and "1.5e9" not in r.stdout
    r = CliRunner().invoke(app, ["check", "--target", "compose=v9", str(p)])
    assert r.exit_code == 2 and "compose=v9" in r.stderr
    cfg = tmp_path / ".shmguard.toml"
    cfg.write_text('target = "compose=podman-compose"\n')
    r = CliRunner().invoke(app, ["check", "--config", str(cfg), "--select", "SHM017", str(p)])
    assert "(target podman-compose)" in r.stdout
