"""The alert rules (promtool) and the Grafana dashboard name only metrics the exporter
exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from shmguard.monitor.exporter import METRICS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "shmguard-rules.yaml"
RULE_TESTS = DEPLOY / "prometheus" / "shmguard-rules.test.yaml"
DASHBOARD = DEPLOY / "grafana" / "shmguard.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (Debian package prometheus; .ci/run installs it)",
)

#: PromQL words that are not metric names: aggregations, modifiers, keywords.
_WORDS = {
    "sum", "max", "min", "avg", "count", "by", "without", "on", "ignoring", "group_left",
    "group_right", "and", "or", "unless", "bool", "offset",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names in a PromQL expression (or a Grafana ``label_values(...)`` query):
    label matchers, ranges, grouping clauses, strings and function names removed."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"label_values\(\s*([A-Za-z_:][\w:]*)\s*,[^)]*\)", r"\1", text)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([A-Za-z_:][\w:]*)\s*(\()?", text):
        if m.group(2) is None and m.group(1) not in _WORDS:
            names.add(m.group(1))
    return names


def _exported() -> set[str]:
    return {*METRICS, "up"}


def test_metric_names_parser() -> None:
    assert metric_names(
        'sum by (owner) (rate(shmguard_shm_owner_bytes{pod=~"$pod"}[5m])) > 0 and up'
    ) == {"shmguard_shm_owner_bytes", "up"}
    assert metric_names('label_values(shmguard_info{a="b"}, pod)') == {"shmguard_info"}
    assert metric_names("100 * node_memory_x / shmguard_shm_size_bytes") == {
        "node_memory_x",
        "shmguard_shm_size_bytes",
    }


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_rules_name_only_exported_metrics_and_have_severity_and_text() -> None:
    rules = _rules()
    assert {r["alert"] for r in rules} == {
        "ShmguardShmAlmostFull",
        "ShmguardJobStalled",
        "ShmguardShmSmallerThanNeed",
        "ShmguardShmFillingUp",
        "ShmguardShmUnreadable",
    }
    for rule in rules:
        assert metric_names(rule["expr"]) <= _exported(), rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    almost = {r["labels"]["severity"]: r for r in rules if r["alert"] == "ShmguardShmAlmostFull"}
    assert "> 80" in almost["warning"]["expr"] and almost["warning"]["for"] == "5m"
    assert "> 95" in almost["critical"]["expr"] and almost["critical"]["for"] == "1m"


@needs_promtool
def test_promtool_check_rules() -> None:
    r = subprocess.run(
        [str(PROMTOOL), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 6 rules found" in r.stdout


@needs_promtool
def test_promtool_test_rules() -> None:
    r = subprocess.run(
        [str(PROMTOOL), "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


@needs_promtool
def test_promtool_test_rules_catches_a_wrong_expectation(tmp_path: Path) -> None:
    # The rule tests are live: a wrong threshold in an expectation fails them.
    shutil.copy(RULES, tmp_path / RULES.name)
    first = "eval_time: 4m\n        alertname: ShmguardShmAlmostFull"
    assert first in RULE_TESTS.read_text()
    broken = RULE_TESTS.read_text().replace(first, first.replace("4m", "7m"), 1)
    (tmp_path / RULE_TESTS.name).write_text(broken)
    r = subprocess.run(
        [str(PROMTOOL), "test", "rules", RULE_TESTS.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert "ShmguardShmAlmostFull" in r.stdout + r.stderr


def _exprs(dash: dict[str, Any]) -> list[str]:
    out = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        query = var.get("query")
        if isinstance(query, dict):
            out.append(query["query"])
    return out


def test_dashboard_parses_and_names_only_exported_metrics() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = _exprs(dash)
    assert len(exprs) >= 10
    used: set[str] = set()
    for expr in exprs:
        names = metric_names(expr)
        assert names, expr
        assert names <= _exported(), (expr, names - _exported())
        used |= names
    # The dashboard shows every figure the exporter has, not only a few.
    assert used >= set(METRICS)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert all({"x", "y", "w", "h"} <= set(p["gridPos"]) for p in dash["panels"])


@needs_promtool
def test_the_scrape_configuration_keeps_the_exporters_labels() -> None:
    # recommend groups by the exporter's namespace/pod/container labels: without
    # honor_labels Prometheus renames them exported_* (a new user had to find this out)
    config = DEPLOY / "prometheus" / "prometheus.yml"
    job = yaml.safe_load(config.read_text())["scrape_configs"][0]
    assert job["job_name"] == "shmguard" and job["honor_labels"] is True
    assert PROMTOOL is not None
    r = subprocess.run(
        [PROMTOOL, "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 1 rule files found" in r.stdout + r.stderr
