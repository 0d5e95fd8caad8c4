"""The cyclic garbage collector paused while loading and checking, and a loaded file's graph
free of reference cycles (so reference counting alone frees it)."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest

from shmguard.lint.check import check_loaded, units
from shmguard.sources import gcpause
from shmguard.sources.load import load_bytes

COMPOSE = b"""\
x-common: &common
  image: pytorch/pytorch:2.3.0
  ipc: private
services:
  base:
    <<: *common
    mem_limit: 4g
  trainer:
    extends: base
    command: torchrun train.py
    ipc: service:base
"""

K8S = b"""\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: job}
spec:
  pytorchReplicaSpecs:
    Worker:
      template:
        spec:
          containers:
          - name: w
            image: nvcr.io/nvidia/pytorch:24.01
            resources: {limits: {memory: 8Gi, nvidia.com/gpu: 1}}
          volumes:
          - name: dshm
            emptyDir: {medium: Memory}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: p}
  spec:
    containers: [{name: c, image: vllm/vllm-openai, command: [vllm, serve]}]
"""


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def _garbage_cycles(data: bytes, name: str) -> list[object]:
    """What a load and check of ``data`` leaves that only the cyclic collector could free."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        lf = load_bytes(data, name)
        result = check_loaded(lf)
        assert result.findings  # the rules ran over the views and made findings
        for u in units(lf):
            if u.service is not None:
                assert u.service in u.service.file.services
        del lf, result, u
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


@pytest.mark.parametrize(("data", "name"), [(COMPOSE, "compose.yaml"), (K8S, "job.yaml")])
def test_load_and_check_leave_no_reference_cycle(data: bytes, name: str) -> None:
    assert _garbage_cycles(data, name) == []


def test_nodes_freed_by_reference_counting_alone(collector_on: None) -> None:
    gc.disable()
    try:
        lf = load_bytes(K8S, "job.yaml")
        check_loaded(lf)
        assert lf.yaml is not None and lf.yaml.documents[0].root is not None
        pod = lf.pod_specs[0]
        assert pod.path == "spec.pytorchReplicaSpecs.Worker.template.spec"
        ref = weakref.ref(lf.yaml.documents[0].root.node)
        assert ref() is not None
        del lf, pod
        assert ref() is None  # no collection ran: no cycle kept the graph
    finally:
        gc.enable()


def test_service_file_is_the_one_holding_it_and_survives_its_file() -> None:
    lf = load_bytes(COMPOSE, "compose.yaml")
    (cf,) = lf.compose
    base, trainer = cf.services
    assert trainer.file is cf and trainer in cf.services and cf.services[1] is trainer
    svcs = [u.service for u in units(lf)]
    del lf, cf, base, trainer
    gc.collect()
    # the file is gone; the service gets a new one in which it is still a service
    trainer = svcs[1]
    assert trainer is not None
    del svcs
    gc.collect()
    again = trainer.file
    assert trainer.file is again
    assert [s.name for s in again.services] == ["base", "trainer"]
    assert again.services[1] is trainer and again.services[0] is not trainer
    assert trainer.get("image") is not None and trainer.get("mem_limit") is not None


def test_pause_restores_the_collector_state(collector_on: None) -> None:
    gcpause.pause()
    gcpause.pause()
    assert not gc.isenabled()
    gcpause.resume()
    assert not gc.isenabled()  # one pause still runs
    gcpause.resume()
    assert gc.isenabled()
    load_bytes(K8S, "job.yaml")
    assert gc.isenabled()
    gc.disable()  # the application's choice stays
    check_loaded(load_bytes(COMPOSE, "compose.yaml"))
    assert not gc.isenabled()


def test_pause_restores_after_an_exception(collector_on: None) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        gcpause.pause()
        try:
            raise Boom
        finally:
            gcpause.resume()
    assert gc.isenabled()


def test_overlapping_pauses_let_the_collector_run(collector_on: None) -> None:
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections.append(info["generation"])

    gcpause.pause()  # a pause that never ends while the others run
    gc.callbacks.append(count)
    try:
        for _ in range(gcpause.MAX_DEFERRED * 2):
            gcpause.pause()
            gcpause.resume()
        assert collections.count(2) == 2  # one full collection every MAX_DEFERRED ends
        assert not gc.isenabled()
    finally:
        gc.callbacks.remove(count)
        gcpause.resume()
    assert gc.isenabled()


def test_threads_loading_at_once_leave_the_collector_enabled(collector_on: None) -> None:
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(30):
                check_loaded(load_bytes(K8S, "job.yaml"))
                check_loaded(load_bytes(COMPOSE, "compose.yaml"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert gc.isenabled()
