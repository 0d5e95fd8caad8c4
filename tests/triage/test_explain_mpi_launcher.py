"""An MPI launcher's own report of a rank's SIGBUS (MPICH/Intel MPI Hydra's BAD TERMINATION
banner, MPICH2 mpd's exit status) is mpi-shm-small's kind; the same banner with any other
signal, or FreeBSD's SIGBUS (signal 10), gets no /dev/shm advice. The wordings are those of
the public reports named beside each (host names and pids as posted or replaced)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _triage_helpers import diagnose_text

from shmguard.triage.model import Signature

BAR = "=" * 83
SIGBUS = {
    # https://github.com/GlobalArrays/ga/issues/160 (a signalled rank)
    "killed-by-signal": (
        f"{BAR}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        f"=   RANK 0 PID 28219 RUNNING AT node1\n=   KILLED BY SIGNAL: 7 (Bus error)\n{BAR}\n"
    ),
    # https://github.com/openai/mlsh/issues/17 (exit status 135 and the exit string)
    "exit-code-135": (
        f"{BAR}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   EXIT CODE: 135\n"
        f"=   CLEANING UP REMAINING PROCESSES\n{BAR}\n"
    ),
    "exit-string": "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Bus error (signal 7)\n",
    # MPICH2 mpd, in the shape of https://github.com/pmodels/mpich/issues/529
    "mpd": (
        "rank 1 in job 1  node2_34602   caused collective abort of all ranks\n"
        "  exit status of rank 1: killed by signal 7\n"
    ),
}
OTHER = {
    # https://github.com/pyiron/executorlib/issues/197
    "exit-code-15": (
        f"{BAR}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        f"=   PID 4821 RUNNING AT fv-az557-506\n=   EXIT CODE: 15\n{BAR}\n"
    ),
    # https://github.com/ggml-org/llama.cpp/issues/4792
    "terminated-15": (
        f"{BAR}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   EXIT CODE: 134\n"
        f"{BAR}\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Terminated (signal 15)\n"
    ),
    # https://github.com/pmodels/mpich/issues/5738: FreeBSD's SIGBUS is 10; libfabric's fault
    "freebsd-bus-error-10": (
        f"## {BAR}\n## =   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        f"## =   EXIT CODE: 138\n## {BAR}\n"
        "## YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Bus error (signal 10)\n"
    ),
    # https://github.com/CSWU-Challenge/CSWU-Challenge.github.io/issues/30
    "segfault": (
        "your application terminated with the exit string: segmentation fault (signal 11)\n"
    ),
    "killed-9": (
        f"{BAR}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        f"=   RANK 3 PID 9120 RUNNING AT node4\n=   KILLED BY SIGNAL: 9 (Killed)\n{BAR}\n"
    ),
}


@pytest.mark.parametrize("name", SIGBUS)
def test_a_launcher_sigbus_report_is_the_mpi_shm_transport(
    name: str, catalogue: Sequence[Signature]
) -> None:
    d = diagnose_text(SIGBUS[name], catalogue)
    top = d.results[0]
    assert (top.id, top.kind, top.confidence) == ("mpi-shm-small", "shm_small", "medium")
    assert top.fix is not None and top.fix.shm_size is not None


@pytest.mark.parametrize("name", OTHER)
def test_other_signals_get_no_shm_advice(name: str, catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(OTHER[name], catalogue)
    assert all(r.id != "mpi-shm-small" for r in d.results)
    assert not any(r.fix is not None and r.fix.shm_size is not None for r in d.results)


def test_a_dataloader_message_outranks_the_launcher_report(
    catalogue: Sequence[Signature],
) -> None:
    # PyTorch under MPICH: the DataLoader's own SIGBUS message names the cause first.
    log = (
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is "
        "possible that dataloader's workers are out of shared memory. Please try to raise "
        "your shared memory limit.\n" + SIGBUS["killed-by-signal"]
    )
    top = diagnose_text(log, catalogue).results[0]
    assert top.id == "dataloader-bus-error"
