"""``recommend --manifests`` on what real files do (lint_traps.md): anchors shared between the
items of a List, a file without a final newline, a null ``resources:``, files that cannot be
written. Each case found by an adversarial pass over the feature; the proposals are values as
``recommend`` makes them (``Proposal``), the files real bytes."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shmguard.lint.check import write_atomic
from shmguard.lint.proposal import NOT_PLACED, Proposal, apply_proposals
from shmguard.model.fix import Change, Setting
from shmguard.monitor.manifests import manifest_files
from shmguard.render.check_text import unified_diff
from shmguard.render.manifests_text import manifest_lines

MiB = 1 << 20


def _proposal(name: str, container: str, shm: int, mem: int | None = None) -> Proposal:
    changes = [Change(Setting.SHM_SIZE, shm, ("kubernetes",))]
    if mem is not None:
        changes.append(Change(Setting.MEMORY_LIMIT, mem, ("kubernetes",)))
    return Proposal("a", "Deployment", name, container, "", tuple(changes), f"a/{name}")


#: Two Deployments of one List sharing a pod spec through an anchor and an alias.
SHARED_POD = """\
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: train, namespace: a}
  spec:
    selector: {matchLabels: {app: train}}
    template:
      metadata: {labels: {app: train}}
      spec: &pod
        containers:
        - name: trainer
          image: pytorch/pytorch
          resources:
            limits: {memory: 1Gi}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: train2, namespace: a}
  spec:
    selector: {matchLabels: {app: train}}
    template:
      metadata: {labels: {app: train}}
      spec: *pod
"""


def test_a_pod_spec_anchored_in_one_list_item_and_aliased_in_another_is_left_alone() -> None:
    # Before: the anchored item was edited (its text is train2's too), each round resized the
    # shared emptyDir to the other workload's proposal (256Mi <-> 512Mi), a second run changed
    # the file again, and a proposal for train2 alone raised train's memory limit.
    both = [
        _proposal("train", "trainer", 256 * MiB, 2048 * MiB),
        _proposal("train2", "trainer", 512 * MiB, 3072 * MiB),
    ]
    for wanted in (both, both[1:], both[:1]):
        r = apply_proposals(SHARED_POD.encode(), "list.yaml", wanted)
        assert r.data == SHARED_POD.encode() and r.applied == ()
        assert len(r.not_applied) == 2 * len(wanted)
        assert all(m.endswith(NOT_PLACED) for m in r.not_applied)
    # the same pod spec written out in each item is edited as usual
    body = SHARED_POD.split("      spec: &pod\n")[1].split("- apiVersion")[0]
    flat = SHARED_POD.replace("spec: &pod", "spec:").replace("spec: *pod\n", "spec:\n" + body)
    r = apply_proposals(flat.encode(), "list.yaml", both)
    assert r.not_applied == () and len(r.applied) == 4
    items = yaml.safe_load(r.data)["items"]
    limits = [i["spec"]["template"]["spec"]["containers"][0]["resources"] for i in items]
    assert limits == [{"limits": {"memory": "2Gi"}}, {"limits": {"memory": "3Gi"}}]
    assert apply_proposals(r.data, "list.yaml", both).data == r.data


NO_FINAL_NEWLINE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: a}
spec:
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      containers:
      - name: trainer
        image: pytorch/pytorch"""


def test_the_diff_of_a_file_without_a_final_newline_applies_with_patch(tmp_path: Path) -> None:
    # Before: the removed last line ran into the next one ("-  image: x+  image: x"): patch
    # refused the diff.
    if shutil.which("patch") is None:
        pytest.skip("no patch(1)")
    old = NO_FINAL_NEWLINE.encode()
    r = apply_proposals(old, "x.yaml", [_proposal("train", "trainer", 96 * MiB, 2048 * MiB)])
    assert len(r.applied) == 2
    text = unified_diff("x.yaml", old, r.data)
    assert "\\ No newline at end of file\n" in text
    (tmp_path / "x.yaml").write_bytes(old)
    (tmp_path / "d.diff").write_text(text)
    done = subprocess.run(
        ["patch", "-p1", "-i", "d.diff"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "x.yaml").read_bytes() == r.data


def test_fix_writes_through_a_symlink_and_keeps_the_owner(tmp_path: Path) -> None:
    # Before: the link was replaced by a regular file holding the edit, and the file it named
    # (a shared base, say) stayed as it was; the written file became root's.
    base = tmp_path / "base"
    base.mkdir()
    real = base / "train.yaml"
    real.write_text(NO_FINAL_NEWLINE + "\n")
    real.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(real, 65534, 65534)
    link = tmp_path / "train.yaml"
    link.symlink_to("base/train.yaml")
    r = apply_proposals(link.read_bytes(), str(link), [_proposal("train", "trainer", 96 * MiB)])
    assert r.applied
    write_atomic(str(link), r.data)
    assert link.is_symlink() and os.readlink(link) == "base/train.yaml"
    assert real.read_bytes() == r.data
    st = real.stat()
    assert stat.S_IMODE(st.st_mode) == 0o640
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (65534, 65534)
    assert sorted(p.name for p in base.iterdir()) == ["train.yaml"]  # no temporary left


def _deployment_json(container: dict[str, object], **pod: object) -> dict[str, object]:
    spec = {"containers": [{"name": "trainer", "image": "pytorch/pytorch", **container}], **pod}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "train", "namespace": "a"},
        "spec": {
            "selector": {"matchLabels": {"app": "t"}},
            "template": {"metadata": {"labels": {"app": "t"}}, "spec": spec},
        },
    }


def test_a_json_manifest_stays_json() -> None:
    # Before: keys and strings were added unquoted ({name: dshm, ...}), and a limit written as a
    # JSON number became `"memory": 3Gi`: kubectl reads a file starting with "{" as JSON and
    # refused it.
    kv = pytest.importorskip("kubernetes_validate")
    shm = {"name": "shm", "mountPath": "/dev/shm"}
    cases = [
        _deployment_json({"resources": {"limits": {"memory": 1073741824}}}),
        _deployment_json({}),
        _deployment_json(
            {"volumeMounts": [shm]}, volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}}]
        ),
    ]
    p = _proposal("train", "trainer", 256 * MiB, 3072 * MiB)
    for obj in cases:
        for text in (json.dumps(obj, indent=2) + "\n", json.dumps(obj)):
            r = apply_proposals(text.encode(), "train.json", [p])
            assert len(r.applied) == 2 and r.not_applied == () and r.left == ()
            new = json.loads(r.data)
            kv.validate(new, "1.30", strict=True)
            c = new["spec"]["template"]["spec"]["containers"][0]
            assert c["resources"]["limits"]["memory"] == "3Gi"
            (vol,) = new["spec"]["template"]["spec"]["volumes"]
            assert vol["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Mi"}
            assert apply_proposals(r.data, "train.json", [p]).data == r.data


#: What ``helm template`` renders from empty values (``resources: {{ toYaml .Values.x }}``
#: with x unset, a ``volumes:`` whose range made nothing).
HELM_NULLS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: train
  namespace: a
spec:
  selector:
    matchLabels: {app: train}
  template:
    metadata:
      labels: {app: train}
    spec:
      containers:
        - name: trainer
          image: pytorch/pytorch
          RESOURCES
          volumeMounts:
      volumes:   # from .Values.volumes
"""


def test_keys_helm_left_null_are_filled() -> None:
    # Before: `resources:`, `volumeMounts:` and `volumes:` with no value (or ~, null) were not
    # applied, "the text there cannot be edited exactly: an anchor, an alias, a template
    # placeholder or a block scalar", which none of them is.
    kv = pytest.importorskip("kubernetes_validate")
    p = _proposal("train", "trainer", 96 * MiB, 2048 * MiB)
    for resources in ("resources:", "resources: ~  # none", "resources:\n            limits:"):
        text = HELM_NULLS.replace("RESOURCES", resources)
        for data in (text, text.replace("\n", "\r\n")):
            r = apply_proposals(data.encode(), "helm.yaml", [p])
            assert len(r.applied) == 2 and r.not_applied == () and r.left == ()
            (obj,) = yaml.safe_load_all(r.data)
            kv.validate(obj, "1.30", strict=True)
            spec = obj["spec"]["template"]["spec"]
            assert spec["volumes"] == [
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "96Mi"}}
            ]
            (c,) = spec["containers"]
            assert c["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
            assert c["resources"] == {"limits": {"memory": "2Gi"}}
            assert b"volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 96Mi}}]   #" in (
                r.data
            )
            assert r.data.count(b"\r\n") == (r.data.count(b"\n") if "\r" in data else 0)
            assert apply_proposals(r.data, "helm.yaml", [p]).data == r.data


def test_a_file_named_twice_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: `--manifests k8s --manifests k8s/train.yaml` reported each change twice, and
    # --diff printed two diffs of the file (patch applies the first, then fails on the second).
    k8s = tmp_path / "k8s"
    (k8s / "base").mkdir(parents=True)
    (k8s / "train.yaml").write_text(NO_FINAL_NEWLINE)
    (k8s / "web.yaml").write_text("kind: Service\n")
    (k8s / "base" / "train.yaml").symlink_to("../train.yaml")
    monkeypatch.chdir(tmp_path)
    files = manifest_files(["k8s", "k8s/train.yaml", "./k8s/web.yaml", "k8s/base"])
    assert files == ["k8s/train.yaml", "k8s/web.yaml"]


#: A serving container as vLLM and SGLang examples write it: its script last, a block scalar.
SCRIPT_LAST = NO_FINAL_NEWLINE.replace("- name: trainer", "- name: trainer  # the job") + (
    "\n        command:\n        - bash\n        - -c\n        - |\n          python train.py\n\n"
)


def test_a_container_ending_in_a_script_takes_its_entries_after_its_name() -> None:
    # Before: "not applied: ... a block scalar" for both the mount and the memory limit (7 of
    # the 284 corpus files that hold a workload): the script's end cannot be placed exactly.
    kv = pytest.importorskip("kubernetes_validate")
    p = _proposal("train", "trainer", 96 * MiB, 2048 * MiB)
    r = apply_proposals(SCRIPT_LAST.encode(), "x.yaml", [p])
    assert len(r.applied) == 2 and r.not_applied == () and r.left == ()
    (obj,) = yaml.safe_load_all(r.data)
    kv.validate(obj, "1.30", strict=True)
    # the pod's volumes go before its containers, the container's keys after its name
    text = r.data.decode()
    assert "    spec:\n      volumes:\n      - name: dshm\n" in text
    assert "      - name: trainer  # the job\n        resources:\n" in text
    assert text.endswith(SCRIPT_LAST.split("        image: ")[1])  # the rest as it was
    (c,) = obj["spec"]["template"]["spec"]["containers"]
    assert c["command"][2] == "python train.py\n"  # the script as it was
    assert c["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert c["resources"] == {"limits": {"memory": "2Gi"}}
    assert apply_proposals(r.data, "x.yaml", [p]).data == r.data


#: recommend's --manifests step (the CLI's own) on the recorded rows, run in a private mount
#: namespace where the manifests' directory is a read-only bind mount.
_READ_ONLY_RUN = """\
import sys
sys.path.insert(0, {monitor!r})
from rightsize_rows import recorded_report
from shmguard.cli.recommend import _manifests
from shmguard.config import Config
MiB = 1 << 20
edited = _manifests(recorded_report(train={{"peak": 60 * MiB, "size": 256 * MiB}}), [{path!r}],
    "fix", Config())
sys.stdout.write(edited.text)
sys.exit(edited.errors)
"""


def test_a_manifest_that_cannot_be_written_says_what_was_not_changed(
    root_only: None, tmp_path: Path
) -> None:
    # Before: the file was left out of the report, so the workload it holds was listed as
    # "no manifest for ml/Deployment/train trainer: no Deployment 'train' ... in --manifests".
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1)")
    k8s = tmp_path / "k8s"
    k8s.mkdir()
    text = NO_FINAL_NEWLINE.replace("namespace: a", "namespace: ml") + "\n"
    (k8s / "train.yaml").write_text(text)
    code = _READ_ONLY_RUN.format(monitor=str(Path(__file__).parent), path=str(k8s / "train.yaml"))
    script = f'mount --bind "{k8s}" "{k8s}" && mount -o remount,bind,ro "{k8s}" && exec "$@"'
    r = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr  # one file not written
    assert r.stderr.endswith(f"--manifests {k8s}/train.yaml: cannot write: Read-only file system\n")
    lines = r.stdout.splitlines()
    ours = [x for x in lines if "ml/Deployment/train" in x]
    assert ours == [
        f"not changed {k8s}/train.yaml: ml/Deployment/train container 'trainer': {change} "
        "(not applied: cannot write the file: Read-only file system)"
        for change in (
            "no /dev/shm -> a memory-backed emptyDir of 80Mi at /dev/shm",
            "memory limit none -> 1280Mi",
        )
    ]
    assert (k8s / "train.yaml").read_text() == text
    assert sorted(p.name for p in k8s.iterdir()) == ["train.yaml"]


def test_a_node_mode_row_for_a_volume_this_file_has_on_disk_says_so() -> None:
    # Before: nothing was set and the report said "FILE: already as proposed for ..."; the
    # volume was named twice in the messages of node-mode rows ("train (cache) (cache)").
    text = HELM_NULLS.replace("RESOURCES", "").replace(
        "      volumes:   # from .Values.volumes\n",
        "      volumes:\n      - name: cache\n        emptyDir: {}\n",
    )
    size = (Change(Setting.SHM_SIZE, 256 * MiB, ("kubernetes",)),)
    p = Proposal("a", "Deployment", "train", "", "cache", size, "a/Deployment/train (cache)")
    r = apply_proposals(text.encode(), "x.yaml", [p])
    assert r.data == text.encode() and r.matched == (p,) and r.applied == ()
    assert r.not_applied == (
        "a/Deployment/train (cache): volume 'cache' is not a memory-backed emptyDir in "
        "this file: give it medium: Memory and a sizeLimit of 256Mi by hand",
    )
    lines = manifest_lines([r], [p], {}, "show")
    assert not any("already as proposed" in line for line in lines)
