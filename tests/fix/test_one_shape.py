"""Every writer of the /dev/shm fix writes the fix plan's shapes: the Kubernetes volume and
mount (check --fix, the webhook's JSONPatch, the Kyverno mutate, the snippet, recommend's
strategic merge patch) and the docker/Compose text of one Change (the --fix edit and the
snippet)."""

from __future__ import annotations

from typing import Any

import yaml

from shmguard.estimate.policy import Policy
from shmguard.fix.k8s import VOLUME_NAME, mount_entry, named_plan, strategic_merge_patch
from shmguard.fix.runtime import compose_entry, run_flag
from shmguard.fix.snippets import render_snippets
from shmguard.fleet.policy import Mode, kyverno
from shmguard.lint.check import CheckOptions, fix_file
from shmguard.model.fix import Change, Setting
from shmguard.units import GiB, MiB

SIZE = 2 * GiB
VOLUME = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}
MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}


def _snippet(runtime: str, *changes: Change) -> str:
    (s,) = render_snippets(changes, (runtime,))
    return s.text


def test_every_kubernetes_writer_writes_one_volume_and_mount() -> None:
    assert VOLUME_NAME == "dshm" and mount_entry(VOLUME_NAME) == MOUNT
    # the snippet
    snippet: dict[str, Any] = yaml.safe_load(_snippet("kubernetes", Change(Setting.SHM_SIZE, SIZE)))
    assert snippet["spec"]["volumes"] == [VOLUME]
    assert snippet["spec"]["containers"][0]["volumeMounts"] == [MOUNT]
    # the Kyverno mutate
    (doc,) = kyverno(Mode.WARN, Policy(default_shm_size=SIZE))
    (mutate,) = [r for r in doc["spec"]["rules"] if "mutate" in r]
    patch = mutate["mutate"]["foreach"][0]["patchStrategicMerge"]["spec"]
    assert patch["volumes"] == [VOLUME]
    assert patch["containers"][0]["volumeMounts"] == [MOUNT]
    # recommend --patches
    smp = strategic_merge_patch("Pod", named_plan(SIZE, {"train": None}))
    assert smp == {
        "spec": {"containers": [{"name": "train", "volumeMounts": [MOUNT]}], "volumes": [VOLUME]}
    }
    # check --fix
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "    - name: train\n      image: pytorch/pytorch\n      command: [torchrun, t.py]\n"
    )
    fixed = yaml.safe_load(fix_file(pod.encode(), "p.yaml", CheckOptions(shm_size=SIZE)).data)
    assert fixed["spec"]["volumes"] == [VOLUME]
    assert fixed["spec"]["containers"][0]["volumeMounts"] == [MOUNT]


def test_the_fix_edit_writes_the_snippets_text() -> None:
    shm = Change(Setting.SHM_SIZE, 1536 * MiB)
    compose = "services:\n  train:\n    image: pytorch/pytorch\n    command: torchrun t.py\n"
    fixed = fix_file(compose.encode(), "compose.yaml", CheckOptions(shm_size=shm.value)).data
    assert compose_entry(shm) == 'shm_size: "1536m"'
    assert f"    {compose_entry(shm)}\n" in fixed.decode()
    assert f"    {compose_entry(shm)}" in _snippet("compose", shm).splitlines()
    script = "docker run pytorch/pytorch torchrun t.py\n"
    fixed = fix_file(script.encode(), "run.sh", CheckOptions(shm_size=shm.value)).data
    assert fixed.decode() == f"docker run {run_flag(shm)} pytorch/pytorch torchrun t.py\n"
    assert _snippet("docker", shm).startswith(f"docker run {run_flag(shm)} ")
    mem, cpu = Change(Setting.MEMORY_LIMIT, 3 * GiB), Change(Setting.CPU_LIMIT, 1500)
    assert (run_flag(mem), run_flag(cpu)) == ("--memory=3g", "--cpus=1.5")
    assert (compose_entry(mem), compose_entry(cpu)) == ('mem_limit: "3g"', "cpus: 1.5")
    assert (
        _snippet("podman", shm, mem, cpu)
        == "podman run --shm-size=1536m --memory=3g --cpus=1.5 IMAGE ..."
    )
