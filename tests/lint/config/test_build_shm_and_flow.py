"""SHM019 carries the user's own build size (not SHM001's policy size), and Compose services
in flow style get SHM001's / SHM019's insertion applied."""

from __future__ import annotations

from shmguard.lint.check import check_loaded, fix_file
from shmguard.model.finding import Applicability
from shmguard.model.fix import Setting
from shmguard.sources.load import load_bytes


def findings(src: bytes) -> list[tuple[str, str, str, tuple[str, ...]]]:
    out = []
    for f in check_loaded(load_bytes(src, "compose.yaml")).findings:
        assert f.fix is not None
        out.append(
            (
                f.code,
                f.fix.title,
                f.fix.applicability.value,
                tuple(e.content for e in f.fix.edits),
            )
        )
    return out


BUILD_FLOW = (
    b"services:\n"
    b"  train:\n"
    b"    build: {context: ., shm_size: 8g}\n"
    b"    image: nvcr.io/nvidia/pytorch:24.01-py3\n"
    b"    command: torchrun --nproc-per-node 8 train.py\n"
)


def test_build_size_is_shm019_alone_with_the_users_size_safe() -> None:
    assert findings(BUILD_FLOW) == [
        ("SHM019", 'Add shm_size: "8g" to the service', "safe", ('    shm_size: "8g"\n',))
    ]
    r = fix_file(BUILD_FLOW, "compose.yaml")
    assert r.data == BUILD_FLOW.replace(b"  train:\n", b'  train:\n    shm_size: "8g"\n')
    assert [f.code for f in r.applied] == ["SHM019"] and r.remaining.findings == ()


def test_build_size_in_bytes_written_in_go_units_and_unsafe_above_the_memory_limit() -> None:
    src = (
        b"services:\n  t:\n    image: pytorch/pytorch\n    mem_limit: 4g\n"
        b"    build:\n      context: .\n      shm_size: 8589934592\n"
    )
    # 8 GiB beside a 4 GiB limit keeps no margin: applied only with --unsafe-fixes
    assert findings(src) == [
        ("SHM019", 'Add shm_size: "8g" to the service', "unsafe", ('    shm_size: "8g"\n',))
    ]
    assert fix_file(src, "compose.yaml").data == src
    fixed = fix_file(src, "compose.yaml", unsafe=True).data
    # then SHM010 (8 GiB of shm beside a 4 GiB limit) raises the limit by the policy: 9g
    assert fixed == src.replace(b"  t:\n", b'  t:\n    shm_size: "8g"\n').replace(
        b"mem_limit: 4g", b"mem_limit: 9g"
    )
    (f,) = check_loaded(load_bytes(src, "compose.yaml")).findings
    assert f.fix is not None and [(c.setting, c.value) for c in f.fix.changes] == [
        (Setting.SHM_SIZE, 8 << 30)
    ]


def test_build_size_that_fits_the_memory_limit_is_safe() -> None:
    src = (
        b"services:\n  t:\n    image: pytorch/pytorch\n    mem_limit: 16g\n"
        b"    build:\n      shm_size: '512m'\n"
    )
    assert findings(src) == [
        ("SHM019", 'Add shm_size: "512m" to the service', "safe", ('    shm_size: "512m"\n',))
    ]


def test_build_size_placeholder_is_shown_not_applied() -> None:
    src = b"services:\n  t:\n    image: pytorch/pytorch\n    build:\n      shm_size: ${SHM}\n"
    assert findings(src) == [("SHM019", "Add shm_size: ${SHM} to the service", "display-only", ())]


def test_flow_style_service_gets_shm001_inserted_first() -> None:
    src = b"services:\n  train: {image: pytorch/pytorch, command: torchrun train.py}\n"
    assert findings(src) == [("SHM001", 'Add shm_size: "1g"', "safe", ('shm_size: "1g", ',))]
    r = fix_file(src, "compose.yaml")
    assert r.data == (
        b"services:\n"
        b'  train: {shm_size: "1g", image: pytorch/pytorch, command: torchrun train.py}\n'
    )
    assert r.remaining.findings == ()


def test_flow_style_service_gets_shm019_inserted() -> None:
    src = b"services: {train: {build: {shm_size: 2g}, image: pytorch/pytorch}}\n"
    r = fix_file(src, "compose.yaml")
    assert r.data == (
        b'services: {train: {shm_size: "2g", build: {shm_size: 2g}, image: pytorch/pytorch}}\n'
    )
    assert [f.code for f in r.applied] == ["SHM019"]


def test_service_through_an_anchor_is_not_edited() -> None:
    src = (
        b"x-t: &t\n  image: pytorch/pytorch\n  command: torchrun train.py\n"
        b"services:\n  a: *t\n  b: *t\n"
    )
    got = check_loaded(load_bytes(src, "compose.yaml")).findings
    assert [f.code for f in got] == ["SHM001", "SHM001"]
    assert all(f.fix is not None and f.fix.applicability is Applicability.DISPLAY_ONLY for f in got)


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
