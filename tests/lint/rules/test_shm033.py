"""SHM033 `policy-shrinks-dev-shm`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs), on the Kyverno library's real policy
(tests/fixtures/policies/SOURCES.tsv)."""

from __future__ import annotations

from pathlib import Path

from _rule_helpers import found

from shmguard.lint.check import fix_file

POLICY = Path(__file__).parents[2] / "fixtures" / "policies" / "add-emptydir-sizelimit.yaml"

TRAINING = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: train
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: train
          image: nvcr.io/nvidia/pytorch:24.01-py3
          command: [torchrun, --nproc-per-node, "8", train.py]
          resources: {limits: {memory: 64Gi, nvidia.com/gpu: 8}}
          volumeMounts: [{name: dshm, mountPath: /dev/shm}]
      volumes:
        - name: dshm
          emptyDir: {medium: Memory}
"""

GATEKEEPER = """\
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sEmptyDirHasSizeLimit
metadata:
  name: empty-dir-has-size-limit
spec:
  match:
    kinds:
      - apiGroups: [""]
        kinds: ["Pod"]
  parameters:
    maxSizeLimit: "100Mi"
"""


def test_the_kyverno_library_policy_and_its_fix() -> None:
    text = POLICY.read_text()
    got = found(text, "policy.yaml", "SHM033")
    assert [g[:4] for g in got] == [("warning", 20, 11, "unsafe")]
    assert "100Mi (100 MiB)" in got[0][4] and "below the 1 GiB /dev/shm size" in got[0][4]
    r = fix_file(text.encode(), "policy.yaml", unsafe=True)
    assert r.data.decode() == text.replace(
        "            value: ''\n",
        "            value: ''\n"
        "          - key: \"{{element.emptyDir.medium || ''}}\"\n"
        "            operator: NotEquals\n"
        "            value: Memory\n",
    )
    assert found(r.data.decode(), "policy.yaml", "SHM033") == []
    assert fix_file(r.data, "policy.yaml", unsafe=True).applied == ()  # idempotent
    assert fix_file(text.encode(), "policy.yaml").applied == ()  # unsafe: not by default


def test_the_workloads_of_the_same_stream_are_named() -> None:
    stream = POLICY.read_text() + "\n---\n" + TRAINING
    (got,) = found(stream, "rendered.yaml", "SHM033")
    assert got[4].endswith("; in this file it would shrink Job train")


def test_gatekeeper_max_size_limit_below_the_dev_shm_size() -> None:
    got = found(GATEKEEPER + "---\n" + TRAINING, "gk.yaml", "SHM033")
    assert [g[:4] for g in got] == [("warning", 11, 19, "unsafe")]
    assert "Job train" in got[0][4]
    fixed = fix_file(GATEKEEPER.encode(), "gk.yaml", unsafe=True).data.decode()
    assert fixed == GATEKEEPER.replace('"100Mi"', '"1Gi"')
    exempt = GATEKEEPER + '    exemptVolumesRegex: ["^dshm$"]\n'
    assert found(exempt, "gk.yaml", "SHM033") == []
    assert found(GATEKEEPER.replace("100Mi", "8Gi"), "gk.yaml", "SHM033") == []
