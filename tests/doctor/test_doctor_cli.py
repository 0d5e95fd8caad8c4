"""`shmguard doctor` through the real console script: namespaces, exit codes, output modes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

needs_ns = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for a private mount namespace",
)


def shmguard_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("shmguard")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "shmguard"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*shmguard_cmd(), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def run_in_64m(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI inside a private mount namespace whose /dev/shm is a fresh 64 MiB tmpfs."""
    cmd = " ".join(f"'{a}'" for a in (*shmguard_cmd(), *args))
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c",
         f"mount -t tmpfs -o size=64m tmpfs /dev/shm && exec {cmd}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )  # fmt: skip


@needs_ns
def test_json_in_64m_namespace_reports_exact_total_and_flags_the_default():
    out = run_in_64m("doctor", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "shmguard.doctor/1"
    assert doc["facts"]["shm"]["total"] == 67108864
    assert doc["facts"]["shm"]["default_of"] == ["docker", "containerd", "cri-o"]
    env001 = [f for f in doc["findings"] if f["code"] == "ENV001"]
    assert len(env001) == 1 and env001[0]["severity"] == "warning"
    assert doc["summary"]["exit_status"] == 0
    # Honest about this machine: memory figures come from cgroup v1.
    assert doc["facts"]["cgroup"]["version"] in (1, 2)


@needs_ns
def test_require_1g_in_64m_exits_1_naming_the_fix():
    out = run_in_64m("doctor", "--require", "1g", env=dict(os.environ, NO_COLOR="1"))
    assert out.returncode == 1, out.stderr
    assert "ENV002 shm-free-below-require" in out.stdout
    assert "/dev/shm has 64 MiB free, below the 1 GiB required (--require)" in out.stdout
    assert "--shm-size=1536m" in out.stdout  # 1 GiB + 25% = 1.25 GiB would be 80% full: 1.5 GiB
    assert "\x1b[" not in out.stdout  # NO_COLOR
    js = run_in_64m("doctor", "--require", "1g", "--json")
    assert js.returncode == 1
    doc = json.loads(js.stdout)
    (env002,) = [f for f in doc["findings"] if f["code"] == "ENV002"]
    assert env002["severity"] == "error"
    assert any("--shm-size=1536m" in s["text"] for s in env002["fix"]["snippets"])
    assert doc["summary"]["exit_status"] == 1


@needs_ns
def test_brief_banner_and_fail_on():
    out = run_in_64m("doctor", "--brief", "--require", "1g", env=dict(os.environ, NO_COLOR="1"))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert len(lines) <= 24  # one screen
    assert "shmguard doctor: errors found" in lines[0]
    assert any("ENV002" in line for line in lines)
    assert any("docker run --shm-size=1536m" in line for line in lines)
    assert run_in_64m("doctor", "--json", "--fail-on", "warning").returncode == 1
    assert run_in_64m("doctor", "--json", "--fail-on", "never", "--require", "1g").returncode == 0


@needs_ns
def test_default_64m_is_a_warning_and_exits_0_as_the_docs_say():
    # README once said doctor exits 1 on findings; a 64 MiB default is a warning and exits 0.
    out = run_in_64m("doctor", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    env001 = [f for f in doc["findings"] if f["code"] == "ENV001"]
    assert env001 and env001[0]["severity"] == "warning"
    assert doc["summary"]["fail_on"] == "error" and doc["summary"]["exit_status"] == 0
    page = " ".join((Path(__file__).parents[2] / "docs" / "doctor.md").read_text().split())
    assert "Exit status: 0 when no finding reaches `--fail-on`, 1 when one does" in page
    assert "a runtime-default 64 MiB /dev/shm is a warning (ENV001), reported with" in page
    assert "its fix, and exits 0; `--fail-on warning` makes it exit 1" in page


def test_usage_errors_are_one_line_exit_2(tmp_path: Path):
    bad = run("doctor", "--require", "1gig")
    assert bad.returncode == 2
    assert bad.stderr.startswith("shmguard: error: --require: invalid size '1gig'")
    assert bad.stderr.count("\n") == 1 and bad.stdout == ""
    nopid = run("doctor", "--pid", "999999999")
    assert (nopid.returncode, nopid.stderr) == (
        2,
        "shmguard: error: --pid 999999999: no such process under /proc\n",
    )
    noroot = run("doctor", "--root", str(tmp_path / "nope"))
    assert noroot.returncode == 2 and "not a directory" in noroot.stderr
    (tmp_path / "statvfs.json").write_text("[1, 2]")
    broken = run("doctor", "--root", str(tmp_path))
    assert broken.returncode == 2
    assert broken.stderr.startswith(f"shmguard: error: {tmp_path}/statvfs.json: not a statvfs")
    assert "Traceback" not in broken.stderr


def test_root_fixture_tree_through_the_cli(tmp_path: Path):
    root = tmp_path / "k8s"
    shutil.copytree(Path(__file__).parents[1] / "fixtures/hosts/k8s-v2-unsized-emptydir", root)
    (root / "dev/shm").mkdir(parents=True)
    out = run("doctor", "--root", str(root), "--json", "--fail-on", "warning")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert [f["code"] for f in doc["findings"]] == ["ENV005", "ENV007"]
    assert doc["facts"]["runtime"]["name"] == "kubernetes"
    assert [s["runtime"] for s in doc["findings"][0]["fix"]["snippets"]] == ["kubernetes"]


def test_json_path_imports_no_rich_torch_or_yaml():
    code = (
        "import sys\n"
        "sys.argv = ['shmguard', 'doctor', '--json']\n"
        "from shmguard.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = {'rich', 'torch', 'matplotlib', 'yaml', 'numpy'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stderr.strip().splitlines()[-1] == "[]"
    json.loads(out.stdout)


def test_text_report_on_this_machine_is_honest_about_cgroup_v1():
    out = run("doctor", env=dict(os.environ, NO_COLOR="1"))
    assert out.returncode in (0, 1)
    cgroup = Path("/proc/self/cgroup").read_text()
    if any(":memory:" in line for line in cgroup.splitlines()):
        assert "cgroup v1" in out.stdout
    assert "runtime" in out.stdout and "/dev/shm" in out.stdout


@pytest.mark.slow
@pytest.mark.torch
def test_torch_flag_reports_version_and_strategy():
    torch = pytest.importorskip("torch")
    out = run("doctor", "--json", "--torch")
    doc = json.loads(out.stdout)
    assert doc["facts"]["torch"]["version"] == str(torch.__version__)
    assert doc["facts"]["torch"]["sharing_strategy"] == "file_descriptor"
    assert "file_system" in doc["facts"]["torch"]["strategies"]


@needs_ns
def test_require_that_is_met_says_so():
    out = run_in_64m("doctor", "--require", "32m", env=dict(os.environ, NO_COLOR="1"))
    assert out.returncode == 0, out.stderr
    assert "ENV002" not in out.stdout
    assert out.stdout.rstrip().endswith("--require 32 MiB: met (64 MiB free)")


# In a private mount namespace with its own 64 MiB /dev/shm: hold a 1 MiB psm_ file open.
HOLD = (
    "mount -t tmpfs -o size=64m tmpfs /dev/shm && exec python3 -c '"
    'import os, sys; fd = os.open("/dev/shm/psm_pid", os.O_RDWR | os.O_CREAT, 0o600); '
    'os.posix_fallocate(fd, 0, 1 << 20); print("ready", flush=True); sys.stdin.read()\''
)


def _ns(pid: int | str) -> tuple[str, str] | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt"), os.readlink(f"/proc/{pid}/ns/ipc")
    except OSError:
        return None


@needs_ns
def test_pid_scans_the_holders_of_its_container_not_the_host() -> None:
    # doctor --pid N said "1 unreadable (pid 1: /proc/1/maps: permission denied)": the host's
    # pid 1, not a process of N's container.
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c", HOLD],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        child = int(Path(f"/proc/{holder.pid}/task/{holder.pid}/children").read_text().split()[0])
        out = run("doctor", "--pid", str(child), "--json")
        brief = run("doctor", "--pid", str(child))
        mnt, ipc = _ns(child) or ("", "")
        outside = sorted(
            int(p)
            for p in os.listdir("/proc")
            if p.isdigit() and (ns := _ns(p)) is not None and ns[0] != mnt and ns[1] != ipc
        )
        unreadable = [int(p) for p in os.listdir("/proc") if p.isdigit() and _ns(p) is None]
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=20)
        holder.stdout.close()  # type: ignore[union-attr]
    holders = json.loads(out.stdout)["facts"]["holders"]
    assert [(p["pid"], p["bytes"]) for p in holders["processes"]] == [(child, 1 << 20)]
    # No error line names a process outside the namespaces (nor one whose can't be read).
    named = {int(e.split(":")[0].removeprefix("pid ")) for e in holders["errors"]}
    assert not named & {*outside, *unreadable}, holders["errors"]
    line = next(ln for ln in brief.stdout.splitlines() if ln.startswith("holders"))
    assert " ".join(line.split()) == f"holders 1 MiB held (psm 1 MiB): pid {child} python3 1 MiB"
