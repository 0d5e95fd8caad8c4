"""``recommend --manifests``: the proposals of rows derived from a real Prometheus recording
(rightsize_rows.py) written into copies of manifests by check --fix's own machinery.

Each edited file is held to: changed lines exactly the proposal's (every other byte kept), a
second run changes nothing, ``check`` reports no SHM finding left in the edited objects, and
every object still validates against the Kubernetes 1.30 schema (kubernetes-validate,
strict)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest
import yaml
from rightsize_rows import recorded_report

from shmguard.lint.check import check_loaded
from shmguard.lint.proposal import Proposal, apply_proposals
from shmguard.model.fix import Change, Setting
from shmguard.monitor.manifests import proposals, workload_name
from shmguard.render.json_bodies import manifests_body
from shmguard.render.manifests_text import manifest_lines
from shmguard.render.rightsize_text import workload_patches
from shmguard.sources.load import load_bytes
from shmguard.units import format_k8s_quantity

MiB = 1 << 20
K8S = "1.30"

#: The recorded workloads as a user might keep them: flow and block styles, comments, an
#: existing /dev/shm with a stale annotation, a List, a namesake in another namespace, and
#: objects no row names.
TRAIN = """\
# trainer: no /dev/shm yet
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: ml}
spec:
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      containers:
        - name: trainer   # the job
          image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
          resources: {limits: {memory: 512Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: train, namespace: ml}
spec:
  selector: {app: train}
  ports: [{port: 80}]
"""
RESNET = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: resnet
spec:
  selector:
    matchLabels: {app: resnet}
  template:
    metadata:
      labels: {app: resnet}
      annotations:
        shmguard.io/shm-size: "128Mi"
    spec:
      containers:
      - name: trainer
        image: nvcr.io/nvidia/pytorch:24.01-py3
        resources:
          limits:
            memory: "1Gi"
          requests:
            memory: 1Gi
        volumeMounts:
        - name: shm
          mountPath: /dev/shm
      volumes:
      - name: shm
        emptyDir:
          medium: Memory
          sizeLimit: 128Mi   # set by hand in March
"""
OTHERS = """\
apiVersion: v1
kind: List
items:
- apiVersion: batch/v1
  kind: CronJob
  metadata: {name: nightly, namespace: ml}
  spec:
    schedule: "0 3 * * *"
    jobTemplate:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: job
              image: pytorch/pytorch
              resources:
                limits: {memory: 256Mi}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: train, namespace: prod}
  spec:
    selector: {matchLabels: {app: train}}
    template:
      metadata: {labels: {app: train}}
      spec:
        containers:
        - {name: trainer, image: pytorch/pytorch}
"""
UNRELATED = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: nginx}]
"""


def _report() -> Any:
    return recorded_report(train={"peak": 60 * MiB, "size": 256 * MiB})


def _changed_lines(old: bytes, new: bytes) -> tuple[list[str], list[str]]:
    """Lines removed and added (difflib's line diff)."""
    a, b = old.decode().splitlines(), new.decode().splitlines()
    removed, added = [], []
    for line in difflib.unified_diff(a, b, lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        (removed if line[0] == "-" else added).append(line[1:])
    return removed, added


def _validate(data: bytes) -> list[dict[str, Any]]:
    kv = pytest.importorskip("kubernetes_validate")
    objs = []
    for doc in yaml.safe_load_all(data):
        for obj in doc["items"] if doc["kind"] == "List" else [doc]:
            kv.validate(obj, K8S, strict=True)
            objs.append(obj)
    return objs


def _apply(path: Path, wanted: tuple[Proposal, ...]) -> Any:
    data = path.read_bytes()
    r = apply_proposals(data, str(path), wanted)
    again = apply_proposals(r.data, str(path), wanted)
    assert again.data == r.data and again.applied == ()  # a second run changes nothing
    return data, r


def test_rows_become_proposals_with_the_patches_reasons() -> None:
    report = _report()
    wanted, skipped = proposals(report.workloads)
    by = {(p.label, p.container): p for p in wanted}
    train = by[("ml/Deployment/train", "trainer")]
    row = next(w for w in report.workloads if workload_name(w) == "ml/Deployment/train")
    assert train.value(Setting.SHM_SIZE) == row.recommendation.shm_size == 80 * MiB
    assert train.value(Setting.MEMORY_LIMIT) == row.recommendation.memory_limit.value
    # etl keeps its memory limit (memory_change 0): no memory-limit change is proposed
    etl = by[("ml/StatefulSet/etl", "worker")]
    assert etl.value(Setting.MEMORY_LIMIT) is None and etl.value(Setting.SHM_SIZE) == 64 * MiB
    # rows left out say why, in the same words as --patches (which also skips rows with
    # nothing to change, where a manifest may still lack the kept size)
    _, patch_skips = workload_patches(report)
    assert skipped and all(patch_skips[k] == why for k, why in skipped.items())
    assert skipped[("ml/Pod/scratch", "shell")] == "no size proposed"


def test_proposals_are_written_exactly_and_check_is_clean_after(tmp_path: Path) -> None:
    files = {"train.yaml": TRAIN, "resnet.yaml": RESNET, "others.yaml": OTHERS}
    files["web.yaml"] = UNRELATED
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    wanted, _ = proposals(_report().workloads)
    results = {}
    for name in files:
        old, r = _apply(tmp_path / name, wanted)
        results[name] = r
        # no SHM finding left in the edited objects, and nothing left to do by hand
        assert r.left == () and r.not_applied == () and r.diagnostics == ()
        _validate(r.data)
        assert (old == r.data) == (name == "web.yaml")

    removed, added = _changed_lines(TRAIN.encode(), results["train.yaml"].data)
    assert removed == ["          resources: {limits: {memory: 512Mi}}"]
    assert added == [
        "          resources: {limits: {memory: 1280Mi}}",
        "          volumeMounts:",
        "            - name: dshm",
        "              mountPath: /dev/shm",
        "      volumes:",
        "        - name: dshm",
        "          emptyDir:",
        "            medium: Memory",
        "            sizeLimit: 80Mi",
    ]
    # resnet: the existing emptyDir resized in place (its comment kept), the annotation
    # follows; its 1 GiB limit rises to the proposal (160 MiB of /dev/shm + the 1 GiB margin),
    # and its request, equal to the limit, with it (the pod's QoS class stays as it was)
    removed, added = _changed_lines(RESNET.encode(), results["resnet.yaml"].data)
    assert removed == [
        '        shmguard.io/shm-size: "128Mi"',
        '            memory: "1Gi"',
        "            memory: 1Gi",
        "          sizeLimit: 128Mi   # set by hand in March",
    ]
    assert added == [
        '        shmguard.io/shm-size: "160Mi"',
        '            memory: "1280Mi"',
        "            memory: 1280Mi",
        "          sizeLimit: 160Mi   # set by hand in March",
    ]
    # the List: the CronJob (namespace ml) edited under jobTemplate; prod's namesake "train"
    # is another workload and stays as it was
    others = _validate(results["others.yaml"].data)
    cron = others[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert cron["containers"][0]["resources"] == {"limits": {"memory": "1280Mi"}}
    # recommend proposed 64Mi; a proposal never writes the 64 MiB default (issue 21): 80Mi
    assert cron["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "80Mi"}}
    ]
    assert others[1]["spec"]["template"]["spec"]["containers"] == [
        {"name": "trainer", "image": "pytorch/pytorch"}
    ]
    # what check itself says of the files: no SHM finding but prod's (untouched) namesake's
    for name, r in results.items():
        found = check_loaded(load_bytes(r.data, name)).findings
        if name != "others.yaml":
            assert found == (), name
            continue
        prod = r.data.index(b"namespace: prod")
        assert [f.code for f in found] == ["SHM001"]
        assert all((f.location.start or 0) > prod for f in found if f.location is not None)

    # the report: per file what changed, files without a recommended workload, workloads
    # without a manifest
    rs = list(results.values())
    lines = manifest_lines(rs, wanted, {("ml/Pod/scratch", "shell"): "no size proposed"}, "show")
    path = str(tmp_path / "train.yaml")
    assert (
        f"would change {path}: ml/Deployment/train container 'trainer': memory limit 512Mi "
        "-> 1280Mi"
    ) in lines
    assert f"{tmp_path / 'web.yaml'}: no recommended workload in it" in lines
    assert (
        "no manifest for ml/StatefulSet/etl worker: no StatefulSet 'etl' with container 'worker' "
        "in --manifests" in lines
    )
    assert "no edit for ml/Pod/scratch shell: no size proposed" in lines
    assert lines[-1].startswith("nothing written: --fix writes")
    data = manifests_body(rs, wanted, {}, written=False)
    assert [f["file"] for f in data["files"] if not f["workloads"]] == [str(tmp_path / "web.yaml")]
    assert {w["workload"] for w in data["no_manifest"]} == {
        "ml/StatefulSet/etl",
        "ml/TrainingJob/bert",
        "research/Pod/debug-pod-x2b4z",
    }


def _proposal(kind: str, name: str, container: str, shm: int, mem: int | None = None) -> Proposal:
    changes = [Change(Setting.SHM_SIZE, shm, ("kubernetes",))]
    if mem is not None:
        changes.append(Change(Setting.MEMORY_LIMIT, mem, ("kubernetes",)))
    return Proposal("", kind, name, container, "", tuple(changes), f"{kind}/{name}")


def test_limits_are_never_cut_and_an_invalid_request_is_not_made() -> None:
    text = RESNET.replace('memory: "1Gi"', 'memory: "4Gi"').replace("memory: 1Gi", "memory: 3Gi")
    resnet = _proposal("Deployment", "resnet", "trainer", 96 * MiB, 2048 * MiB)
    r = apply_proposals(text.encode(), "x.yaml", [resnet])
    removed, added = _changed_lines(text.encode(), r.data)
    assert [x.strip() for x in added] == [
        'shmguard.io/shm-size: "96Mi"',
        "sizeLimit: 96Mi   # set by hand in March",
    ]
    assert len(removed) == 2  # the 4 GiB limit stays: a proposal never lowers one
    # no limit, a request above the proposed one: adding the limit would be invalid
    text = RESNET.replace('          limits:\n            memory: "1Gi"\n', "")
    text = text.replace("memory: 1Gi", "memory: 3Gi")
    resnet = _proposal("Deployment", "resnet", "trainer", 128 * MiB, 2048 * MiB)
    r = apply_proposals(text.encode(), "x.yaml", [resnet])
    assert r.data == text.encode() and r.applied == ()
    assert r.not_applied == (
        "Deployment/resnet container 'trainer': memory limit none -> 2Gi (not applied: "
        "requests.memory 3 GiB is above it; set both by hand)",
    )
    _validate(r.data)


def test_a_missing_limit_is_added_in_the_files_style_and_job_daemonset_matches_both() -> None:
    block = UNRELATED.replace(
        "containers: [{name: nginx, image: nginx}]",
        "containers:\n      - name: nginx\n        image: nginx\n",
    )
    for kind, text in (("DaemonSet", block), ("Job", block.replace("apps/v1", "batch/v1"))):
        text = text.replace("kind: Deployment", f"kind: {kind}")
        if kind == "Job":
            text = text.replace("  selector: {matchLabels: {app: web}}\n", "").replace(
                "    spec:\n", "    spec:\n      restartPolicy: Never\n"
            )
        p = _proposal("Job/DaemonSet", "web", "nginx", 200 * MiB, 1500 * MiB)
        r = apply_proposals(text.encode(), "x.yaml", [p])
        (obj,) = _validate(r.data)
        (c,) = obj["spec"]["template"]["spec"]["containers"]
        assert c["resources"] == {"limits": {"memory": format_k8s_quantity(1500 * MiB)}}
        assert c["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
        assert apply_proposals(r.data, "x.yaml", [p]).data == r.data
    # flow style: the entry goes inside the braces
    web = _proposal("Deployment", "web", "nginx", 64 * MiB, 1088 * MiB)
    r = apply_proposals(UNRELATED.encode(), "x.yaml", [web])
    (obj,) = _validate(r.data)
    assert "containers: [{name: nginx, image: nginx, " in r.data.decode()
    assert obj["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"memory": "1088Mi"}
    }


def test_node_mode_rows_resize_only_the_named_volume() -> None:
    size = (Change(Setting.SHM_SIZE, 200 * MiB, ("kubernetes",)),)
    p = Proposal("", "Deployment", "resnet", "", "shm", size, "resnet (shm)")
    r = apply_proposals(RESNET.encode(), "x.yaml", [p])
    _, added = _changed_lines(RESNET.encode(), r.data)
    assert added == ["          sizeLimit: 200Mi   # set by hand in March"]
    assert r.matched == (p,)
    missing = Proposal("", "Deployment", "resnet", "", "cache", p.changes, "resnet (cache)")
    r = apply_proposals(RESNET.encode(), "x.yaml", [missing])
    assert r.data == RESNET.encode() and r.matched == ()


def test_a_dev_shm_that_is_not_memory_backed_is_shown_not_changed() -> None:
    text = RESNET.replace("          medium: Memory\n", "")
    p = _proposal("Deployment", "resnet", "trainer", 160 * MiB)
    r = apply_proposals(text.encode(), "x.yaml", [p])
    assert r.applied == () and r.data == text.encode()
    assert r.not_applied == (
        "Deployment/resnet container 'trainer': /dev/shm is volume 'shm', not a memory-backed "
        "emptyDir: give it a memory-backed emptyDir (medium: Memory) with a sizeLimit of 160Mi "
        "by hand",
    )
    # check says the same of it
    assert [line.split()[0] for line in r.left] == ["SHM001"]
    assert "mounts the disk-backed emptyDir 'shm' at /dev/shm" in r.left[0]


CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "k8s"
_BUILTIN = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod", "ReplicaSet")


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus (beside the checkout) is absent")
def test_every_corpus_workload_takes_a_proposal(tmp_path: Path) -> None:
    """A proposal (96 MiB of /dev/shm, a 2 GiB memory limit) for the first container of every
    built-in workload of every corpus manifest, applied to a copy: the edit holds (a second run
    changes nothing, the YAML parses), what is not applied says why, and check finds no size
    problem (SHM001, SHM009, SHM010) left in a fully edited object."""
    from shmguard.sources.discover import discover

    files = changed = 0
    shown: list[str] = []
    for f in discover([str(CORPUS)]):
        data = Path(f).read_bytes()
        wanted = [
            _proposal(p.obj.kind, p.obj.name, p.containers[0].name, 96 * MiB, 2048 * MiB)
            for p in load_bytes(data, f).pod_specs
            if p.obj.kind in _BUILTIN and p.obj.name and p.containers and p.containers[0].name
        ]
        if not wanted:
            continue
        copy = tmp_path / f"{files}.yaml"
        copy.write_bytes(data)
        files += 1
        _, r = _apply(copy, tuple(wanted))
        changed += r.data != data
        assert r.data != data or r.not_applied  # a file left as it was says why
        list(yaml.safe_load_all(r.data))
        shown += r.not_applied
        assert all("not applied" in m or "by hand" in m for m in r.not_applied), r.not_applied
        if not r.not_applied:
            left = {line.split()[0] for line in r.left}
            assert not left & {"SHM001", "SHM009", "SHM010"}, (f, r.left)
    assert files > 200 and changed > files * 0.9
    # the few left by hand: text check --fix cannot place either (a container ending in a
    # block scalar, anchors), a request above the limit, a /dev/shm that is not a memory tmpfs
    assert len(shown) < files // 10


def test_what_check_still_finds_follows_the_configuration() -> None:
    from shmguard.config import Config

    text = RESNET.replace("memory: 1Gi", "memory: 1G")  # a decimal request: SHM005
    p = _proposal("Deployment", "resnet", "trainer", 160 * MiB, 1280 * MiB)
    r = apply_proposals(text.encode(), "x.yaml", [p])
    assert r.applied and [line.split()[0] for line in r.left] == ["SHM005"]  # not the edit's
    quiet = apply_proposals(text.encode(), "x.yaml", [p], config=Config(ignore=("SHM005",)))
    assert quiet.data == r.data and quiet.left == ()


TWO = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: two
spec:
  selector:
    matchLabels: {app: two}
  template:
    metadata:
      labels: {app: two}
    spec:
      initContainers:
      - name: fetch
        image: busybox
      containers:
      - name: a
        image: pytorch/pytorch
      - name: b
        image: pytorch/pytorch
        resources:
          requests:
            memory: 512Mi
"""


def test_containers_share_one_emptydir_of_their_largest_proposal_crlf_kept() -> None:
    data = TWO.replace("\n", "\r\n").encode()
    wanted = [
        _proposal("Deployment", "two", "a", 96 * MiB),
        _proposal("Deployment", "two", "b", 200 * MiB, 2048 * MiB),
        _proposal("Deployment", "two", "fetch", 64 * MiB),  # an init container: not a row's
    ]
    r = apply_proposals(data, "x.yaml", wanted)
    assert b"\n" not in r.data.replace(b"\r\n", b"")  # every line ends as the file's do
    assert [p.container for p in r.matched] == ["a", "b"]
    (obj,) = _validate(r.data)
    spec = obj["spec"]["template"]["spec"]
    assert spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "200Mi"}}
    ]
    a, b = spec["containers"]
    assert a["volumeMounts"] == b["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert b["resources"] == {"requests": {"memory": "512Mi"}, "limits": {"memory": "2Gi"}}
    assert "volumeMounts" not in spec["initContainers"][0]
    assert apply_proposals(r.data, "x.yaml", wanted).data == r.data
    assert check_loaded(load_bytes(r.data, "x.yaml")).findings == ()
