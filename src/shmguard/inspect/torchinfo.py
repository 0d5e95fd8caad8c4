"""PyTorch version and sharing strategy, only on request (importing torch takes about 1.4 s)."""

from __future__ import annotations

from dataclasses import dataclass

from shmguard.model import Fact


@dataclass(frozen=True)
class TorchFacts:
    """``sharing_strategy`` is ``torch.multiprocessing.get_sharing_strategy()`` in this
    interpreter (``file_descriptor`` by default on Linux: shm files are unlinked at once and
    held through fds; ``file_system`` keeps names in /dev/shm). ``strategies`` lists the
    available ones."""

    version: str
    sharing_strategy: str
    strategies: tuple[str, ...]


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
