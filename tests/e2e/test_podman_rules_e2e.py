"""The Podman rules against real Podman (issue 8: "Podman 4.3 (Debian ``podman``) checks the
Podman rules the same way where it can run here").

Each test writes one ``podman run`` line into a shell script, asserts what ``shmguard check``
says about it, then runs that very script through the real ``podman`` and asserts what Podman
does with the line: SHM011 (``--shm-size`` with ``--ipc=host|none`` is refused, with the text the
message quotes), SHM016 (``--shm-size=0`` and a tmpfs ``size=0`` give a /dev/shm with no limit),
SHM021 (a tmpfs ``size=2Gi`` fails the start; the line ``check --fix`` writes starts with the
intended size) and SHM002 (Podman reads ``--shm-size=2Gi`` as 2 GiB, so the finding is info).

The container is the shell of the host: the imported rootfs of ``runtime_support`` with /usr
bind-mounted read-only, ``--network none``, a command of ``sh -c`` over /dev/shm. Podman runs
with its own config and vfs storage under a temp directory (``runtime_support.podman``); it is
skipped when missing, or failed when ``SHMGUARD_E2E_REQUIRE`` names ``podman``. Select with
``pytest -m podman``.
"""

from __future__ import annotations

import json
import shlex
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_support import Runtime, imported, podman, run_script, shmguard_cli, unavailable

pytestmark = [pytest.mark.podman]

#: Podman's default /dev/shm: containers.conf ``shm_size = "65536k"`` (65,536,000 bytes).
PODMAN_DEFAULT_SHM = 65_536_000
#: More than that default, written to /dev/shm to tell "no limit" from the default.
WRITE_MIB = 128
RUN_TIMEOUT_S = 60
#: ``podman run`` refuses before any container exists (exit 125, podman-run(1) EXIT STATUS);
#: a failed OCI runtime start is 126.
PODMAN_ERROR, PODMAN_CANNOT_INVOKE = 125, 126


@pytest.fixture(scope="module")
def pm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """Podman with the rootfs imported (no "pytorch" in the name: no SHM001 on the lines)."""
    if shutil.which("podman") is None:
        unavailable("podman", "the podman CLI is not installed (.ci/run installs it)")
    rt = podman(tmp_path_factory.mktemp("podman-rules-e2e"))
    with imported(rt, f"localhost/shmguard-e2e/shell:{uuid.uuid4().hex[:12]}") as ready:
        yield ready


def _script(rt: Runtime, name: str, options: str, command: str) -> str:
    return "\n".join(
        [
            "#!/bin/sh",
            f"podman run --rm --name {name} --network none {options} -v /usr:/usr:ro "
            f"{rt.image} sh -c {shlex.quote(command)}",
            "",
        ]
    )


def _write(rt: Runtime, tmp_path: Path, options: str, command: str) -> tuple[Path, str]:
    name = f"shmguard-e2e-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "run.sh"
    script.write_text(_script(rt, name, options, command))
    return script, name


def _findings(script: Path, status: int) -> list[dict[str, Any]]:
    r = shmguard_cli("check", "--json", str(script))
    assert r.returncode == status, r.stdout + r.stderr
    (entry,) = json.loads(r.stdout)["files"]
    assert entry["kind"] == "run-lines"
    findings: list[dict[str, Any]] = entry["findings"]
    return findings


def _shm_bytes(out: str) -> int:
    """The size column of ``df -B1 /dev/shm`` (header, then one line)."""
    lines = [ln for ln in out.splitlines() if ln.rstrip().endswith(" /dev/shm")]
    assert len(lines) == 1, out
    return int(lines[0].split()[1])


@pytest.mark.parametrize("mode", ["host", "none"])
def test_shm011_podman_refuses_shm_size_with_ipc_host_or_none(
    pm: Runtime, tmp_path: Path, mode: str
) -> None:
    script, name = _write(pm, tmp_path, f"--ipc={mode} --shm-size=1g", "df -B1 /dev/shm")

    (f,) = _findings(script, 1)
    assert (f["code"], f["severity"]) == ("SHM011", "error")
    quoted = f"cannot set shmsize when running in the {{{mode} }} IPC Namespace"
    assert f["message"] == f"podman refuses --shm-size with --ipc={mode}: '{quoted}'"

    rc, out = run_script(pm, script, name, RUN_TIMEOUT_S)
    assert rc == PODMAN_ERROR, out
    assert f"Error: invalid config provided: {quoted}" in out, out
    assert "/dev/shm" not in out, out  # no container ran df


@pytest.mark.parametrize(
    ("option", "message", "mount"),
    [
        (
            "--shm-size=0",
            "--shm-size=0: Podman 4.3 gives /dev/shm no limit (bounded only by memory) "
            "(target Podman 4.3)",
            "shm /dev/shm tmpfs",
        ),
        (
            "--tmpfs /dev/shm:size=0",
            "--tmpfs /dev/shm with size=0: the kernel sets no limit",
            "tmpfs /dev/shm tmpfs",
        ),
    ],
)
def test_shm016_zero_size_is_no_limit_in_podman(
    pm: Runtime, tmp_path: Path, option: str, message: str, mount: str
) -> None:
    fill = (
        "grep ' /dev/shm ' /proc/mounts; "
        f"dd if=/dev/zero of=/dev/shm/fill bs=1M count={WRITE_MIB} 2>&1 && "
        "stat -c 'wrote %s' /dev/shm/fill"
    )
    script, name = _write(pm, tmp_path, option, fill)

    (f,) = _findings(script, 1)
    assert (f["code"], f["severity"], f["message"]) == ("SHM016", "warning", message)

    # tmpfs size=0 is "no limit" (tmpfs(5)); /proc/mounts shows it as size=0k, and more than
    # Podman's default fits.
    rc, out = run_script(pm, script, name, RUN_TIMEOUT_S)
    assert rc == 0, out
    (line,) = [ln for ln in out.splitlines() if ln.startswith(mount)]
    assert "size=0k" in line.split()[3].split(","), line
    assert f"wrote {WRITE_MIB << 20}" in out, out
    assert WRITE_MIB << 20 > PODMAN_DEFAULT_SHM


def test_shm016_control_the_default_stops_the_same_write(pm: Runtime, tmp_path: Path) -> None:
    """Without a size the same write stops at Podman's default: the write above can fail."""
    script, name = _write(
        pm,
        tmp_path,
        "",
        f"dd if=/dev/zero of=/dev/shm/fill bs=1M count={WRITE_MIB}; df -B1 /dev/shm",
    )
    assert _findings(script, 0) == []
    rc, out = run_script(pm, script, name, RUN_TIMEOUT_S)
    assert rc == 0, out
    assert "No space left on device" in out, out
    assert _shm_bytes(out) == PODMAN_DEFAULT_SHM


def test_shm021_podman_fails_on_2gi_tmpfs_and_the_fix_starts(pm: Runtime, tmp_path: Path) -> None:
    script, name = _write(pm, tmp_path, "--tmpfs /dev/shm:size=2Gi", "df -B1 /dev/shm")
    original = script.read_text()

    (f,) = _findings(script, 1)
    assert (f["code"], f["severity"]) == ("SHM021", "error")
    assert f["message"] == (
        "--tmpfs /dev/shm size '2Gi': the kernel rejects it and the container does not start"
    )
    assert f["fix"]["applicability"] == "safe"
    assert [(c["setting"], c["value"]) for c in f["fix"]["changes"]] == [("shm-size", 2 << 30)]

    # The error the rule's doc quotes: runc's mount of the tmpfs fails in the kernel.
    rc, out = run_script(pm, script, name, RUN_TIMEOUT_S)
    assert rc == PODMAN_CANNOT_INVOKE, out
    assert 'error mounting "tmpfs" to rootfs at "/dev/shm"' in out, out
    assert "data: size=2Gi: invalid argument" in out, out

    r = shmguard_cli("check", "--fix", str(script))
    assert r.returncode == 0, r.stdout + r.stderr
    assert script.read_text() == original.replace("size=2Gi", "size=2g", 1)
    assert _findings(script, 0) == []

    rc, out = run_script(pm, script, name, RUN_TIMEOUT_S)
    assert rc == 0, out
    assert _shm_bytes(out) == 2 << 30


def test_shm002_podman_reads_2gi_as_binary(pm: Runtime, tmp_path: Path) -> None:
    script, name = _write(pm, tmp_path, "--shm-size=2Gi", "df -B1 /dev/shm")
    original = script.read_text()

    # Info on a Podman line: below the default fail-on (warning), so check passes.
    (f,) = _findings(script, 0)
    assert (f["code"], f["severity"]) == ("SHM002", "info")
    assert f["message"].startswith(
        "--shm-size 2Gi: Podman 4.x reads the Kubernetes suffix as binary"
    )
    assert [(c["setting"], c["value"]) for c in f["fix"]["changes"]] == [("shm-size", 2 << 30)]

    rc, out = run_script(pm, script, name, RUN_TIMEOUT_S)
    assert rc == 0, out
    assert _shm_bytes(out) == 2 << 30

    # The fix's 2g is the same bytes in Podman.
    r = shmguard_cli("check", "--fix", str(script))
    assert r.returncode == 0, r.stdout + r.stderr
    assert script.read_text() == original.replace("--shm-size=2Gi", "--shm-size=2g", 1)
    rc, out = run_script(pm, script, name, RUN_TIMEOUT_S)
    assert rc == 0, out
    assert _shm_bytes(out) == 2 << 30
