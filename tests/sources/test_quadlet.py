"""Podman Quadlet units read as the `podman run` Quadlet generates, on Podman's own test units
(tests/fixtures/quadlet/SOURCES.tsv); the fix's key follows `--target podman=X.Y`."""

from __future__ import annotations

from pathlib import Path

from shmguard.lint.check import CheckOptions, check_loaded, fix_file
from shmguard.model.target import Target
from shmguard.sources.discover import walk
from shmguard.sources.load import load_bytes, load_path
from shmguard.sources.quadlet import shm_key

FIXTURES = Path(__file__).parents[1] / "fixtures" / "quadlet"


def test_podmans_own_units_read_as_their_podman_args() -> None:
    lf = load_path(str(FIXTURES / "shmsize.container"))
    assert lf.kind == "quadlet"
    (q,) = lf.quadlets
    assert q.run is not None and q.run.image is not None
    assert q.run.image[0] == "localhost/imagename"
    # "## assert-podman-args "--shm-size=5g"": what Podman's test expects Quadlet to pass
    assert [(f.name, f.value) for f in q.run.flags] == [("--shm-size", "5g")]
    (q,) = load_path(str(FIXTURES / "podmanargs.container")).quadlets
    assert q.run is not None
    # all three words, the continued line joined (an unknown long flag takes the next word as
    # its value, as for any run line; never the image, which Image= gives)
    assert [(f.name, f.value) for f in q.run.flags] == [("--foo", "--bar"), ("--also", None)]
    assert q.run.image is not None and q.run.image[0] == "imagename"


def test_ml_unit_gets_shm001_and_the_key_the_target_has() -> None:
    bad = (FIXTURES / "pytorch-unsized.container").read_bytes()
    r = check_loaded(load_bytes(bad, "train.container"))
    assert [(f.code, f.location.line if f.location else 0) for f in r.findings] == [("SHM001", 2)]
    # Podman 4.3 (the default target): no ShmSize= key yet (4.7), PodmanArgs= instead
    old = fix_file(bad, "train.container")
    assert old.data == bad.replace(
        b"pytorch:24.01-py3\n", b"pytorch:24.01-py3\nPodmanArgs=--shm-size=1g\n"
    )
    new_target = CheckOptions(target=Target(podman="5.4"))
    new = fix_file(bad, "train.container", new_target)
    assert new.data == bad.replace(b"pytorch:24.01-py3\n", b"pytorch:24.01-py3\nShmSize=1g\n")
    for data, opts in ((old.data, None), (new.data, new_target)):
        assert fix_file(data, "train.container", opts).applied == ()  # idempotent
    # a ShmSize at the default is no fix (SHM001 default-size): rewritten in place
    small = new.data.replace(b"ShmSize=1g", b"ShmSize=64m")
    assert fix_file(small, "train.container", new_target).data == new.data


def test_shm_key_by_version_and_pod_members() -> None:
    assert shm_key("container", "4.3") == "PodmanArgs"
    assert shm_key("container", "4.7") == "ShmSize"
    assert shm_key("pod", "5.3") == "PodmanArgs"
    assert shm_key("pod", "5.4") == "ShmSize"
    # a container in a pod has the pod's /dev/shm: not this unit's to size
    bad = (FIXTURES / "pytorch-unsized.container").read_bytes() + b"Pod=train.pod\n"
    assert check_loaded(load_bytes(bad, "train.container")).findings == ()


def test_kube_unit_brings_its_yaml(tmp_path: Path) -> None:
    (tmp_path / "train.kube").write_text("[Kube]\nYaml=train.yaml\n")
    (tmp_path / "train.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: t}\nspec:\n  containers:\n"
        "    - {name: t, image: pytorch/pytorch, command: [torchrun, train.py]}\n"
    )
    w = walk([str(tmp_path / "train.kube")])
    assert w.files == [str(tmp_path / "train.kube"), str(tmp_path / "train.yaml")]
    codes = [f.code for f in check_loaded(load_path(w.files[1])).findings]
    assert codes == ["SHM001"]
