"""measure/run.py without a sandbox: the stderr tail, the basis of a failed run, and the
demo's explanation of the numbers."""

from __future__ import annotations

from types import SimpleNamespace

from shmguard.measure.outcome import Cause, Outcome
from shmguard.measure.run import failed_run_basis, tail_lines
from shmguard.model.fact import Fact
from shmguard.render.measure_text import demo_explanation
from shmguard.units import MiB


def test_tail_lines_keeps_the_last_non_blank_lines() -> None:
    data = b"".join(b"line %d\n" % i for i in range(15)) + b"\n  \n"
    assert tail_lines(data) == tuple(f"line {i}" for i in range(5, 15))
    assert tail_lines(data, 2) == ("line 13", "line 14")
    assert tail_lines(b"") == ()


def test_tail_lines_cleans_progress_bars_escapes_and_bad_bytes() -> None:
    data = b"  10%\r  50%\r 100%\r\n\x1b[31mError:\x1b[0m bad \xff\x00value\r\n" + b"x" * 500
    assert tail_lines(data) == (" 100%", "Error: bad \ufffdvalue", "x" * 300)


def test_failed_run_basis_says_what_to_change() -> None:
    oom = Cause(Outcome.OOM_KILLED, "the memory cgroup's OOM killer killed 1 process")
    limit = failed_run_basis(oom, 5 * MiB, Fact.known(250 * MiB), memory_limit=250 * MiB)
    assert limit == (
        "the run was OOM-killed, not short of /dev/shm, so its shm need is unknown: the 5 MiB "
        "/dev/shm peak of the part that ran is only a lower bound of its need. Raise --memory "
        "above 250 MiB, or lower the batch size or num_workers, then measure again"
    )
    outer = failed_run_basis(oom, 0, Fact.known(3 * 1024 * MiB))
    assert "Raise the container's memory limit above the 3 GiB it reached" in outer
    timeout = failed_run_basis(Cause(Outcome.TIMEOUT, "x"), MiB, Fact.unknown("n/a"))
    assert timeout.endswith("measure again with a longer --timeout")
    failed = Cause(Outcome.FAILED, "the command failed with exit status 2")
    assert failed_run_basis(failed, 0, Fact.unknown("n/a")).startswith(
        "the command failed with exit status 2, which is not about /dev/shm: fix the command "
        "first, then measure again"
    )
    assert failed_run_basis(failed, 0, Fact.unknown("n/a"), interrupted="SIGINT").startswith(
        "the run was interrupted (SIGINT) before it finished"
    )


def test_demo_explanation_calls_the_peak_an_upper_bound() -> None:
    # It said the peak reaches 183.75 MiB "for a moment", while 169 MiB passed 3 of 3 runs.
    failure = SimpleNamespace(shm_size=64 * MiB, cause=Cause(Outcome.SHM_EXHAUSTED, "full"))
    text = demo_explanation(failure, 32 * 3 * 224 * 224 * 4, 4, 2)  # type: ignore[arg-type]
    assert "for a moment" not in text
    assert (
        "4 workers x prefetch_factor 2 keep up to 8 batches in flight, plus the one your loop "
        "holds: ~165.38 MiB when the loop is slower than the workers and the queue stays full."
    ) in text
    assert (
        "that is one batch more: 183.75 MiB, the most that can be in flight. That is an upper "
        "bound, not what every run reaches: a run can pass below it"
    ) in text
    assert "A 64 MiB /dev/shm holds only 3 batches, so a worker's next batch allocation" in text
