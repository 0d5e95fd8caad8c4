"""One batch's /dev/shm bytes, made in the main process: tensors, dicts, numpy, strings,
variable sizes, and no random state consumed."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from shmguard.estimate import padded_bytes
from shmguard.torch.sizing import shm_leaves, size_batches, stated_sizing
from shmguard.units import PAGE_SIZE

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from torch.utils.data import DataLoader, Dataset  # noqa: E402

pytestmark = pytest.mark.torch


class Items(Dataset):  # type: ignore[type-arg]
    """``n`` items made by ``make(i)``."""

    def __init__(self, make, n: int = 64) -> None:  # type: ignore[no-untyped-def]
        self.make, self.n = make, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        return self.make(i)


def test_a_tensor_counts_its_storage() -> None:
    t = torch.zeros(3, 5, dtype=torch.float32)
    assert shm_leaves(t) == [60]


def test_views_of_one_storage_count_it_once_and_whole() -> None:
    base = torch.zeros(1000, dtype=torch.float64)
    # Two views of 16 and 80 bytes pin the whole 8000-byte storage, once.
    assert shm_leaves([base[:2], base[10:20]]) == [8000]


def test_dicts_and_sequences_are_walked_numpy_strings_and_numbers_count_nothing() -> None:
    batch = {
        "image": torch.zeros(2, 3, dtype=torch.uint8),
        "depth": np.zeros((100, 100), dtype=np.float32),
        "name": ["a", "b"],
        "id": 7,
        "score": 0.5,
        "nested": (torch.zeros(4, dtype=torch.int64), {"mask": torch.ones(10, dtype=torch.bool)}),
    }
    assert sorted(shm_leaves(batch)) == [6, 10, 32]


def test_dataclass_fields_are_walked() -> None:
    @dataclass
    class Sample:
        pixels: object
        label: str

    assert shm_leaves(Sample(torch.zeros(8, dtype=torch.float16), "cat")) == [16]


def test_default_collated_batch_of_tensor_int_numpy_and_string() -> None:
    def make(i: int) -> dict[str, object]:
        return {
            "image": torch.rand(3, 8, 8),
            "label": i,
            "mask": np.zeros((5, 7), dtype=np.uint8),
            "caption": f"item {i}",
        }

    loader = DataLoader(Items(make), batch_size=16, num_workers=2)
    sizing = size_batches(loader, batches=2)
    # collate stacks the images (16x3x8x8 float32), makes the ints one int64 tensor and the
    # numpy masks one uint8 tensor; the strings stay a list.
    expected = padded_bytes((16 * 3 * 8 * 8 * 4, 16 * 8, 16 * 5 * 7))
    assert sizing.pages == expected
    assert sizing.smallest == expected
    assert (sizing.batches, sizing.storages, sizing.origin) == (2, 3, "batches")
    assert not sizing.varies
    assert sizing.basis == (
        "the largest of 2 batches made before the workers start, all the same size"
    )


def test_variable_size_data_is_sized_from_the_largest_batch() -> None:
    # Padded text: each batch is padded to its longest item; item i has 100 * (i + 1) tokens.
    def make(i: int) -> object:
        return torch.ones(100 * (i + 1), dtype=torch.int64)

    def pad(items: list[object]) -> object:
        return torch.nn.utils.rnn.pad_sequence(items, batch_first=True)  # type: ignore[arg-type]

    loader = DataLoader(Items(make, 12), batch_size=4, collate_fn=pad, num_workers=1)
    sizing = size_batches(loader, batches=3)
    # batches [0-3], [4-7], [8-11] pad to 400, 800, 1200 tokens of 8 bytes, 4 rows each
    assert sizing.pages == padded_bytes((4 * 1200 * 8,))
    assert sizing.smallest == padded_bytes((4 * 400 * 8,))
    assert sizing.varies
    assert "largest of 3 batches" in sizing.basis and "variable-size data" in sizing.basis


def test_batch_size_none_sizes_one_item_through_the_loaders_collate() -> None:
    loader = DataLoader(
        Items(lambda i: np.zeros(3000, dtype=np.float32)), batch_size=None, num_workers=1
    )
    sizing = size_batches(loader, batches=1)
    # default_convert turns the numpy array into a tensor: 12000 bytes -> 3 pages
    assert sizing.pages == 3 * PAGE_SIZE
    assert sizing.basis == "one batch made before the workers start"


def test_stated_size_is_page_rounded_and_checked() -> None:
    s = stated_sizing(10_000)
    assert (s.pages, s.origin, s.batches) == (3 * PAGE_SIZE, "stated", 0)
    assert s.basis == "batch_bytes as given, rounded up to whole pages"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="batch_bytes must be int bytes > 0"):
            stated_sizing(bad)  # type: ignore[arg-type]


def _shuffled(seed: int) -> DataLoader:  # type: ignore[type-arg]
    return DataLoader(
        Items(lambda i: torch.full((4,), float(i)), 256),
        batch_size=8,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
        num_workers=0,
    )


def test_sizing_consumes_no_random_state() -> None:
    reference = next(iter(_shuffled(1234)))
    torch.manual_seed(99)
    random.seed(99)
    np.random.seed(99)
    expect_torch = torch.rand(3)
    expect_py = random.random()
    expect_np = np.random.rand()

    torch.manual_seed(99)
    random.seed(99)
    np.random.seed(99)
    loader = _shuffled(1234)
    sizing = size_batches(loader, batches=3)
    assert sizing.pages == padded_bytes((8 * 4 * 4,))
    # The loader's own generator, and torch's, Python's and numpy's global ones, are where
    # they were: the first batch is the one an unsized loader gives.
    assert torch.equal(next(iter(loader)), reference)
    assert torch.equal(torch.rand(3), expect_torch)
    assert random.random() == expect_py
    assert np.random.rand() == expect_np


def test_sizing_with_the_global_generator_leaves_the_order_alone() -> None:
    # shuffle=True without a generator draws the permutation's seed from torch's global RNG.
    def loader() -> DataLoader:  # type: ignore[type-arg]
        return DataLoader(Items(lambda i: torch.tensor([i])), batch_size=4, shuffle=True)

    torch.manual_seed(5)
    first = next(iter(loader()))
    torch.manual_seed(5)
    sized = loader()
    size_batches(sized, batches=2)
    assert torch.equal(next(iter(sized)), first)


def test_an_iterable_dataset_cannot_be_sized() -> None:
    from torch.utils.data import IterableDataset

    class Stream(IterableDataset):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            raise AssertionError("the stream must not be read")

    with pytest.raises(ValueError, match="IterableDataset cannot be sized"):
        size_batches(DataLoader(Stream(), batch_size=4, num_workers=2))
