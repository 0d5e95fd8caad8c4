"""The Rich report and --brief banner, rendered from fixture hosts to plain text."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from shmguard.lint.doctor import DoctorOptions, diagnose
from shmguard.model import FailOn, exit_status
from shmguard.render.doctor_text import render_brief, render_report
from shmguard.units import GiB, KiB


def text_of(renderable) -> str:
    buf = io.StringIO()
    Console(file=buf, width=100, no_color=True, force_terminal=False).print(renderable)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines())


def test_report_lists_facts_findings_and_fixes(host):
    report = diagnose(host("docker-v1-ipc-host"))
    out = text_of(render_report(report, FailOn.ERROR, 0))
    assert "runtime   docker (/.dockerenv exists)" in out
    assert "memory    cgroup v1 · limit 4 GiB · in use 3 GiB · shm charged 2 GiB" in out
    assert "limits    nofile 1024/1024 · memlock 64 KiB/64 KiB" in out
    assert "SysV shm  1 segment, 1 MiB" in out
    for code in ("ENV004 shm-exceeds-memory-limit", "ENV006 nofile-low", "ENV010"):
        assert code in out
    # ENV004's fix: the host's unsized /dev/shm (--ipc=host) is not copied into --shm-size or
    # covered by a 36 GiB limit; the job gets its own sized /dev/shm under the 4 GiB limit.
    assert "docker run --shm-size=1g --memory=4g IMAGE ..." in out
    assert "--memory=36g" not in out and "--shm-size=32919024k" not in out
    assert out.rstrip().endswith("0 errors, 3 warnings, 0 info · exit 0 (--fail-on error)")


def test_holders_are_named_by_program(host):
    # Segments of Chromium, PostgreSQL, Open MPI (vader, sm), PSM2 and UCX left in /dev/shm.
    facts = host("docker-v2-programs")
    held = facts.holders.value
    assert held is not None and not held.processes
    got = {k: v for k, v in held.by_kind.items() if v}
    assert got == {"chromium": 64 * KiB, "postgres": 32 * KiB, "mpi": 28 * KiB, "ucx": 8 * KiB}
    out = " ".join(text_of(render_report(diagnose(facts), FailOn.ERROR, 0)).split())
    assert (
        "holders no process holds /dev/shm files; 6 named file(s) hold 132 KiB "
        "(chromium 64 KiB, postgres 32 KiB, mpi 28 KiB, ucx 8 KiB)"
    ) in out


def test_unknown_facts_show_their_reason(host):
    out = text_of(render_report(diagnose(host("docker-ipc-none")), FailOn.ERROR, 1))
    assert "/dev/shm  missing" in out
    assert "holders   unknown (/dev/shm: no such directory)" in out


@pytest.mark.parametrize(
    "scenario", ["docker-v2-default", "k8s-v2-unsized-emptydir", "docker-v1-ipc-host"]
)
def test_brief_fits_one_screen(host, scenario):
    report = diagnose(host(scenario), DoctorOptions(require=GiB))
    code = exit_status(report.findings, FailOn.ERROR)
    out = text_of(render_brief(report, FailOn.ERROR, code))
    lines = out.splitlines()
    assert len(lines) <= 24
    worst = "errors" if any(f.severity.value == "error" for f in report.findings) else "warnings"
    assert f"shmguard doctor: {worst} found" in lines[0]
    assert (worst == "errors") == (scenario == "docker-v2-default")  # 64 MiB < 1 GiB
    assert f"exit {code} (--fail-on error)" in out
    for f in report.findings:
        assert f.code in out
