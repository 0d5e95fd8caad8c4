"""Output that pastes (issue 23 item 5): what plan, measure, probe, doctor, watch --once and the
demo print into a pipe has no trailing spaces, never splits a size over two lines, and wraps
its prose only when COLUMNS says so (cli/_output.py, render/wrap.py). Each command runs as a
real subprocess with its standard output a pipe."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shmguard.render.wrap import atoms, divide_line

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
#: A line that ends in a number, and a next line that starts with its unit.
_NUMBER_END = re.compile(r"(?:^|[\s(~])[\d.,]*\d$")  # a number, not a folded word's end
_UNIT_START = re.compile(r"^\s*(?:B|KiB|MiB|GiB|TiB|kB|MB|GB|s|ms|%)(?![\w])")
#: 1 MiB written and held while the sampler polls (tests/measure/test_cli.py does the same).
JOB = ["sh", "-c", "head -c 1048576 /dev/zero > /dev/shm/held-while-sampled; sleep 0.2"]
PLAN = ["plan", "--batch-size", "32", "--sample-shape", "3,224,224", "--num-workers", "4"]


@pytest.fixture
def root_only() -> None:
    """Skip unless root (measure and probe need a private mount namespace and cgroups)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")


def shmguard(*args: str, columns: int | None = None, timeout: float = 120) -> str:
    """Standard output of ``shmguard ARGS`` into a pipe (exit 0 asserted), COLUMNS as given."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def assert_pastes(text: str) -> list[str]:
    """No line ends with a space or a tab; no line ends with a number whose unit starts the
    next. Returns the lines."""
    lines = text.splitlines()
    assert lines
    padded = [line for line in lines if line != line.rstrip()]
    assert padded == [], f"{len(padded)} lines end with spaces, e.g. {padded[0]!r}"
    for here, following in itertools.pairwise(lines):
        split = _NUMBER_END.search(here) and _UNIT_START.match(following)
        assert not split, f"a size split over two lines: {here!r} / {following!r}"
    return lines


def _doctor(columns: int | None = None) -> str:
    # a fixture host with a finding, so there is wrapped prose with sizes in it
    root = HOSTS / "docker-v2-default"
    return shmguard("doctor", "--root", str(root), "--fail-on", "never", columns=columns)


def test_plan_is_one_line_per_row_without_columns() -> None:
    lines = assert_pastes(shmguard(*PLAN))
    steady = next(line for line in lines if line.startswith("steady "))
    assert steady.endswith("queues full")  # the row's prose on one line, not wrapped at 80
    assert max(len(line) for line in lines) > 80


def test_plan_wraps_at_columns_and_keeps_sizes_whole() -> None:
    wide = shmguard(*PLAN).splitlines()
    lines = assert_pastes(shmguard(*PLAN, columns=60))
    assert len(lines) > len(wide)  # the prose wrapped
    prose = [line for line in lines if "  # " not in line]  # snippet comments are verbatim
    assert max(len(line) for line in prose) <= 60
    assert "256 MiB" in "\n".join(lines)


def test_doctor_piped() -> None:
    lines = assert_pastes(_doctor())
    assert any("(Docker --ipc=none, or a minimal /dev)" in line for line in lines)  # one line
    narrow = assert_pastes(_doctor(columns=60))
    assert len(narrow) > len(lines)
    assert max(len(line) for line in narrow if "  # " not in line and "{" not in line) <= 60


@pytest.mark.parametrize("columns", [44, 46, 50, 58])
def test_sizes_stay_whole_at_widths_that_split_them_before(columns: int) -> None:
    # at these widths Rich's own wrapping put "256" and "MiB)" (plan) or a size of a doctor
    # finding's prose on two lines
    assert_pastes(shmguard(*PLAN, columns=columns))
    for host in ("docker-v2-default", "k8s-v2-sized-full"):
        root = HOSTS / host
        assert_pastes(
            shmguard("doctor", "--root", str(root), "--fail-on", "never", columns=columns)
        )


def test_doctor_folds_a_long_path_instead_of_cutting_it() -> None:
    text = _doctor(columns=60)
    assert "…" not in text
    assert "nvidiactl" in "".join(text.split())  # folded, every character kept


def test_watch_once_piped() -> None:
    for columns in (None, 60):
        lines = assert_pastes(shmguard("watch", "--once", "--interval", "100ms", columns=columns))
        assert lines[0].startswith("/dev/shm (")


@pytest.mark.root
@pytest.mark.timeout(180)
@pytest.mark.parametrize("columns", [None, 60])
def test_measure_piped(root_only: None, columns: int | None) -> None:
    lines = assert_pastes(shmguard("measure", "--", *JOB, columns=columns))
    assert "command        sh -c 'head -c 1048576" in "\n".join(lines)
    if columns is None:
        assert any(line.startswith("shm size ") and line.endswith("you have))") for line in lines)
    else:
        assert max(len(line) for line in lines if not line.startswith(("command", "  "))) <= 60


@pytest.mark.root
@pytest.mark.timeout(240)
@pytest.mark.parametrize("columns", [None, 60])
def test_probe_piped(root_only: None, columns: int | None) -> None:
    out = shmguard("probe", "--no-verify", "--confirm", "1", "--", *JOB, columns=columns)
    lines = assert_pastes(out)
    assert "Pass rate per size" in lines  # the table's title on one line above it
    assert any(line.startswith("measuring run  ok with a ") for line in lines)


@pytest.mark.root
@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_demo_piped(root_only: None) -> None:
    pytest.importorskip("torch")
    lines = assert_pastes(shmguard("demo", "--batches", "10", timeout=380))
    if any(line.startswith("Result: failed: shm-exhausted") for line in lines):
        # torch's quoted error line, whole on one line (a run that hangs, ~5%, has none)
        torch_line = next(line for line in lines if "allocate shared memory(shm) for" in line)
        assert torch_line.startswith("  RuntimeError: ") and "No space left on" in torch_line
    # each step's header whole ("1. ... 64 MiB /dev/shm" was cut with "…" at 80 columns)
    title = "1. A typical image-classification DataLoader in Docker's default 64 MiB /dev/shm"
    assert any(title in line for line in lines)
    assert not any("…" in line for line in lines)
    assert any(
        line.startswith("Each batch is 32 images") and "64 MiB unless" in line for line in lines
    )


def test_a_size_is_one_atom() -> None:
    text = "peak 64 MiB of 64 MiB, used 0 B (0%) after 3.8 s"
    assert [a.strip() for _, a in atoms(text, 80)] == [
        "peak", "64 MiB", "of", "64 MiB,", "used", "0 B", "(0%)", "after", "3.8 s",
    ]  # fmt: skip
    for width in range(8, len(text)):
        breaks = [0, *divide_line(text, width), len(text)]
        pieces = [text[a:b].strip() for a, b in itertools.pairwise(breaks)]
        assert not any(re.search(r"\d$", p) for p in pieces[:-1]), (width, pieces)


def test_a_quoted_message_that_fits_is_one_atom() -> None:
    text = "the DataLoader raised `unable to allocate shared memory(shm)` and stopped"
    for width in range(40, len(text)):
        breaks = [0, *divide_line(text, width), len(text)]
        pieces = [text[a:b] for a, b in itertools.pairwise(breaks)]
        assert any("`unable to allocate shared memory(shm)`" in p for p in pieces), width
    # longer than the line: it wraps at its spaces (nothing is lost)
    breaks = divide_line(text, 20)
    assert (
        breaks
        and "".join(text[a:b] for a, b in zip([0, *breaks], [*breaks, len(text)], strict=False))
        == text
    )
