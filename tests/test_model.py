"""Exit status rule, JSON envelope and the snippet renderer."""

from __future__ import annotations

import json

import pytest
import yaml

from shmguard import __version__
from shmguard.fix.snippets import RUNTIMES, render_snippets
from shmguard.model import Fact, FailOn, Finding, Location, Severity, exit_status, shm_changes
from shmguard.render.json import dumps, envelope
from shmguard.units import GiB, MiB, k8s_quantity_bytes, parse_docker_size


def _finding(sev: Severity) -> Finding:
    return Finding("ENV001", "x", sev, "m")


@pytest.mark.parametrize(
    ("severities", "fail_on", "expected"),
    [
        ([], FailOn.INFO, 0),
        ([Severity.WARNING], FailOn.ERROR, 0),
        ([Severity.WARNING], FailOn.WARNING, 1),
        ([Severity.INFO], FailOn.WARNING, 0),
        ([Severity.INFO], FailOn.INFO, 1),
        ([Severity.ERROR], FailOn.NEVER, 0),
        ([Severity.INFO, Severity.ERROR], FailOn.ERROR, 1),
    ],
)
def test_exit_status(severities: list[Severity], fail_on: FailOn, expected: int) -> None:
    assert exit_status([_finding(s) for s in severities], fail_on) == expected


def test_envelope_shapes_facts_and_findings() -> None:
    body = {
        "total": Fact.known(64 * MiB),
        "memory_limit": Fact[int].unknown("/sys/fs/cgroup/memory.max: no such file"),
        "findings": [_finding(Severity.ERROR)],
        "where": Location(file="/dev/shm"),
    }
    data = json.loads(dumps("doctor", body))
    assert data["schema"] == "shmguard.doctor/1"
    assert data["version"] == __version__
    assert data["total"] == 67108864
    assert data["memory_limit"] == {
        "value": None,
        "reason": "/sys/fs/cgroup/memory.max: no such file",
    }
    assert data["findings"][0]["severity"] == "error"
    assert data["where"] == {
        "file": "/dev/shm",
        "line": None,
        "column": None,
        "end_line": None,
        "end_column": None,
        "start": None,
        "end": None,
        "path": None,
    }
    assert envelope("x", {})["schema"] == "shmguard.x/1"


def test_snippets_all_runtimes_exact_syntax() -> None:
    snippets = {s.runtime: s for s in render_snippets(shm_changes(2 * GiB, 6 * GiB))}
    assert tuple(snippets) == RUNTIMES
    assert snippets["docker"].text == "docker run --shm-size=2g --memory=6g IMAGE ..."
    assert snippets["podman"].text == "podman run --shm-size=2g --memory=6g IMAGE ..."

    compose = yaml.safe_load(snippets["compose"].text)
    service = compose["services"]["app"]
    assert parse_docker_size(service["shm_size"]) == 2 * GiB
    assert parse_docker_size(service["mem_limit"]) == 6 * GiB

    pod = yaml.safe_load(snippets["kubernetes"].text)["spec"]
    volume = pod["volumes"][0]
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "2Gi"}
    container = pod["containers"][0]
    assert container["volumeMounts"] == [{"name": volume["name"], "mountPath": "/dev/shm"}]
    assert k8s_quantity_bytes(container["resources"]["limits"]["memory"]) == 6 * GiB

    ecs = json.loads(snippets["ecs"].text)
    assert ecs == {"memory": 6144, "linuxParameters": {"sharedMemorySize": 2048}}


@pytest.mark.parametrize(
    ("millis", "cpus", "k8s", "ecs_units"),
    [(1500, "1.5", "1500m", 1536), (2000, "2", "2", 2048), (250, "0.25", "250m", 256)],
)
def test_snippets_with_a_cpu_limit(millis: int, cpus: str, k8s: str, ecs_units: int) -> None:
    # tune sizes workers for a CPU budget; its snippets dropped the CPUs (a new user's report)
    snippets = {
        s.runtime: s for s in render_snippets(shm_changes(80 * MiB, GiB, cpu_millis=millis))
    }
    assert (
        snippets["docker"].text == f"docker run --shm-size=80m --memory=1g --cpus={cpus} IMAGE ..."
    )
    assert snippets["podman"].text.endswith(f"--cpus={cpus} IMAGE ...")
    assert str(yaml.safe_load(snippets["compose"].text)["services"]["app"]["cpus"]) == cpus
    limits = yaml.safe_load(snippets["kubernetes"].text)["spec"]["containers"][0]["resources"]
    assert limits["limits"]["cpu"] == k8s and k8s_quantity_bytes(limits["limits"]["memory"]) == GiB
    assert json.loads(snippets["ecs"].text)["cpu"] == ecs_units
    with pytest.raises(ValueError, match="int millicpus"):
        shm_changes(GiB, cpu_millis=1.5)  # type: ignore[arg-type]


def test_snippets_without_memory_and_subset() -> None:
    (k8s,) = render_snippets(shm_changes(1536 * MiB), ["kubernetes"])
    pod = yaml.safe_load(k8s.text)["spec"]
    assert "resources" not in pod["containers"][0]
    assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == "1536Mi"


def test_snippets_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown runtime 'nomad'"):
        render_snippets(shm_changes(GiB), runtimes=["nomad"])
    with pytest.raises(ValueError, match="must be > 0"):
        shm_changes(0)


def test_change_validates_its_values() -> None:
    from shmguard.model import Change, Setting

    assert Change("memory-limit", GiB).setting is Setting.MEMORY_LIMIT  # type: ignore[arg-type]
    assert Change(Setting.SHM_SIZE, GiB, ("docker", "docker")).runtimes == ("docker",)
    for bad, message in [
        ((Setting.SHM_SIZE, True), "int bytes"),
        ((Setting.SHM_SIZE, 1.5 * GiB), "int bytes"),
        (("shm", GiB), "unknown setting"),
        ((Setting.SHM_SIZE, 0), "> 0"),
        ((Setting.SHM_SIZE, GiB, "docker"), "tuple of names"),
    ]:
        with pytest.raises(ValueError, match=message):
            Change(*bad)  # type: ignore[arg-type]


def test_a_change_for_every_runtime_is_rendered_for_every_runtime() -> None:
    from shmguard.model import Change, Setting

    changes = [Change(Setting.SHM_SIZE, GiB), Change(Setting.MEMORY_LIMIT, 4 * GiB, ("docker",))]
    snippets = {s.runtime: s.text for s in render_snippets(changes)}
    assert tuple(snippets) == RUNTIMES
    assert snippets["docker"] == "docker run --shm-size=1g --memory=4g IMAGE ..."
    assert snippets["podman"] == "podman run --shm-size=1g IMAGE ..."
