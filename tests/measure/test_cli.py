"""`shmguard sandbox|measure|probe` as a user runs them: exit codes, errors, JSON, plots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schema_registry import validator
from shmguard.units import MiB

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

NEED_40M = "head -c 41943040 /dev/zero > /dev/shm/x"


def shmguard(
    *args: str, timeout: float = 90, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmguard", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )


@pytest.mark.parametrize("command", ["sandbox", "measure"])
@pytest.mark.parametrize(
    ("size", "message"),
    [
        ("0", "--shm-size: invalid size '0': must be greater than 0"),
        ("-1", "--shm-size: invalid size '-1': must not be negative; write one number"),
        ("1 g g", "--shm-size: invalid size '1 g g'; write one number and an optional unit"),
        ("64 MB MB", "--shm-size: invalid size '64 MB MB'"),
    ],
)
def test_bad_sizes(command: str, size: str, message: str) -> None:
    done = shmguard(command, "--shm-size", size, "--", "true")
    assert done.returncode == 2
    assert done.stderr.startswith(f"shmguard: error: {message}")
    assert done.stderr.count("\n") == 1  # one line, no traceback


@pytest.mark.parametrize("command", ["sandbox", "measure", "probe"])
def test_command_that_does_not_exist(command: str) -> None:
    args = ["--shm-size", "8m"] if command == "sandbox" else []
    done = shmguard(command, *args, "--", "shmguard-no-such-command", "--flag")
    assert done.returncode == 2
    assert (
        done.stderr
        == "shmguard: error: command not found: shmguard-no-such-command (not on PATH)\n"
    )


@pytest.mark.parametrize("command", ["sandbox", "measure", "probe"])
@pytest.mark.parametrize("option", ["--bogus", "--quiet", "-x"])
def test_unknown_option_before_the_command_is_a_usage_error(
    command: str, option: str, tmp_path: Path
) -> None:
    # `measure --quiet -- x` took `--quiet` for the command: "command not found: --quiet".
    args = ["--shm-size", "8m"] if command == "sandbox" else []
    marker = tmp_path / "ran"
    done = shmguard(command, *args, option, "--", "touch", str(marker))
    assert done.returncode == 2
    assert f"No such option: {option}" in done.stderr
    assert "command not found" not in done.stderr
    assert not marker.exists()
    assert done.stdout == ""


def test_options_after_the_command_belong_to_it(root_only: None) -> None:
    # Without `--`, everything from the first word of the command on is the command's.
    done = shmguard("sandbox", "--shm-size", "8m", "sh", "-c", 'echo "$@"', "x", "--a", "-b")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "--a -b\n"


def test_missing_command() -> None:
    done = shmguard("measure")
    assert done.returncode == 2
    assert "no command given" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tolerance", "0"], "--tolerance: must be between 0% and 100%"),
        (["--confirm", "0"], "--confirm: must be from 1 to 10, got 0"),
        (["--confirm", "100000"], "--confirm: must be from 1 to 10, got 100000"),
        (["--floor", "1g", "--ceiling", "64m"], "--floor must be below --ceiling"),
        (["--headroom", "lots"], "--headroom: invalid percentage 'lots'"),
        (
            ["--max-runs", "2"],
            "--max-runs: must be at least 3 (measuring run, a trial, verification)",
        ),
    ],
)
def test_probe_bad_options(args: list[str], message: str) -> None:
    done = shmguard("probe", *args, "--", "true")
    assert done.returncode == 2
    assert message in done.stderr


def test_sandbox_json_and_status(root_only: None, no_leftovers: None) -> None:
    done = shmguard("sandbox", "--shm-size", "32m", "--json", "--", "sh", "-c", "echo out; exit 3")
    assert done.returncode == 3
    data = json.loads(done.stdout)
    validator("sandbox").validate(data)
    assert data["schema"] == "shmguard.sandbox/1"
    assert data["shm_size"] == 32 * MiB
    assert data["exit_status"] == 3 and data["exit_code"] == 3
    assert done.stderr == "out\n"  # the command's stdout moved to stderr, unchanged


def test_measure_json_peak_and_recommendation(root_only: None, no_leftovers: None) -> None:
    done = shmguard("measure", "--json", "--", "sh", "-c", NEED_40M + "; echo wrote")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("measure").validate(data)
    assert data["peak"] == 40 * MiB
    assert data["cause"]["outcome"] == "ok"
    # 40 MiB + 25% = 50 MiB -> 56 MiB (8 MiB steps between 32 and 64 MiB)
    assert data["recommendation"]["shm_size"] == 56 * MiB
    assert isinstance(data["memory_peak"], int) and data["memory_peak"] >= 40 * MiB
    assert "wrote" in done.stderr


def test_measure_text_report_and_plot(root_only: None, tmp_path: Path) -> None:
    png = tmp_path / "shm.png"
    done = shmguard("measure", "--plot", str(png), "--", "sh", "-c", NEED_40M)
    assert done.returncode == 0, done.stderr
    assert "/dev/shm peak  40 MiB" in done.stdout
    assert "docker run --shm-size=56m" in done.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # where the file went, on stderr (stdout may carry JSON)
    assert done.stderr.splitlines()[-1] == f"shmguard: wrote the /dev/shm timeline to {png}"


def test_measure_reports_running_out_of_shm(root_only: None) -> None:
    done = shmguard("measure", "--shm-size", "16m", "--json", "--", "sh", "-c", NEED_40M)
    assert done.returncode == 1
    data = json.loads(done.stdout)
    validator("measure").validate(data)
    assert data["cause"]["outcome"] == "shm-exhausted"
    assert data["peak"] == 16 * MiB
    assert data["recommendation"]["shm_size"] is None
    assert "No space left on device" in done.stderr


@pytest.mark.parametrize(
    ("argv", "outcome", "basis"),
    [
        (
            # allocates past a 64 MiB memory limit: OOM-killed, not short of /dev/shm
            ["--memory", "64m", "--", sys.executable, "-c", "b = b'x' * (200 << 20)"],
            "oom-killed",
            "the run was OOM-killed, not short of /dev/shm, so its shm need is unknown: the ",
        ),
        (
            ["--", "sh", "-c", "head -c 1048576 /dev/zero > /dev/shm/x; exit 3"],
            "failed",
            "the command failed with exit status 3, which is not about /dev/shm: fix the "
            "command first, then measure again; the 1 MiB /dev/shm peak of the part that ran "
            "is only a lower bound of its need",
        ),
    ],
)
def test_measure_gives_no_shm_size_for_a_failure_not_about_shm(
    root_only: None, no_leftovers: None, argv: list[str], outcome: str, basis: str
) -> None:
    # An OOM-killed run was told `--shm-size=24m`: a size beside a failure reads as its fix.
    done = shmguard("measure", "--json", *argv)
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    validator("measure").validate(data)
    assert data["cause"]["outcome"] == outcome
    rec = data["recommendation"]
    assert rec["shm_size"] is None and rec["changes"] == [] and rec["snippets"] == []
    assert rec["shm_basis"].startswith(basis)
    if outcome == "oom-killed":
        assert rec["shm_basis"].endswith(
            "Raise --memory above 64 MiB, or lower the batch size or num_workers, then measure "
            "again"
        )
    text = shmguard("measure", *argv)
    assert text.returncode == 1
    assert f"none: {basis[:40]}" in " ".join(text.stdout.split())
    assert "docker run" not in text.stdout


def test_plot_without_matplotlib_is_a_clear_error(root_only: None, tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None; "
        "import importlib.util as u; u.find_spec = lambda name, *a: None; "
        "from shmguard.cli import main; sys.argv = ['shmguard', 'measure', '--plot', "
        f"'{tmp_path}/x.png', '--', 'true']; main()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == "shmguard: error: --plot needs matplotlib: pip install 'shmguard[plot]'\n"


def test_probe_finds_a_deterministic_minimum(root_only: None, no_leftovers: None) -> None:
    done = shmguard("probe", "--json", "--", "sh", "-c", NEED_40M)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("probe").validate(data)
    assert data["minimum"] == 40 * MiB
    rates = {r["size"]: (r["passes"], r["runs"]) for r in data["pass_rates"]}
    assert rates[40 * MiB] == (3, 3)  # the bisection pass + 2 confirmations
    assert all(p == 0 for size, (p, _) in rates.items() if size < 40 * MiB)
    assert data["recommendation"]["shm_size"] == 56 * MiB
    assert data["verified"] is True
    assert data["runs"] == len(data["trials"]) + 1 <= 12


def test_probe_stops_at_its_run_budget(root_only: None, no_leftovers: None) -> None:
    # 4 runs: the measuring run, then bound 42 MiB (pass), bisect 21 and 32 MiB (fail), and the
    # budget is spent: 42 MiB passed once, not 3 times, and says so.
    done = shmguard("probe", "--json", "--no-verify", "--max-runs", "4", "--", "sh", "-c", NEED_40M)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("probe").validate(data)
    assert data["runs"] == 4
    assert [(t["phase"], t["size"] // MiB, t["passed"]) for t in data["trials"]] == [
        ("bound", 42, True),
        ("bisect", 21, False),
        ("bisect", 32, False),
    ]
    assert data["minimum"] == 42 * MiB
    assert data["minimum_basis"] == (
        "42 MiB passed once, not 3 times in a row: the run budget of 4 runs (--max-runs) "
        "was spent; 32 MiB failed"
    )


def test_probe_confirmations_skip_a_flaky_edge(root_only: None, tmp_path: Path) -> None:
    # Below 44 MiB every second run fails: no size there can pass 3 times in a row.
    counter = tmp_path / "runs"
    script = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; "
        "kb=$(df -k /dev/shm | tail -1 | awk '{print $2}'); "
        'if [ "$kb" -lt 45056 ] && [ $((n % 2)) -eq 0 ]; then exit 1; fi; ' + NEED_40M
    )
    done = shmguard("probe", "--json", "--no-verify", "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("probe").validate(data)
    assert 44 * MiB <= data["minimum"] <= 48 * MiB
    rates = {r["size"]: (r["passes"], r["runs"]) for r in data["pass_rates"]}
    below = [size for size in rates if size < 44 * MiB]
    assert below  # sizes under the flaky edge were tried ...
    assert all(rates[size][0] < rates[size][1] for size in below)  # ... and each failed once
    assert rates[data["minimum"]] == (3, 3)
    assert data["verified"] is None


def test_probe_when_the_command_always_fails(root_only: None) -> None:
    done = shmguard("probe", "--json", "--", "sh", "-c", "exit 3")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    validator("probe").validate(data)
    assert data["minimum"] is None
    assert data["trials"] == []
    assert "fails even with" in data["minimum_basis"]
    # the same words as measure: not about /dev/shm, fix the command first
    assert data["minimum_basis"].endswith(
        "of /dev/shm: the command failed with exit status 3, which is not about /dev/shm: fix "
        "the command first, then measure again; the 0 B /dev/shm peak of the part that ran is "
        "only a lower bound of its need"
    )
    assert data["recommendation"]["shm_size"] is None
    assert data["measure"]["recommendation"]["shm_size"] is None


def test_probe_shows_why_its_measuring_run_failed(root_only: None, no_leftovers: None) -> None:
    # The child's stderr was hidden (probe captures it) and two empty tables were printed.
    script = 'for i in $(seq 1 15); do echo "problem $i" >&2; done; exit 3'
    done = shmguard("probe", "--", "sh", "-c", script)
    assert done.returncode == 1
    out = done.stdout
    assert "stderr of the measuring run (last 10 lines):\n" in out
    shown = [f"  problem {i}" for i in range(6, 16)]
    assert "\n".join(shown) in out
    assert "problem 5\n" not in out
    assert "Trials" not in out and "Pass rate per size" not in out and "┃" not in out
    assert out.count("fix the command first") == 1  # the reason once, not again as "none: ..."
    assert "1 runs (1 measuring + 0 trials)" in out
    data = json.loads(shmguard("probe", "--json", "--", "sh", "-c", script).stdout)
    validator("probe").validate(data)
    assert data["stderr_tail"] == [f"problem {i}" for i in range(6, 16)]


@pytest.mark.parametrize("command", ["measure", "probe"])
def test_commands_and_snippets_are_never_wrapped(
    root_only: None, no_leftovers: None, command: str
) -> None:
    # Without a terminal Rich wraps at 80 columns (here COLUMNS=40): a command or a snippet
    # broken over two lines can no longer be pasted.
    # The sleep keeps the 1 MiB in place while the sampler polls: on a loaded machine a run
    # that exits within a millisecond of its write can end before the next poll (seen once in
    # a full CI run: a 1m size from a peak caught half-written).
    script = (
        "head -c 1048576 /dev/zero > /dev/shm/a-rather-long-file-name-to-pass-40-columns; sleep 0.2"
    )
    args = ["--no-verify"] if command == "probe" else []
    done = shmguard(command, *args, "--", "sh", "-c", script, env={"COLUMNS": "40"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # aligned with the key column ("/dev/shm peak", "measuring run": 13 characters)
    assert f"command        sh -c '{script}'" in lines
    docker = lines[lines.index("docker run:") + 1]
    assert docker.startswith("docker run --shm-size=2m --memory=") and docker.endswith("IMAGE ...")
    assert "    - name: app  # your container's name: these keys merge into it" in lines
    assert (
        "        limits:  # requests.memory equal to it keeps a Guaranteed pod Guaranteed" in lines
    )
    assert max(len(line) for line in lines) > 40  # ... while the prose still wraps
    assert "rounded up to 2" in " ".join(done.stdout.split())


def test_measure_headroom_and_memory_margin_come_from_the_configuration(
    root_only: None, no_leftovers: None, tmp_path: Path
) -> None:
    (tmp_path / ".shmguard.toml").write_text('[sizes]\nheadroom = 0.5\nmemory-margin = "2g"\n')
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", "measure", "--json", "--", "sh", "-c", NEED_40M],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rec = json.loads(done.stdout)["recommendation"]
    # 40 MiB + 50% = 60 MiB -> 64 MiB; the flag still wins over the file.
    assert (rec["headroom"], rec["shm_size"]) == (0.5, 64 * MiB)
    assert "at least 2 GiB" in rec["memory_basis"]
    flag = subprocess.run(
        [sys.executable, "-m", "shmguard", "measure", "--json", "--headroom", "0", "--",
         "sh", "-c", NEED_40M],
        capture_output=True, text=True, timeout=90, cwd=tmp_path,
    )  # fmt: skip
    assert json.loads(flag.stdout)["recommendation"]["shm_size"] == 40 * MiB
