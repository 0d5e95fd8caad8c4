"""The one Kubernetes /dev/shm fix plan (shmguard.fix.k8s): which volume, which containers,
memory limits and requests; and the plan's emitters (JSONPatch, strategic merge patch) on the
pods both pod models describe."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from shmguard.fix.k8s import (
    ADD,
    LEGACY_VOLUME_NAMES,
    RESIZE,
    REUSE,
    VOLUME_NAME,
    ContainerView,
    MountView,
    PodView,
    VolumeView,
    json_patch,
    mount_entry,
    plan_pod,
    pod_view,
    raised_request,
    strategic_merge_patch,
)
from shmguard.fleet.pods import json_pod_view
from shmguard.sources.load import load_bytes
from shmguard.units import GiB, MiB

SHM = MiB * 1024


def train(**kw: Any) -> ContainerView:
    return ContainerView(0, "train", **kw)


def plus_one(limit: int) -> int:
    return limit + GiB


def test_a_pod_without_a_memory_volume_gets_dshm() -> None:
    c = train()
    plan = plan_pod(PodView((c,)), [c], SHM)
    assert (plan.volume, plan.action, plan.size) == (VOLUME_NAME, ADD, SHM)
    assert [(f.container.name, f.mount, f.memory_limit) for f in plan.containers] == [
        ("train", True, None)
    ]
    assert VOLUME_NAME == "dshm" and "shmguard-dshm" in LEGACY_VOLUME_NAMES


def test_the_memory_volume_another_container_mounts_at_dev_shm_is_reused() -> None:
    side = ContainerView(1, "side", mounts=(MountView("shm", "/dev/shm/"),))
    c = train()
    vols = (VolumeView("cache", memory=True), VolumeView("shm", True, SHM, True))
    side_cache = ContainerView(2, "c", mounts=(MountView("cache", "/cache"),))
    plan = plan_pod(PodView((c, side, side_cache), volumes=vols), [c, side], SHM)
    assert (plan.volume, plan.action) == ("shm", REUSE)
    # the container that already has /dev/shm gets nothing
    assert [f.container.name for f in plan.containers] == ["train"]
    assert not plan.writes_volume


def test_an_init_containers_dev_shm_or_an_unmounted_memory_volume_is_reused() -> None:
    init = ContainerView(0, "warm", init=True, mounts=(MountView("w", "/dev/shm"),))
    c = train()
    pod = PodView((c,), (init,), (VolumeView("spare", True), VolumeView("w", True)))
    assert plan_pod(pod, [c], SHM).volume == "w"
    pod = PodView((c,), (), (VolumeView("disk"), VolumeView("spare", True, SHM, True)))
    assert (plan_pod(pod, [c], SHM).volume, plan_pod(pod, [c], SHM).action) == ("spare", REUSE)


def test_a_reused_volume_keeps_its_size_limit_and_one_without_gets_the_size() -> None:
    # issue 19: the plan says the size the pod really gets. A reused volume's sizeLimit stays
    # (never resized silently): the plan's size is it, and the decided size is not_applied.
    c = train()
    kept = PodView((c,), (), (VolumeView("shm0", True, 512 * MiB, True),))
    plan = plan_pod(kept, [c], 2 * GiB)
    assert (plan.action, plan.size, plan.not_applied) == (REUSE, 512 * MiB, 2 * GiB)
    assert not plan.writes_volume and json_patch(plan, kept) == [
        {"op": "add", "path": "/spec/containers/0/volumeMounts", "value": [mount_entry("shm0")]}
    ]
    same = plan_pod(kept, [c], 512 * MiB)
    assert (same.action, same.size, same.not_applied) == (REUSE, 512 * MiB, None)
    # an unreadable sizeLimit is the user's too: kept, size unknown
    odd = PodView((c,), (), (VolumeView("shm0", True, None, True),))
    assert (plan_pod(odd, [c], SHM).action, plan_pod(odd, [c], SHM).size) == (REUSE, None)
    # no sizeLimit: the plan bounds it at the decided size (what SHM008 asks)
    bare = PodView((c,), (), (VolumeView("disk"), VolumeView("scratch", True)))
    plan = plan_pod(bare, [c], 2 * GiB)
    assert (plan.volume, plan.action, plan.size) == ("scratch", RESIZE, 2 * GiB)
    assert json_patch(plan, bare) == [
        {"op": "add", "path": "/spec/volumes/1/emptyDir/sizeLimit", "value": "2Gi"},
        {"op": "add", "path": "/spec/containers/0/volumeMounts", "value": [mount_entry("scratch")]},
    ]


def test_a_taken_name_gives_the_next_free_one() -> None:
    c = train(mounts=(MountView("dshm", "/data"),))
    vols = (VolumeView("dshm"), VolumeView("dshm-1", memory=True), VolumeView("x"))
    # a memory emptyDir no container mounts is reused, whatever its name
    assert plan_pod(PodView((c,), volumes=vols), [c], SHM).volume == "dshm-1"
    vols = (VolumeView("dshm"), VolumeView("dshm-1"))
    plan = plan_pod(PodView((c,), volumes=vols), [c], SHM)
    assert (plan.volume, plan.action) == ("dshm-2", ADD)


def test_requests_equal_to_limits_rise_together() -> None:
    c = train(memory_limit=4 * GiB, memory_request=4 * GiB)
    (f,) = plan_pod(PodView((c,)), [c], SHM, plus_one).containers
    assert (f.memory_limit, f.memory_request) == (5 * GiB, 5 * GiB)


def test_a_request_below_the_limit_stays() -> None:
    c = train(memory_limit=4 * GiB, memory_request=2 * GiB)
    (f,) = plan_pod(PodView((c,)), [c], SHM, plus_one).containers
    assert (f.memory_limit, f.memory_request) == (5 * GiB, None)


def test_no_limit_no_raise_and_no_raise_unless_asked() -> None:
    c = train(memory_request=2 * GiB)
    (f,) = plan_pod(PodView((c,)), [c], SHM, plus_one).containers
    assert (f.memory_limit, f.memory_request) == (None, None)
    g = train(memory_limit=4 * GiB, memory_request=4 * GiB)
    (f,) = plan_pod(PodView((g,)), [g], SHM).containers
    assert (f.memory_limit, f.memory_request) == (None, None)
    # a raise that changes nothing leaves both
    (f,) = plan_pod(PodView((g,)), [g], SHM, lambda n: n).containers
    assert (f.memory_limit, f.memory_request) == (None, None)
    assert raised_request(4 * GiB, None, 5 * GiB) is None  # unset: defaulted to the limit


def test_changes_carry_the_size_and_the_largest_new_limit() -> None:
    a = train(memory_limit=4 * GiB, memory_request=4 * GiB)
    b = ContainerView(1, "b", memory_limit=8 * GiB)
    plan = plan_pod(PodView((a, b)), [a, b], SHM, plus_one)
    assert [(c.setting.value, c.value, c.runtimes) for c in plan.changes()] == [
        ("shm-size", SHM, ("kubernetes",)),
        ("memory-limit", 9 * GiB, ("kubernetes",)),
    ]


POD_YAML = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
    - name: warm
      image: busybox
  containers:
    - name: train
      image: pytorch/pytorch
      resources:
        limits: {memory: 4Gi, cpu: "2"}
        requests: {memory: 4096Mi, cpu: "2"}
      volumeMounts:
        - {name: data, mountPath: /data}
    - name: web
      image: nginx
  volumes:
    - name: data
      emptyDir: {}
"""


def test_both_pod_models_give_the_same_view() -> None:
    import yaml

    (pod,) = load_bytes(POD_YAML.encode(), "p.yaml").pod_specs
    from_yaml = pod_view(pod)
    from_json = json_pod_view(yaml.safe_load(POD_YAML)["spec"])
    assert from_yaml == from_json
    assert from_yaml.containers[0].memory_request == 4 * GiB == from_yaml.containers[0].memory_limit


def test_the_json_patch_and_the_strategic_merge_patch_write_the_same_pod() -> None:
    import yaml

    obj = yaml.safe_load(POD_YAML)
    view = json_pod_view(obj["spec"])
    plan = plan_pod(view, [view.containers[0]], 2 * GiB, plus_one)
    ops = json_patch(plan, view)
    assert all(op["op"] == "add" for op in ops)
    out = jsonpatch.apply_patch(copy.deepcopy(obj), ops)
    train_out = out["spec"]["containers"][0]
    assert train_out["resources"]["limits"]["memory"] == "5Gi"
    assert train_out["resources"]["requests"]["memory"] == "5Gi"
    assert train_out["volumeMounts"][-1] == {"name": "dshm", "mountPath": "/dev/shm"}
    assert out["spec"]["volumes"][-1] == {
        "name": "dshm",
        "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"},
    }
    smp = strategic_merge_patch("Pod", plan)
    assert smp == {
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                    "resources": {"limits": {"memory": "5Gi"}, "requests": {"memory": "5Gi"}},
                }
            ],
            "volumes": [out["spec"]["volumes"][-1]],
        }
    }


def test_a_resize_plan_is_no_json_patch() -> None:
    from shmguard.fix.k8s import named_plan

    with pytest.raises(ValueError, match="resize"):
        json_patch(named_plan(SHM, {"a": None}, "cache"), PodView(()))
