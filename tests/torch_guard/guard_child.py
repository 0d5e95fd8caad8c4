"""Run inside a sandbox by test_guard_real.py: iterate a bundled loader under
``shmguard.torch.guard`` and print what it raised as one JSON line (``RESULT {...}``).

    python guard_child.py seed|hang [stall_after]
"""

from __future__ import annotations

import json
import pickle
import sys
import time
import warnings

from shmguard.examples import hang_loader, seed_loader
from shmguard.examples._common import make_loader, parse_args
from shmguard.torch import ShmExhaustedError, guard


def main() -> None:
    mode = sys.argv[1]
    stall_after = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    warnings.filterwarnings("ignore")
    if mode == "seed":
        loader = make_loader(parse_args("seed", ["--batches", "20"]), seed_loader.sample)
    else:
        loader = hang_loader.make_loader(hang_loader.parse_args([]))
    t0 = time.monotonic()
    n = 0
    try:
        for _ in guard(loader, stall_after=stall_after, poll=0.5):
            n += 1
    except ShmExhaustedError as err:
        cause = err.__cause__
        result = {
            "kind": err.kind,
            "batches": err.batches,
            "seen": n,
            "used": err.state.used,
            "total": err.state.total,
            "peak": err.state.peak,
            "baseline": err.state.baseline,
            "failed_files": [list(f) for f in err.state.failed_files],
            "evidence": list(err.evidence),
            "sizing_pages": err.sizing.pages if err.sizing else None,
            "sizing_basis": err.sizing.basis if err.sizing else None,
            "fix_size": err.fix.size.bytes,
            "runtime": err.fix.runtime,
            "timeout": err.timeout,
            "cause": f"{type(cause).__name__}: {cause}" if cause is not None else None,
            "message": str(err),
            "elapsed": time.monotonic() - t0,
            "pickles": str(pickle.loads(pickle.dumps(err))) == str(err),
        }
        print("RESULT " + json.dumps(result), flush=True)
        sys.exit(3)
    print(f"RESULT {json.dumps({'kind': None, 'seen': n})}", flush=True)


if __name__ == "__main__":
    main()
