"""SHM026 `kuberay-shm`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from _rule_helpers import FIXTURES, at, findings, only

from shmguard.lint.check import check_loaded
from shmguard.sources.load import load_bytes


def test_shm026_redundant_dshm_and_plasma_directory() -> None:
    fs = findings("kuberay.yaml", "SHM026")
    assert at(fs) == [
        ("SHM026", "info", 15, 28),  # head: dshm without sizeLimit beside a 32Gi limit
        ("SHM026", "info", 28, 54),  # worker: sizeLimit equal to the limit
        ("SHM026", "info", 57, 9),  # RayJob head: plasma-directory and no /dev/shm
    ]  # own-size worker, the submitter pod and the worker that mounts one: nothing
    assert "without a sizeLimit" in fs[0].message and "(32Gi)" in fs[0].message
    assert "the same as KubeRay's" in fs[1].message
    assert "'/mnt/plasma' makes KubeRay skip" in fs[2].message and "64 MiB" in fs[2].message
    assert all(f.fix is not None and f.fix.edits == () for f in fs)


def test_shm026_only_for_kuberay_kinds() -> None:
    src = (FIXTURES / "kuberay.yaml").read_text().split("---")[0]
    src = src.replace("ray.io/v1", "example.com/v1")
    assert check_loaded(load_bytes(src.encode(), "x.yaml"), rules=only("SHM026")).findings == ()
