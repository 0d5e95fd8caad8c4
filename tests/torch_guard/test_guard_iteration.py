"""guard around real DataLoaders with room to spare: batches pass unchanged and in order,
slow batches are waited for, other errors and the program's own timeout pass through."""

from __future__ import annotations

import time
import weakref

import pytest

from shmguard.torch import ShmGuardError, guard
from shmguard.torch.watch import proven_peak, recommended_timeout

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore:This DataLoader will create")]


class Slow(Dataset):  # type: ignore[type-arg]
    """Item i is tensor([i]) after ``delay`` seconds; item ``fail_at`` raises ``error``."""

    def __init__(
        self, n: int, delay: float = 0.0, fail_at: int = -1, error: Exception | None = None
    ):  # type: ignore[no-untyped-def]
        self.n, self.delay, self.fail_at, self.error = n, delay, fail_at, error

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        if i == self.fail_at:
            raise self.error
        time.sleep(self.delay)
        return torch.tensor([i])


def test_batches_come_through_unchanged_and_in_order() -> None:
    loader = DataLoader(Slow(40), batch_size=4, num_workers=2)
    bare = [b.tolist() for b in loader]
    guarded = [b.tolist() for b in guard(loader)]
    assert guarded == bare and len(guarded) == 10


def test_the_guard_keeps_no_batch_alive() -> None:
    # A loop that drops its batch frees it at once, guarded as bare: the guard must not hold
    # one more batch of /dev/shm.
    loader = DataLoader(Slow(12), batch_size=4, num_workers=2)
    for iterable in (loader, guard(loader)):
        alive = []
        for batch in iterable:
            ref = weakref.ref(batch)
            del batch
            alive.append(ref() is not None)
        assert alive == [False, False, False]


def test_slow_batches_are_waited_for_across_many_polls() -> None:
    # Each batch takes 0.6 s, the guard looks every 0.05 s: a dozen DataLoader timeouts per
    # batch, each answered by waiting again for the same batch.
    loader = DataLoader(Slow(4, delay=0.6), batch_size=1, num_workers=1, persistent_workers=True)
    got = [int(b) for b in guard(loader, poll=0.05, stall_after=0.1)]
    assert got == [0, 1, 2, 3]
    # The iterator the loader keeps (persistent workers) has its own timeout back.
    assert loader._iterator is not None and loader._iterator._timeout == 0
    assert [int(b) for b in guard(loader, poll=0.05)] == [0, 1, 2, 3]  # a second epoch


def test_the_programs_own_timeout_still_applies() -> None:
    # Each item takes 3 s: a loop that did not time out would end with both items and no
    # error (with poll=5.0 too: the program's 0.3 s must win over the guard's longer poll).
    for timeout, poll in ((0.5, 0.1), (0.3, 5.0)):  # shorter and longer than the guard's poll
        loader = DataLoader(Slow(2, delay=3.0), batch_size=1, num_workers=1, timeout=timeout)
        with pytest.raises(
            RuntimeError, match=rf"^DataLoader timed out after {timeout} seconds$"
        ) as info:
            list(guard(loader, poll=poll))
        assert not isinstance(info.value, ShmGuardError)  # /dev/shm is not full
        del info  # its traceback holds the iterator and its worker, asleep for 3 s


def test_other_worker_errors_pass_through() -> None:
    loader = DataLoader(Slow(2, fail_at=0, error=ValueError("bad item")), num_workers=1)
    with pytest.raises(ValueError, match="bad item"):
        list(guard(loader))
    loader = DataLoader(Slow(2, fail_at=0, error=RuntimeError("not shm")), num_workers=1)
    with pytest.raises(RuntimeError, match="Caught RuntimeError in DataLoader worker") as info:
        list(guard(loader))
    assert not isinstance(info.value, ShmGuardError)


def test_without_workers_the_loader_is_iterated_as_it_is() -> None:
    loader = DataLoader(Slow(6), batch_size=2, num_workers=0)
    guarded = guard(loader)
    assert [b.tolist() for b in guarded] == [[[0], [1]], [[2], [3]], [[4], [5]]]
    assert len(guarded) == 3 and guarded.batch_size == 2 and guarded.dataset is loader.dataset


def test_bad_times_are_refused() -> None:
    loader = DataLoader(Slow(2))
    for kwargs in ({"stall_after": 0}, {"poll": -1}, {"watch_interval": 0}):
        with pytest.raises(ValueError, match="must be > 0 seconds"):
            guard(loader, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_bytes must be int bytes > 0"):
        guard(loader, batch_bytes=0)


def test_recommended_timeout_is_ten_times_the_longest_wait() -> None:
    assert recommended_timeout(0.0) == 60
    assert recommended_timeout(5.2) == 60
    assert recommended_timeout(6.01) == 70
    assert recommended_timeout(30) == 300


def test_a_failed_allocation_proves_a_peak_the_sampler_may_have_missed() -> None:
    mib = 2**20
    images = 32 * 3 * 224 * 224 * 4  # the seed's batch: 18.4 MiB, not a whole page count
    # The case CI saw: 35 MiB sampled in 64 MiB, one 18.4 MiB request refused by tmpfs.
    proven = proven_peak(35 * mib, 64 * mib, (("torch_1_a", images),))
    assert proven == 64 * mib - (images + 4095) // 4096 * 4096
    assert proven > 45 * mib
    # The smallest refused request proves the most: 256 bytes refused leaves under a page.
    assert proven_peak(0, 64 * mib, (("a", images), ("b", 256))) == 64 * mib - 4096
    # A higher sample stands; no failed allocation proves nothing.
    assert proven_peak(63 * mib, 64 * mib, (("a", images),)) == 63 * mib
    assert proven_peak(35 * mib, 64 * mib, ()) == 35 * mib


def test_a_guarded_loader_can_be_copied_and_pickled() -> None:
    # copy and pickle look attributes up on an instance whose __dict__ is still empty: an
    # attribute the loader has not must be an AttributeError, not a KeyError.
    import copy
    import pickle

    loader = DataLoader(Slow(6), batch_size=2, num_workers=1)
    for twin in (copy.copy(guard(loader)), pickle.loads(pickle.dumps(guard(loader, poll=0.5)))):
        assert [b.tolist() for b in twin] == [[[0], [1]], [[2], [3]], [[4], [5]]]
    assert not hasattr(guard(loader), "no_such_attribute")


def test_the_watcher_thread_is_gone_when_the_loop_ends() -> None:
    import threading

    def watchers() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name == "shm-sampler"]

    loader = DataLoader(Slow(12), batch_size=4, num_workers=1)
    assert [b.tolist()[0] for b in guard(loader)] == [[0], [4], [8]]
    assert watchers() == []  # exhausted
    for _ in guard(loader):
        break
    assert watchers() == []  # left early: the generator is closed at the break
