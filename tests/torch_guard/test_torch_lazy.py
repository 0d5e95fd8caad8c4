"""The guard's public names cost nothing until called: ``import shmguard`` and resolving them
import no torch (the extra may not be installed)."""

from __future__ import annotations

import subprocess
import sys


def test_public_guard_names_do_not_import_torch() -> None:
    code = (
        "import sys, shmguard; "
        "names = (shmguard.check_dataloader, shmguard.assess_dataloader, shmguard.guard, "
        "shmguard.LoaderCheck, shmguard.ShmInsufficientError, shmguard.ShmExhaustedError); "
        "print('torch' in sys.modules, issubclass(shmguard.ShmExhaustedError, RuntimeError))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
