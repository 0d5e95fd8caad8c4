"""SHM001 `ml-workload-without-shm-size`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from _rule_helpers import fixes_of

from shmguard.lint.check import check_loaded, fix_file
from shmguard.model.finding import Applicability
from shmguard.sources.load import load_bytes

POD = b"""apiVersion: v1
kind: Pod
metadata: {name: t}
spec:
  containers:
    - name: t
      image: pytorch/pytorch
      volumeMounts:
        - {name: dshm, mountPath: /dev/shm}
  volumes:
    - name: dshm
      emptyDir: MEDIUM
"""


def test_flow_style_service_gets_shm001_inserted_first() -> None:
    src = b"services:\n  train: {image: pytorch/pytorch, command: torchrun train.py}\n"
    assert fixes_of(src) == [("SHM001", 'Add shm_size: "1g"', "safe", ('shm_size: "1g", ',))]
    r = fix_file(src, "compose.yaml")
    assert r.data == (
        b"services:\n"
        b'  train: {shm_size: "1g", image: pytorch/pytorch, command: torchrun train.py}\n'
    )
    assert r.remaining.findings == ()


def test_service_through_an_anchor_is_not_edited() -> None:
    src = (
        b"x-t: &t\n  image: pytorch/pytorch\n  command: torchrun train.py\n"
        b"services:\n  a: *t\n  b: *t\n"
    )
    got = check_loaded(load_bytes(src, "compose.yaml")).findings
    assert [f.code for f in got] == ["SHM001", "SHM001"]
    assert all(f.fix is not None and f.fix.applicability is Applicability.DISPLAY_ONLY for f in got)


def test_disk_backed_emptydir_at_dev_shm_is_info_with_a_shown_fix() -> None:
    for medium in (b"{}", b'{medium: ""}'):
        (f,) = check_loaded(load_bytes(POD.replace(b"MEDIUM", medium), "pod.yaml")).findings
        assert (f.code, f.severity.value) == ("SHM001", "info")
        assert f.message == (
            "Pod t: container 't' mounts the disk-backed emptyDir 'dshm' at /dev/shm: no 64 MiB "
            "limit, but a directory on the node's disk rather than a tmpfs (shared memory goes "
            "through the page cache and counts as ephemeral storage)"
        )
        assert f.fix is not None and f.fix.edits == ()
        assert f.fix.title == "Write medium: Memory (and a sizeLimit)"
    for medium in (b"{medium: Memory, sizeLimit: 1Gi}", b"{medium: HugePages}"):
        assert check_loaded(load_bytes(POD.replace(b"MEDIUM", medium), "pod.yaml")).findings == ()


def test_no_volume_at_dev_shm_message() -> None:
    src = POD.replace(b"      volumeMounts:\n        - {name: dshm, mountPath: /dev/shm}\n", b"")
    (f,) = check_loaded(load_bytes(src.replace(b"MEDIUM", b"{}"), "pod.yaml")).findings
    assert (f.code, f.severity.value) == ("SHM001", "warning")
    assert f.message == (
        "Pod t: container 't' is an ML workload (image pytorch/pytorch (pytorch)) with no "
        "volume at /dev/shm: it gets the runtime's 64 MiB"
    )
