"""ENV rules over fixture hosts: each scenario's findings, messages, severities and fixes."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from shmguard.inspect.host import inspect_host
from shmguard.inspect.shm import statvfs_from_json
from shmguard.lint.doctor import DoctorOptions, diagnose
from shmguard.lint.env import RULES
from shmguard.model import Fact, Severity
from shmguard.model.host import RuntimeFacts
from shmguard.render.snippets import fix_snippets
from shmguard.units import GiB, format_iec

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules-env.md"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "scenario.json").is_file())


def codes(report):
    return [f.code for f in report.findings]


def test_registry_codes_and_names_are_unique_and_well_formed():
    assert [r.code for r in RULES] == [f"ENV{i:03d}" for i in range(1, len(RULES) + 1)]
    assert len({r.name for r in RULES}) == len(RULES)
    for rule in RULES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
        assert rule.summary and rule.check.__doc__


def test_every_rule_has_a_documented_section():
    text = DOCS.read_text()
    for rule in RULES:
        m = re.search(rf"^## {rule.code} `{rule.name}`\n(.*?)(?=^## |\Z)", text, re.M | re.S)
        assert m, f"docs/rules-env.md has no section for {rule.code} {rule.name}"
        body = m.group(1)
        for heading in ("What it detects", "Why is this bad?", "Example", "Fix"):
            assert f"### {heading}" in body, f"{rule.code}: missing '{heading}'"
        assert f"default severity: {rule.severity.value}" in body.lower()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_fixture_host_gets_exactly_its_findings(scenario, host):
    expected = json.loads((FIXTURES / scenario / "scenario.json").read_text())["expect"]
    report = diagnose(host(scenario))
    assert sorted(codes(report)) == sorted(expected)


def test_env001_message_and_fix_for_docker(host):
    (f,) = diagnose(host("docker-v2-default")).findings
    assert (f.code, f.name, f.severity) == ("ENV001", "runtime-default-shm-size", Severity.WARNING)
    assert f.message == (
        "/dev/shm is 64 MiB (67108864 bytes): the size equals the default of docker, containerd, "
        "cri-o"
    )
    assert f.location is not None and f.location.file == "/dev/shm"
    assert f.fix is not None
    assert [s.runtime for s in fix_snippets(f.fix)] == ["docker", "compose", "ecs"]
    # 1 GiB default: the 8 GiB limit keeps the room the job had beside 64 MiB of shm (8 GiB -
    # 64 MiB) and gains 1 GiB: 9 GiB - 64 MiB, rounded up by the sizing policy to 9 GiB.
    assert fix_snippets(f.fix)[0].text == "docker run --shm-size=1g --memory=9g IMAGE ..."
    assert "raise the memory limit to 9 GiB" in f.fix.description
    assert "shmguard measure" in f.fix.description


def test_env001_podman_fix_is_podman_only(host):
    (f,) = diagnose(host("podman-v2-default")).findings
    assert "default of podman" in f.message and "65536000 bytes" in f.message
    assert f.fix is not None
    assert [(s.runtime, s.text) for s in fix_snippets(f.fix)] == [
        ("podman", "podman run --shm-size=1g IMAGE ...")
    ]


def test_env002_require_sizes_the_fix_from_used_plus_required(host):
    facts = host("k8s-v2-sized-full")
    report = diagnose(facts, DoctorOptions(require=GiB))
    assert codes(report) == ["ENV002", "ENV003"]  # errors first
    f = report.findings[0]
    assert f.severity is Severity.ERROR
    assert f.message == "/dev/shm has 102 MiB free, below the 1 GiB required (--require)"
    assert f.fix is not None
    assert f.fix.description.startswith(
        "Give /dev/shm what it holds now plus --require, with 25% headroom: 4 GiB"
    )
    (k8s,) = fix_snippets(f.fix)
    # (1946 MiB used + 1024 MiB required) x 1.25 headroom = 3712.5 MiB, rounded up to 4 GiB.
    assert "sizeLimit: 4Gi" in k8s.text
    # The room beside the 2 GiB /dev/shm (6 GiB) + 4 GiB = 10 GiB.
    assert "memory: 10Gi" in k8s.text
    assert diagnose(facts, DoctorOptions(require=100 << 20)).findings[0].code == "ENV003"
    # More than the machine's RAM can never be met: the message says so.
    ram = facts.memory.total.value
    assert ram is not None
    huge = diagnose(facts, DoctorOptions(require=ram + GiB)).findings[0]
    assert huge.message.endswith(
        f"required (--require); that is more than this machine's {format_iec(ram)} of RAM, "
        "which every tmpfs page comes out of"
    )


def test_env003_usage_names_the_percentage(host):
    (f,) = diagnose(host("k8s-v2-sized-full")).findings
    assert f.message == "/dev/shm is 95% full: ~1.9 GiB of 2 GiB"
    assert f.fix is not None and "sizeLimit: 4Gi" in fix_snippets(f.fix)[0].text
    assert diagnose(host("k8s-v2-sized-full"), DoctorOptions(usage_threshold=0.96)).findings == ()


def test_env004_env006_env010_on_v1_host_ipc(host):
    report = diagnose(host("docker-v1-ipc-host"))
    by_code = {f.code: f for f in report.findings}
    assert by_code["ENV004"].message == (
        "/dev/shm (~31.39 GiB) is larger than the memory limit (4 GiB)"
    )
    fix4 = by_code["ENV004"].fix
    assert fix4 is not None
    assert fix_snippets(fix4)[0].text == "docker run --shm-size=1g --memory=4g IMAGE ..."
    assert "--ipc=private" in fix4.description
    assert by_code["ENV006"].message == (
        "the open-file limit is 1024 (soft) / 1024 (hard); below 4096"
    )
    assert by_code["ENV006"].fix is not None
    assert by_code["ENV006"].fix.description == (
        "Raise it: docker run --ulimit nofile=65536:65536 (Compose: ulimits: nofile: 65536); "
        "or torch.multiprocessing.set_sharing_strategy('file_system')."
    )
    assert by_code["ENV010"].message.startswith("/dev/shm is a tmpfs mounted without size=")
    assert by_code["ENV010"].severity is Severity.WARNING


def test_env005_and_env007_on_kubernetes_unsized_emptydir(host):
    report = diagnose(host("k8s-v2-unsized-emptydir"))
    by_code = {f.code: f for f in report.findings}
    assert by_code["ENV005"].message == (
        "the memory limit (16 GiB) leaves 0 B beside a full /dev/shm (16 GiB); less than 1 GiB"
    )
    assert by_code["ENV007"].message == "the memory cgroup has recorded 2 OOM kills"
    (k8s,) = fix_snippets(by_code["ENV005"].fix)  # type: ignore[union-attr]
    assert "memory: 32Gi" in k8s.text and "sizeLimit: 16Gi" in k8s.text


def test_env008_and_env009(host):
    (missing,) = diagnose(host("docker-ipc-none")).findings
    assert (missing.code, missing.severity) == ("ENV008", Severity.ERROR)
    (disk,) = diagnose(host("slurm-disk-shm")).findings
    assert disk.message == "/dev/shm is on ext4 (/dev/nvme0n1p2 mounted there)"
    assert disk.fix is not None and "Slurm has no /dev/shm setting" in disk.fix.description
    # A disk directory is not shmem: no memory-limit findings despite its 1.8 TiB.
    assert [f.code for f in diagnose(host("slurm-disk-shm")).findings] == ["ENV009"]


def test_env010_is_info_on_a_bare_host(host):
    facts = host("docker-v1-ipc-host")
    bare = replace(facts, runtime=RuntimeFacts("none", ()))
    (f,) = [f for f in diagnose(bare).findings if f.code == "ENV010"]
    assert f.severity is Severity.INFO
    assert f.fix is not None and "mount -o remount,size=1024m /dev/shm" in f.fix.description
    assert [s.runtime for s in fix_snippets(f.fix)] == [
        "docker",
        "compose",
        "kubernetes",
        "podman",
        "ecs",
    ]


def test_env011_leftover_torch_files(fixture_root):
    root = fixture_root("docker-v2-default")
    shm = root / "dev" / "shm"
    with open(shm / "torch_77_123_0", "wb") as fh:
        fh.truncate(18874368)  # sparse: st_blocks 0, as a failed MapAllocator leaves it
    if os.stat(shm / "torch_77_123_0").st_blocks:
        pytest.skip("this filesystem does not keep truncated files sparse")
    (shm / "torch_77_123_1").write_bytes(b"x" * 4096)  # a live named file: not a leftover
    facts = inspect_host(root, statvfs=statvfs_from_json(root))
    report = diagnose(facts)
    assert codes(report) == ["ENV001", "ENV011"]
    f = report.findings[1]
    assert f.message == (
        "1 zero-block torch_* file in /dev/shm (e.g. torch_77_123_0; largest request 18 MiB): "
        "failed allocations"
    )
    assert f.fix is not None and f.fix.description.startswith("Remove them when no job runs")


def test_unknown_facts_produce_no_findings(host):
    facts = host("docker-v2-default")
    u: Fact[int] = Fact.unknown("unreadable")
    blind = replace(
        facts,
        shm=replace(facts.shm, total=u, used=u, free=u, default_of=Fact.unknown("x"),
                    fstype=Fact.unknown("x"), sizing=Fact.unknown("x")),
        cgroup=replace(facts.cgroup, memory_limit=u, oom_kills=u),
        limits=replace(facts.limits, nofile_soft=u),
    )  # fmt: skip
    assert diagnose(blind, DoctorOptions(require=GiB)).findings == ()


def test_env011_near_full_with_failed_allocations_is_an_error(fixture_root):
    # The case: a job hung with /dev/shm almost full and zero-block torch_* files.
    root = fixture_root("docker-v2-default")
    shm = root / "dev" / "shm"
    with open(shm / "torch_77_123_0", "wb") as fh:
        fh.truncate(24 * 2**20)
    if os.stat(shm / "torch_77_123_0").st_blocks:
        pytest.skip("this filesystem does not keep truncated files sparse")
    facts = inspect_host(root, statvfs=statvfs_from_json(root))
    mib = 2**20
    for used, severity in ((48 * mib, Severity.ERROR), (32 * mib, Severity.WARNING)):
        shm_facts = replace(
            facts.shm,
            total=Fact.known(64 * mib),
            used=Fact.known(used),
            free=Fact.known(64 * mib - used),
            fstype=Fact.known("tmpfs"),
        )
        report = diagnose(replace(facts, shm=shm_facts))
        (f,) = [f for f in report.findings if f.code == "ENV011"]
        assert f.severity is severity
    assert f.message.startswith("1 zero-block torch_* file")  # 32 MiB free: room for 24 MiB
    near = diagnose(replace(facts, shm=replace(shm_facts, used=Fact.known(48 * mib))))
    (g,) = [f for f in near.findings if f.code == "ENV011"]
    assert g.message == (
        "likely stalled: DataLoader blocked on /dev/shm: 48 MiB of 64 MiB used (16 MiB free, "
        "less than one failed request) and 1 zero-block torch_* file in /dev/shm "
        "(e.g. torch_77_123_0; largest request 24 MiB): failed allocations"
    )
