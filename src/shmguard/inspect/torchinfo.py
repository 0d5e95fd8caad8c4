"""PyTorch version and sharing strategy, only on request (importing torch takes about 1.4 s)."""

from __future__ import annotations

from shmguard.model import Fact
from shmguard.model.host import TorchFacts


def read_torch() -> Fact[TorchFacts]:
    """Import torch and read its version and sharing strategy; unknown with the reason when
    torch is not importable."""
    try:
        import torch
        import torch.multiprocessing as tmp
    except Exception as err:  # ImportError, or a broken install raising anything
        return Fact.unknown(f"import torch failed: {err}")
    return Fact.known(
        TorchFacts(
            str(torch.__version__),
            str(tmp.get_sharing_strategy()),  # type: ignore[no-untyped-call]
            tuple(sorted(tmp.get_all_sharing_strategies())),  # type: ignore[no-untyped-call]
        )
    )
