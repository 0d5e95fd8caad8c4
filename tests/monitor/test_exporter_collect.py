"""The exporter's collector against a real private tmpfs /dev/shm (a sandbox)."""

from __future__ import annotations

import os

from monitor_helpers import MiB, exists_in, samples, value, wait_for

from shmguard.monitor.exporter import METRICS, ExporterOptions, ShmCollector, labels_from_env


def _collector(path: str, **kw: object) -> ShmCollector:
    opts = ExporterOptions(shm_path=path, labels=labels_from_env({}), **kw)  # type: ignore[arg-type]
    c = ShmCollector(opts)
    c.start()
    return c


def test_spike_between_scrapes_is_in_the_peak_for_every_scraper(root_only: None, shm_box) -> None:
    box = shm_box(
        "head -c 40M /dev/zero > /dev/shm/fill; sleep 0.3; rm /dev/shm/fill; "
        "head -c 8M /dev/zero > /dev/shm/keep; touch /dev/shm/done; sleep 60"
    )
    c = _collector(str(box.shm_path), interval=0.05, window=60, bucket=1)
    try:
        assert value(c, "shmguard_shm_used_bytes") < 1 * MiB
        box.release()
        assert wait_for(exists_in(box, "done"))
        first, second = samples(c), samples(c)  # two scrapers, one after the other
        for got in (first, second):
            assert got[("shmguard_up", ())] == 1
            assert got[("shmguard_shm_size_bytes", ())] == 64 * MiB
            assert 8 * MiB <= got[("shmguard_shm_used_bytes", ())] < 9 * MiB
            assert (
                got[("shmguard_shm_avail_bytes", ())]
                == 64 * MiB - got[("shmguard_shm_used_bytes", ())]
            )
            assert 40 * MiB <= got[("shmguard_shm_peak_bytes", ())] < 49 * MiB
            # the named file nobody holds open is an owner of kind "other"
            assert got[("shmguard_shm_owner_bytes", (("owner", "other"),))] == 8 * MiB
            assert got[("shmguard_shm_owner_bytes", (("owner", "torch"),))] == 0
            assert got[("shmguard_stalled", ())] == 0
            assert got[("shmguard_shm_failed_allocations_total", ())] == 0
            assert ("shmguard_shm_required_bytes", ()) not in got
        # Names it exports are the documented ones (the counter with its _total).
        names = {n.removesuffix("_total") for n, _ in first}
        assert names <= {m.removesuffix("_total") for m in METRICS}
    finally:
        c.close()


def test_vanished_shm_gives_up_zero_not_an_error(root_only: None, shm_box) -> None:
    box = shm_box("sleep 60")
    box.release()
    c = _collector(str(box.shm_path), required=96 * MiB)
    try:
        assert value(c, "shmguard_up") == 1
        assert value(c, "shmguard_shm_required_bytes") == 96 * MiB
        box.__exit__(None, None, None)  # the sandbox and its /dev/shm are gone
        got = samples(c)
        assert got[("shmguard_up", ())] == 0
        assert ("shmguard_shm_used_bytes", ()) not in got
        assert got[("shmguard_info", (("path", str(box.shm_path)), ("version", "0.1.0")))] == 1
    finally:
        c.close()


def test_full_shm_with_a_failed_allocation_and_no_progress_is_stalled(
    root_only: None, shm_box
) -> None:
    # 63 of 64 MiB used (less than 2% free) and a zero-block torch_* file, the mark a failed
    # PyTorch allocation leaves (torch_shm.md 1.2), then nothing moves.
    box = shm_box(
        "head -c 63M /dev/zero > /dev/shm/fill; truncate -s 4M /dev/shm/torch_1_2_3; "
        "touch /dev/shm/done; exec sleep 60"
    )
    assert box.init_pid is not None
    c = _collector(str(box.shm_path), pid=box.init_pid, stall_after=1.0, window=60, bucket=1)
    try:
        box.release()
        assert wait_for(exists_in(box, "done"))
        assert value(c, "shmguard_shm_failed_allocations_total") == 1
        assert wait_for(lambda: value(c, "shmguard_stalled") == 1, timeout=15, every=0.3)
        assert value(c, "shmguard_shm_failed_allocations_total") == 1  # counted once
    finally:
        c.close()


def test_labels_come_from_the_downward_api_variables() -> None:
    env = {"POD_NAMESPACE": "ml", "POD_NAME": "train-0", "CONTAINER_NAME": "trainer"}
    assert labels_from_env(env) == {"namespace": "ml", "pod": "train-0", "container": "trainer"}
    c = ShmCollector(ExporterOptions(shm_path=os.devnull + "-missing", labels=labels_from_env(env)))
    family = next(f for f in c.collect() if f.name == "shmguard_up")
    assert family.samples[0].labels == {"namespace": "ml", "pod": "train-0", "container": "trainer"}
    assert family.samples[0].value == 0
