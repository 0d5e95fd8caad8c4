"""`shmguard doctor` against the inputs a platform engineer really meets: filesystems without a
block count, unreadable targets, garbage trees, narrow terminals. Every JSON document is
validated against the packaged schema."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from schema_registry import validator
from shmguard.fix.snippets import fix_snippets
from shmguard.lint.doctor import DoctorOptions, diagnose
from shmguard.model import Fact, FailOn
from shmguard.render import doctor_text

pytestmark = pytest.mark.timeout(120)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
needs_ns = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for a private mount namespace",
)


def shmguard_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("shmguard")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "shmguard"]


def validate(doc: dict) -> dict:
    validator("doctor").validate(doc)
    return doc


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*shmguard_cmd(), *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def run_in_ns(setup: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = " ".join(f"'{a}'" for a in (*shmguard_cmd(), *args))
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c",
         f"{setup} && exec {cmd}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@needs_ns
@pytest.mark.parametrize(
    ("setup", "codes"),
    [
        ("mount -t tmpfs -o size=0 tmpfs /dev/shm", ["ENV010"]),
        ("mount -t ramfs ramfs /dev/shm", ["ENV009"]),
    ],
)
def test_require_on_a_filesystem_without_block_count_is_not_an_error(setup, codes):
    # statvfs gives 0/0/0 here; doctor used to say "/dev/shm has 0 B free, below the 1 GiB
    # required" and exit 1, although nothing limits the size.
    out = run_in_ns(setup + " && head -c 1048576 /dev/zero > /dev/shm/f", "doctor", "--json",
                    "--require", "1g")  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = validate(json.loads(out.stdout))
    assert [f["code"] for f in doc["findings"]] == codes
    assert doc["facts"]["shm"]["free"]["value"] is None
    assert doc["facts"]["shm"]["free"]["reason"].startswith("statvfs(/dev/shm) reports 0 blocks")


@needs_ns
def test_text_line_for_a_ramfs_says_unknown_size_with_the_reason():
    out = run_in_ns("mount -t ramfs ramfs /dev/shm", "doctor", "--brief")
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.replace("│", " ").split())
    assert "/dev/shm: unknown (statvfs(/dev/shm) reports 0 blocks: ramfs keeps no" in flat
    assert "0 B ramfs" not in flat


def test_pid_1_never_tracebacks():
    # On this machine /proc/1/root is unreadable even to root; doctor used to die in
    # Path.is_dir() with PermissionError.
    out = run("doctor", "--pid", "1", "--json", "--fail-on", "never")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    doc = validate(json.loads(out.stdout))
    try:
        os.stat("/proc/1/root/dev/shm")
    except PermissionError:
        shm = doc["facts"]["shm"]
        why = "/proc/1/root/dev/shm: permission denied"
        assert shm["exists"] == {"value": None, "reason": why}
        assert "ENV008" not in [f["code"] for f in doc["findings"]]  # unknown is not missing
        if doc["facts"]["runtime"]["name"] == "unknown":
            assert (
                "could not read /proc/1/root: permission denied"
                in (doc["facts"]["runtime"]["evidence"])
            )


def test_unreadable_root_is_one_line_exit_2():
    try:
        os.stat("/proc/1/root/")
        pytest.skip("/proc/1/root is readable here")
    except PermissionError:
        pass
    out = run("doctor", "--root", "/proc/1/root")  # used to be a PermissionError traceback
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == "shmguard: error: --root /proc/1/root: permission denied\n"


def test_negative_statvfs_record_is_one_line_exit_2(tmp_path: Path):
    (tmp_path / "statvfs.json").write_text(
        '{"/dev/shm": {"f_frsize": 4096, "f_blocks": -5, "f_bfree": 0, "f_bavail": 0}}'
    )
    out = run("doctor", "--root", str(tmp_path), "--json")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"shmguard: error: {tmp_path}/statvfs.json: not a statvfs record "
        "(/dev/shm: f_blocks is not a non-negative integer: -5)\n"
    )


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("proc/meminfo", "MemTotal: \u00b2 kB\n"),
        ("proc/self/limits", "Limit\nMax open files            10\u00b24  1024  files\n"),
        ("proc/self/mountinfo", "1137 1132 0:125 / /dev/shm rw - tmpfs shm rw,size=6"),
        ("proc/self/cgroup", "\x00\x01\x02"),
        ("sys/fs/cgroup/memory.max", "-1\n"),
        ("sys/fs/cgroup/cpuset.cpus.effective", "\x00\xff"),
        ("proc/sysvipc/shm", ""),
    ],
)
def test_garbage_tree_file_gives_valid_json_without_traceback(tmp_path, name, text):
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "docker-v2-default", root)
    (root / "dev/shm").mkdir(parents=True)
    (root / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    out = run("doctor", "--root", str(root), "--json", "--fail-on", "never")
    assert out.returncode == 0, out.stderr
    validate(json.loads(out.stdout))


def test_env008_fix_says_a_size_alone_does_not_undo_ipc_none(host):
    (f,) = diagnose(host("docker-ipc-none")).findings
    assert f.code == "ENV008"
    assert f.fix is not None
    assert f.fix.description.endswith(
        "With --ipc=none there is no /dev/shm whatever the size: use --ipc=private."
    )


def test_unknown_exists_is_not_reported_missing(host):
    facts = host("docker-v2-default")
    from dataclasses import replace

    unknown = replace(facts.shm, exists=Fact.unknown("/proc/9/root/dev/shm: permission denied"))
    report = diagnose(replace(facts, shm=unknown), DoctorOptions())
    assert "ENV008" not in [f.code for f in report.findings]


@pytest.mark.parametrize("width", [40, 80])
def test_snippets_are_never_wrapped_or_cropped(host, width):
    # At COLUMNS=40 `docker run --shm-size=1g IMAGE ...` used to break after IMAGE and the ECS
    # JSON in the middle of an object: no longer something to paste.
    report = diagnose(host("docker-v1-ipc-host"), DoctorOptions(require=1 << 30))
    buf = io.StringIO()
    parts = doctor_text.report_parts(report, FailOn.ERROR, 1)
    doctor_text.print_parts(Console(file=buf, width=width, no_color=True), parts)
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    snippets = {s.text for f in report.findings if f.fix for s in fix_snippets(f.fix)}
    assert snippets
    for text in snippets:
        block = [" " * 10 + line if line else "" for line in text.splitlines()]
        starts = [i for i, line in enumerate(lines) if line == block[0]]
        assert any(lines[i : i + len(block)] == block for i in starts), text


def test_cli_narrow_terminal_keeps_snippets_whole(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "docker-v2-default", root)
    (root / "dev/shm").mkdir(parents=True)
    env = dict(os.environ, COLUMNS="40", NO_COLOR="1")
    out = run("doctor", "--root", str(root), "--require", "1g", env=env)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert "          docker run --shm-size=1536m --memory=10g IMAGE ..." in lines
    brief = run("doctor", "--root", str(root), "--require", "1g", "--brief", env=env)
    assert "  docker run --shm-size=1536m --memory=10g IMAGE ..." in brief.stdout.splitlines()


def test_env006_fix_follows_the_runtime(host):
    from dataclasses import replace

    from shmguard.model.host import RuntimeFacts

    facts = host("docker-v1-ipc-host")
    fixes = {}
    for name in ("kubernetes", "podman", "none"):
        f = replace(facts, runtime=RuntimeFacts(name, ()))
        (env006,) = [x for x in diagnose(f).findings if x.code == "ENV006"]
        assert env006.fix is not None
        fixes[name] = env006.fix.description
    assert "docker run --ulimit" not in fixes["kubernetes"]  # no such thing in a pod spec
    assert "Kubernetes has no pod setting for it" in fixes["kubernetes"]
    assert "podman run --ulimit nofile=65536:65536" in fixes["podman"]
    assert "docker run --ulimit" not in fixes["podman"]
    assert "docker run --ulimit" in fixes["none"] and "podman run --ulimit" in fixes["none"]


def test_unsized_host_shm_fix_says_ipc_host_ignores_shm_size(host):
    report = diagnose(host("docker-v1-ipc-host"))
    env010 = next(f for f in report.findings if f.code == "ENV010")
    assert env010.fix is not None
    assert env010.fix.description.endswith(
        "An unsized /dev/shm is usually the host's (--ipc=host), where --shm-size has no "
        "effect: run with --ipc=private (the default) for the size to apply."
    )


def test_pid_of_a_zombie_is_not_reported_without_dev_shm():
    # /proc/<zombie>/root is gone (ENOENT) while /proc/<zombie> still exists: doctor used to
    # say "ENV008 /dev/shm does not exist" and exit 1.
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(500):  # up to 5 s for the child to exit (not reaped: a zombie)
            if not os.path.lexists(f"/proc/{zombie.pid}/root/"):
                break
            time.sleep(0.01)
        out = run("doctor", "--pid", str(zombie.pid), "--json")
    finally:
        zombie.wait(timeout=20)
    assert out.returncode == 0, out.stderr
    doc = validate(json.loads(out.stdout))
    exists = doc["facts"]["shm"]["exists"]
    assert exists == {
        "value": None,
        "reason": f"/proc/{zombie.pid}/root: no such file or directory (has the process exited?)",
    }
    assert "ENV008" not in [f["code"] for f in doc["findings"]]


def _v1_memory_dir() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            path = Path("/sys/fs/cgroup/memory" + parts[2])
            return path if (path / "memory.limit_in_bytes").is_file() else None
    return None


@needs_ns
def test_real_v1_child_cgroup_limit_and_shm_charge():
    parent = _v1_memory_dir()
    if parent is None:
        pytest.skip("no writable cgroup v1 memory controller here")
    child = parent / f"shmguard-test-{os.getpid()}"
    child.mkdir()
    try:
        (child / "memory.limit_in_bytes").write_text("1610612736")  # 1.5 GiB
        cmd = " ".join(f"'{a}'" for a in (*shmguard_cmd(), "doctor", "--json"))
        script = (
            f"echo $$ > {child}/cgroup.procs && mount -t tmpfs -o size=1g tmpfs /dev/shm && "
            f"head -c 104857600 /dev/zero > /dev/shm/f && exec {cmd}"
        )
        out = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c", script],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        doc = validate(json.loads(out.stdout))
        cg = doc["facts"]["cgroup"]
        assert (cg["version"], cg["memory_dir"]) == (1, str(child))
        assert (cg["memory_limit"], cg["shmem"], cg["oom_kills"]) == (1610612736, 104857600, 0)
        assert doc["facts"]["shm"]["used"] == 104857600
        (env005,) = [f for f in doc["findings"] if f["code"] == "ENV005"]
        assert env005["message"] == (
            "the memory limit (1.5 GiB) leaves 512 MiB beside a full /dev/shm (1 GiB); "
            "less than 1 GiB"
        )
        assert (
            env005["fix"]["snippets"][0]["text"]
            == ("docker run --shm-size=1g --memory=2560m IMAGE ...")
            or doc["facts"]["runtime"]["name"] != "docker"
        )
    finally:
        child.rmdir()  # the namespace and its processes are gone: the cgroup is empty


@needs_ns
def test_disk_bind_mount_is_not_sized_from_the_whole_disk(tmp_path):
    # statvfs of a bind-mounted disk directory is the disk's: the fix for --require 1g used to
    # be "--shm-size=24459m" (the disk's 22.9 GiB used + 1 GiB) and ENV003 fired on a full disk.
    disk = tmp_path / "shmdir"
    disk.mkdir()
    (disk / "data").write_bytes(b"\1" * (3 * 1024 * 1024))
    out = run_in_ns(f"mount --bind {disk} /dev/shm", "doctor", "--json", "--require", "1g")
    doc = validate(json.loads(out.stdout))
    assert doc["facts"]["shm"]["sizing"] == "not-tmpfs"
    assert doc["facts"]["shm"]["named_bytes"] == 3 * 1024 * 1024
    codes = [f["code"] for f in doc["findings"]]
    assert "ENV003" not in codes
    env009 = next(f for f in doc["findings"] if f["code"] == "ENV009")
    assert env009["fix"]["description"].startswith(
        "Give /dev/shm what it holds now plus --require, with 25% headroom: 1.5 GiB."
    )
    texts = [s["text"] for s in env009["fix"]["snippets"]]
    if doc["facts"]["runtime"]["name"] == "docker":  # (3 MiB in /dev/shm + 1 GiB) x 1.25
        assert texts[0] == "docker run --shm-size=1536m IMAGE ..."
