"""check_dataloader on real DataLoaders: the figures it raises with, warn, adapt, what it
cannot tell, and the loader it rebuilds."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

import pytest

from shmguard.estimate import LoaderSpec, padded_bytes, predict, shm_size_for
from shmguard.torch import (
    ShmInsufficientError,
    assess_dataloader,
    check_dataloader,
    rebuild_loader,
)
from shmguard.torch.fixes import fitting, local_ranks_from_env
from shmguard.units import MiB, format_iec

torch = pytest.importorskip("torch")
from torch.utils.data import (  # noqa: E402
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
)

pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore:This DataLoader will create")]


class Images(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        return torch.zeros(3, 16, 16), i


class Untouchable(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        raise AssertionError("no batch may be made")


class Stream(IterableDataset):  # type: ignore[type-arg]
    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("the stream must not be read")


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_fitting_lowers_prefetch_first_then_workers() -> None:
    spec = LoaderSpec(10 * MiB, num_workers=4, prefetch_factor=2)
    assert fitting(spec, 1024 * MiB) == (4, 2)  # fits as it is
    assert fitting(spec, 100 * MiB) == (4, 1)  # (8 + 2) x 10 MiB + sem > 100; 6 x 10 fits
    assert fitting(spec, 50 * MiB) == (2, 1)  # 3 workers need 50 MiB + sem
    assert fitting(spec, 20 * MiB) == (0, 0)  # one worker needs 30 MiB: none fits
    assert fitting(replace(spec, num_workers=0), 0) == (0, 0)


def test_raises_with_the_models_figures_and_a_sized_fix(tmp_path: Path) -> None:
    loader = DataLoader(Images(), batch_size=8, num_workers=2)
    stated = _free(tmp_path)  # one batch as large as the free space: can never fit
    with pytest.raises(ShmInsufficientError) as info:
        check_dataloader(loader, batch_bytes=stated, shm_path=str(tmp_path), local_ranks=1)
    err = info.value
    check = err.check
    pages = padded_bytes((stated,))
    expected = predict(LoaderSpec(pages, num_workers=2, prefetch_factor=2))
    assert err.need == expected.peak == (2 * 2 + 2) * pages + (3 * 2 + 8) * 4096
    assert err.free == check.space.free
    assert check.fits is False
    assert check.fix is not None
    assert check.fix.size == shm_size_for(
        expected.peak + check.space.used,
        what="predicted peak + what /dev/shm holds now",
        source="model",  # the DataLoader model's evidence, through the one size decision
    )
    text = str(err)
    assert f"it needs up to {format_iec(expected.peak)} (predicted peak)" in text
    assert f"{format_iec(check.space.free)} of {format_iec(check.space.total)} is free" in text
    assert "num_workers=2 x prefetch_factor=2 = 4 batches queued" in text
    assert "batch_bytes as given, rounded up to whole pages" in text
    assert f"Fix: Give /dev/shm {format_iec(check.fix.size.bytes)}" in text
    assert "not even num_workers=1, prefetch_factor=1 fits" in text


def test_the_error_survives_pickling(tmp_path: Path) -> None:
    import pickle

    loader = DataLoader(Images(), batch_size=8, num_workers=2)
    with pytest.raises(ShmInsufficientError) as info:
        check_dataloader(loader, batch_bytes=_free(tmp_path), shm_path=str(tmp_path))
    copy = pickle.loads(pickle.dumps(info.value))
    assert str(copy) == str(info.value) and copy.need == info.value.need


def test_the_fix_is_for_the_runtime_doctor_detects(tmp_path: Path) -> None:
    from shmguard.inspect.host import inspect_host
    from shmguard.units import format_docker_size

    runtime = inspect_host(holders=False, gpus=False).runtime.name
    loader = DataLoader(Images(), batch_size=8, num_workers=2)
    check = assess_dataloader(loader, batch_bytes=_free(tmp_path), shm_path=str(tmp_path))
    assert check.fix is not None and check.fix.runtime == runtime
    size = check.fix.size.bytes
    if runtime == "docker":
        assert f"docker run --shm-size={format_docker_size(size)} IMAGE" in check.fix.text
    elif runtime == "none":
        assert f"mount -o remount,size={size // MiB}m /dev/shm" in check.fix.text


def test_warn_logs_and_returns_the_same_loader(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loader = DataLoader(Images(), batch_size=8, num_workers=2)
    with caplog.at_level(logging.WARNING, logger="shmguard.torch"):
        got = check_dataloader(
            loader, action="warn", batch_bytes=_free(tmp_path), shm_path=str(tmp_path)
        )
    assert got is loader
    assert "DataLoader does not fit in /dev/shm" in caplog.text


def test_adapt_lowers_prefetch_then_workers_until_it_fits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loader = DataLoader(Images(), batch_size=8, num_workers=4, shuffle=True)
    # 4 batches of F/4.5 fit in F, 5 do not: prefetch 2 -> 1, then 4 -> 3 -> 2 workers.
    stated = int(_free(tmp_path) / 4.5)
    with caplog.at_level(logging.WARNING, logger="shmguard.torch"):
        new = check_dataloader(
            loader, action="adapt", batch_bytes=stated, shm_path=str(tmp_path), local_ranks=1
        )
    assert (new.num_workers, new.prefetch_factor) == (2, 1)
    assert new is not loader
    assert new.dataset is loader.dataset and new.sampler is loader.sampler
    assert new.collate_fn is loader.collate_fn and new.batch_size == 8
    assert "prefetch_factor 2 -> 1, num_workers 4 -> 2" in caplog.text
    peak = predict(LoaderSpec(padded_bytes((stated,)), 2, 1)).peak
    assert peak <= _free(tmp_path)
    assert f"predicted peak {format_iec(peak)}" in caplog.text


def test_adapt_goes_to_no_workers_when_one_does_not_fit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loader = DataLoader(Images(), batch_size=8, num_workers=2, persistent_workers=True)
    with caplog.at_level(logging.WARNING, logger="shmguard.torch"):
        new = check_dataloader(
            loader, action="adapt", batch_bytes=_free(tmp_path), shm_path=str(tmp_path)
        )
    assert (new.num_workers, new.prefetch_factor, new.persistent_workers) == (0, None, False)
    assert "num_workers 2 -> 0" in caplog.text
    assert "made in the main process" in caplog.text
    assert sum(len(b[1]) for b in new) == 64  # and it loads


def test_a_loader_that_fits_is_returned_as_it_is() -> None:
    loader = DataLoader(Images(), batch_size=8, num_workers=2)
    check = assess_dataloader(loader, local_ranks=1)
    assert check.fits is True and check.fix is None
    assert check.sizing is not None and check.sizing.batches == 3
    assert check_dataloader(loader, local_ranks=1) is loader


def test_no_workers_needs_no_batch_and_no_shm() -> None:
    loader = DataLoader(Untouchable(), batch_size=4, num_workers=0)
    check = assess_dataloader(loader)
    assert check.prediction is not None and check.prediction.peak == 0
    assert check_dataloader(loader) is loader


def test_iterable_dataset_without_batch_bytes_cannot_be_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loader = DataLoader(Stream(), batch_size=4, num_workers=2)
    with caplog.at_level(logging.WARNING, logger="shmguard.torch"):
        assert check_dataloader(loader) is loader
    assert "cannot tell whether this DataLoader fits" in caplog.text
    assert "pass batch_bytes" in caplog.text
    check = assess_dataloader(loader)
    assert check.fits is None and check.prediction is None


def test_iterable_dataset_with_batch_bytes_is_checked(tmp_path: Path) -> None:
    loader = DataLoader(Stream(), batch_size=4, num_workers=2)
    with pytest.raises(ShmInsufficientError):
        check_dataloader(loader, batch_bytes=_free(tmp_path), shm_path=str(tmp_path))
    assert assess_dataloader(loader, batch_bytes=4096, local_ranks=1).fits is True


def test_local_ranks_come_from_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    assert local_ranks_from_env({}) == 1
    assert local_ranks_from_env({"LOCAL_WORLD_SIZE": "4"}) == 4
    assert local_ranks_from_env({"LOCAL_WORLD_SIZE": "x"}) == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    loader = DataLoader(Images(), batch_size=8, num_workers=2)
    check = assess_dataloader(loader, batch_bytes=MiB)
    one = predict(LoaderSpec(MiB, 2, 2)).peak
    assert check.spec is not None and check.spec.local_ranks == 3
    assert check.prediction is not None and check.prediction.peak == 3 * one


def test_unknown_action_is_refused() -> None:
    with pytest.raises(ValueError, match="action must be 'raise', 'warn' or 'adapt'"):
        check_dataloader(DataLoader(Images()), action="ignore")  # type: ignore[arg-type]


def test_rebuild_keeps_every_setting_but_the_two() -> None:
    gen = torch.Generator().manual_seed(3)

    def init(_: int) -> None:
        pass

    loader = DataLoader(
        Images(),
        batch_size=8,
        shuffle=True,
        num_workers=4,
        drop_last=True,
        timeout=7,
        worker_init_fn=init,
        generator=gen,
        prefetch_factor=4,
        persistent_workers=True,
    )
    new = rebuild_loader(loader, num_workers=2, prefetch_factor=1)
    assert (new.num_workers, new.prefetch_factor) == (2, 1)
    assert new.dataset is loader.dataset and new.sampler is loader.sampler
    assert (new.batch_size, new.drop_last, new.timeout) == (8, True, 7)
    assert new.worker_init_fn is init and new.generator is gen
    assert new.persistent_workers is True and new.collate_fn is loader.collate_fn


def test_rebuild_passes_a_custom_batch_sampler_and_no_batching() -> None:
    class Pairs(BatchSampler):
        pass

    custom = Pairs(SequentialSampler(range(64)), 2, False)
    new = rebuild_loader(
        DataLoader(Images(), batch_sampler=custom, num_workers=2), num_workers=1, prefetch_factor=1
    )
    assert new.batch_sampler is custom
    unbatched = DataLoader(Images(), batch_size=None, num_workers=2)
    new = rebuild_loader(unbatched, num_workers=1, prefetch_factor=2)
    assert new.batch_size is None and new.sampler is unbatched.sampler


def test_rebuild_copies_a_subclass() -> None:
    class MyLoader(DataLoader):  # type: ignore[type-arg]
        def __init__(self, extra: str) -> None:
            super().__init__(Images(), batch_size=8, num_workers=4)
            self.extra = extra

    loader = MyLoader("x")
    new = rebuild_loader(loader, num_workers=1, prefetch_factor=1)
    assert type(new) is MyLoader and new.extra == "x"
    assert (new.num_workers, new.prefetch_factor) == (1, 1)
    assert (loader.num_workers, loader.prefetch_factor) == (4, 2)
    assert sum(len(b[1]) for b in new) == 64


class Shards(IterableDataset):  # type: ignore[type-arg]
    """0..39, each worker yielding its own share (the pattern PyTorch's docs show)."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        step, first = (1, 0) if info is None else (info.num_workers, info.id)
        for i in range(first, 40, step):
            yield torch.tensor([i])


def _rows(loader: DataLoader) -> list[list[int]]:  # type: ignore[type-arg]
    return [b.flatten().tolist() for b in loader]


def test_adapt_keeps_an_iterable_datasets_workers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Each worker iterates its own copy of an IterableDataset: with fewer workers the batches
    # are others ([0, 4, 8, 12] becomes [0, 2, 4, 6] with 2 of 4 workers). So adapt may lower
    # prefetch_factor only.
    loader = DataLoader(Shards(), batch_size=4, num_workers=4, prefetch_factor=2)
    bare = _rows(loader)
    stated = int(_free(tmp_path) / 6.5)  # 4 x 1 + 2 = 6 batches fit, 4 x 2 + 2 = 10 do not
    new = check_dataloader(
        loader, action="adapt", batch_bytes=stated, shm_path=str(tmp_path), local_ranks=1
    )
    assert (new.num_workers, new.prefetch_factor) == (4, 1)
    assert _rows(new) == bare
    stated = int(_free(tmp_path) / 4.5)  # only 2 workers would fit
    with pytest.raises(ShmInsufficientError) as info:
        check_dataloader(
            loader, action="adapt", batch_bytes=stated, shm_path=str(tmp_path), local_ranks=1
        )
    text = str(info.value)
    assert "num_workers=2, prefetch_factor=1 fits" in text
    assert "fewer workers change an IterableDataset's batches" in text
    assert 'check_dataloader(loader, action="adapt") makes that change' not in text


def test_adapt_gives_the_same_batches_in_the_same_order(tmp_path: Path) -> None:
    def make() -> DataLoader:  # type: ignore[type-arg]
        gen = torch.Generator().manual_seed(7)
        return DataLoader(Images(), batch_size=8, shuffle=True, num_workers=4, generator=gen)

    def labels(loader: DataLoader) -> list[list[int]]:  # type: ignore[type-arg]
        return [b[1].tolist() for b in loader]

    bare = labels(make())
    for share in (4.5, 1.0):  # 2 workers with prefetch 1; no worker at all
        stated = int(_free(tmp_path) / share)
        new = check_dataloader(
            make(), action="adapt", batch_bytes=stated, shm_path=str(tmp_path), local_ranks=1
        )
        assert new.num_workers == (2 if share == 4.5 else 0)
        assert labels(new) == bare
