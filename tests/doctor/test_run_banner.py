"""`shmguard run`'s banner from fixture hosts: the --brief line, --require met or not, and the
runtime-specific fix of an unmet --require."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from shmguard.lint.doctor import DoctorOptions, diagnose
from shmguard.render.parts import print_parts
from shmguard.render.run_text import (
    banner_parts,
    brief_line,
    require_failure_parts,
    require_met,
)
from shmguard.units import GiB, MiB


def text_of(parts) -> str:
    buf = io.StringIO()
    print_parts(Console(file=buf, width=100, no_color=True, force_terminal=False), parts)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines())


def test_brief_line_says_size_free_runtime_verdict_and_require(host):
    report = diagnose(host("docker-v2-default"), DoctorOptions(require=GiB))
    assert brief_line(report, GiB) == (
        "shmguard run: /dev/shm 64 MiB, 64 MiB free · runtime docker · "
        "verdict: error ENV002, warning ENV001 · --require 1 GiB: NOT MET"
    )
    report = diagnose(host("docker-v2-default"), DoctorOptions(require=32 * MiB))
    assert brief_line(report, 32 * MiB).endswith("verdict: warning ENV001 · --require 32 MiB: met")
    report = diagnose(host("docker-v2-default"))
    assert brief_line(report, None) == (
        "shmguard run: /dev/shm 64 MiB, 64 MiB free · runtime docker · verdict: warning ENV001"
    )


def test_missing_shm_never_meets_require(host):
    report = diagnose(host("docker-ipc-none"), DoctorOptions(require=MiB))
    assert not require_met(report, MiB)
    assert require_met(report, None)
    assert "/dev/shm missing · runtime docker" in brief_line(report, MiB)
    out = text_of(require_failure_parts(report, MiB, ["python", "train.py"], snippets=True))
    assert out.splitlines()[0] == (
        "shmguard run: --require 1 MiB not met: /dev/shm does not exist; "
        "not starting python train.py"
    )
    assert "--ipc=private" in out  # ENV008's fix


@pytest.mark.parametrize(
    ("scenario", "have", "snippet", "absent"),
    [
        (
            "docker-v2-default",
            "/dev/shm has 64 MiB free",
            "docker run --shm-size=1536m --memory=10g IMAGE ...",
            "sizeLimit",
        ),
        ("k8s-v2-sized-full", "/dev/shm has 102 MiB free", "sizeLimit: 4Gi", "docker run"),
        ("podman-v2-default", "/dev/shm has ~62.45 MiB free", "podman run --shm-size=1536m", "k8s"),
    ],
)
def test_unmet_require_says_what_is_needed_what_is_there_and_the_runtimes_fix(
    host, scenario, have, snippet, absent
):
    report = diagnose(host(scenario), DoctorOptions(require=GiB))
    assert not require_met(report, GiB)
    out = text_of(require_failure_parts(report, GiB, ["python", "train.py"], snippets=True))
    first = out.splitlines()[0]
    assert first.startswith("shmguard run: --require 1 GiB not met: ")
    assert have in first and first.endswith("not starting python train.py")
    assert snippet in out
    assert absent not in out
    # Without --brief the banner above already shows the fix: only the message line.
    short = text_of(require_failure_parts(report, GiB, ["python", "train.py"], snippets=False))
    assert short == first


def test_banner_summary_says_what_run_does_next(host):
    report = diagnose(host("docker-v2-default"), DoctorOptions(require=GiB))
    out = text_of(banner_parts(report, GiB))
    assert "shmguard doctor: errors found" in out.splitlines()[0]
    assert "1 error, 1 warning, 0 info · --require 1 GiB NOT met: not starting the command" in out
    assert "exit " not in out  # doctor's exit status is not run's
    report = diagnose(host("docker-v2-default"), DoctorOptions(require=32 * MiB))
    out = text_of(banner_parts(report, 32 * MiB))
    assert "--require 32 MiB met (64 MiB free): starting the command" in out
    out = text_of(banner_parts(diagnose(host("docker-v2-default")), None))
    assert "0 errors, 1 warning, 0 info · starting the command" in out
