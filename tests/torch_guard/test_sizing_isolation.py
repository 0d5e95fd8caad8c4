"""Making the sized batches must leave the dataset as the workers would have found it: the
usual lazy-open pattern (a file, an HDF5 or LMDB handle opened on first ``__getitem__``, so
that each worker opens its own) must still open one handle per worker after
check_dataloader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shmguard.torch import check_dataloader
from shmguard.torch.sizing import size_batches

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore:This DataLoader will create")]


class LazyRecords(Dataset):  # type: ignore[type-arg]
    """Item i is ``[i, pid that opened the file]``; the file is opened on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.f = None
        self.opened_by = 0

    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        if self.f is None:
            self.f = open(self.path, "rb")  # noqa: SIM115
            self.opened_by = os.getpid()
        return torch.tensor([i, self.opened_by])


def test_sizing_leaves_a_lazily_opened_handle_unopened(tmp_path: Path) -> None:
    path = tmp_path / "records.bin"
    path.write_bytes(b"x" * 64)
    loader = DataLoader(LazyRecords(path), batch_size=4, num_workers=2)
    sizing = size_batches(loader, batches=2)
    assert sizing.pages == 4096 and sizing.batches == 2
    assert loader.dataset.f is None  # not opened here, to be shared by every forked worker
    checked = check_dataloader(loader, local_ranks=1)
    assert checked is loader and loader.dataset.f is None
    rows = torch.cat(list(loader)).tolist()
    # Every worker opened its own file: none of them reads through the main process's.
    assert [i for i, _ in rows] == list(range(32))
    assert os.getpid() not in {pid for _, pid in rows}


def test_a_dataset_error_is_raised_here_with_its_own_traceback() -> None:
    class Broken(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 8

        def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
            raise KeyError(f"no item {i}")

    loader = DataLoader(Broken(), batch_size=4, num_workers=2)
    with pytest.raises(KeyError, match="no item 0") as info:
        check_dataloader(loader)
    assert info.traceback[-1].name == "__getitem__"
