"""ENV rules over fixture hosts: the registry, the docs and each scenario's findings; each rule's
own messages, severities and fixes are in tests/doctor/rules/test_envNNN.py."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from shmguard.lint.doctor import DoctorOptions, diagnose
from shmguard.lint.env import RULES
from shmguard.model import Fact
from shmguard.units import GiB

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
