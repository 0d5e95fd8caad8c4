"""Run inside a 64 MiB sandbox by test_one_answer_loader.py: the guard's two entries on issue
19's loader (float32 3x256x256 samples, batch 32, 4 workers, a fast consumer), each printing
the /dev/shm size its fix gives as one line: ``CHECK <bytes>`` (``check_dataloader``, before
any worker starts) and ``GUARD <bytes>`` (``guard``, when the loop runs out of /dev/shm).

    python one_answer_child.py
"""

from __future__ import annotations

import sys
import warnings

from shmguard.examples.grid_loader import loader
from shmguard.torch import ShmExhaustedError, ShmInsufficientError, check_dataloader, guard


def main() -> None:
    warnings.filterwarnings("ignore")

    def make() -> object:
        return loader(4, 2, batch_mib=24, batch_size=32, dtype="float32", batches=32)

    try:
        check_dataloader(make(), local_ranks=1)
        print("CHECK fits", flush=True)
    except ShmInsufficientError as err:
        assert err.check.fix is not None
        print(f"CHECK {err.check.fix.size.bytes}", flush=True)
    try:
        for _ in guard(make(), stall_after=3.0, poll=0.5):
            pass
        print("GUARD finished", flush=True)
    except ShmExhaustedError as err:
        print(f"GUARD {err.fix.size.bytes}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
