"""The browser and database classes (issue 22 item 3): images and commands matched by token,
with the ML class first, the tools beside a program left out, and check's SHM001 giving each
its own words, severity and size."""

from __future__ import annotations

from pathlib import Path

import pytest

from shmguard.lint.check import check_loaded, fix_file
from shmguard.model.finding import Applicability
from shmguard.sources.load import load_bytes
from shmguard.sources.workload import classify, command_args

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "programs"


@pytest.mark.parametrize(
    ("image", "cls"),
    [
        ("selenium/standalone-chrome:4.21.0-20240517", "browser"),
        ("selenium/standalone-firefox", "browser"),
        ("selenium/node-edge:4.9.0-20230421", "browser"),
        ("seleniarm/standalone-chromium:latest", "browser"),
        ("cypress/included:13.6.0", "browser"),
        ("cypress/browsers:node-18.16.0-chrome-114", "browser"),
        ("mcr.microsoft.com/playwright:v1.40.0-jammy", "browser"),
        ("mcr.microsoft.com/playwright/python:v1.40.0-jammy", "browser"),
        ("ghcr.io/puppeteer/puppeteer:21", "browser"),
        ("browserless/chrome", "browser"),
        ("zenika/alpine-chrome:latest", "browser"),
        ("chromedp/headless-shell", "browser"),
        ("postgres:16.4", "database"),
        ("bitnami/postgresql:16.1.0-debian-11-r20", "database"),
        ("ghcr.io/cloudnative-pg/postgresql:16", "database"),
        ("postgis/postgis:16-3.4", "database"),
        ("timescale/timescaledb:latest-pg16", "database"),
        # beside the program, not it
        ("selenium/hub:4.9.0", "container"),
        ("selenium/video:ffmpeg-6.1", "container"),
        ("selenium/node-docker:4.9.0", "container"),
        ("prometheuscommunity/postgres-exporter", "container"),
        ("crunchydata/postgres-operator:ubi8-5.5", "container"),
        ("acme/postgres-backup-s3", "container"),
        ("cypress/factory", "container"),
        # a part of a word is no token
        ("acme/postgresqlish", "container"),
        ("acme/chromecast-bridge", "container"),
        # the ML class is the more telling
        ("nvcr.io/nvidia/pytorch:24.01-py3", "ml"),
    ],
)
def test_image_classes(image: str, cls: str) -> None:
    assert classify(images=[(image, None)]).cls == cls


def test_a_test_runner_command_is_a_browser_and_ml_wins() -> None:
    assert classify(commands=[("npx playwright test --shard=1/4", None)]).cls == "browser"
    assert classify(commands=[("cypress run --browser chrome", None)]).cls == "browser"
    both = classify(images=[("pytorch/pytorch", None)], commands=[("npx playwright test", None)])
    assert both.cls == "ml"


def test_the_workload_annotation_names_the_new_classes() -> None:
    ann = {"shmguard.io/workload": ("browser", None)}
    assert classify(images=[("acme/e2e", None)], annotations=ann).cls == "browser"


def test_postgres_parallel_settings_are_read() -> None:
    args = command_args("postgres -c max_parallel_workers_per_gather=4 -c work_mem=64MB")
    assert args is not None and args.parallel == (4, "max_parallel_workers_per_gather=4")
    assert command_args("postgres -c shared_buffers=1GB") is None
    # a count of 5,000 digits is no count (int() would raise)
    assert command_args("python train.py --workers " + "1" * 5000) is None


def _shm001(data: bytes, name: str) -> list[tuple[str, str, str | None]]:
    r = check_loaded(load_bytes(data, name))
    return [
        (f.severity.value, f.message, f.fix.applicability.value if f.fix else None)
        for f in r.findings
        if f.code == "SHM001"
    ]


COMPOSE = b"""services:
  selenium:
    image: selenium/standalone-chrome:4.21.0-20240517
    ports: ["4444:4444"]
  hub:
    image: selenium/hub:4.21.0
  db:
    image: postgres:16
  olap:
    image: postgres:16
    command: postgres -c max_parallel_workers_per_gather=8
"""


def test_check_reports_browsers_and_postgres_in_compose() -> None:
    found = _shm001(COMPOSE, "compose.yaml")
    assert [(sev, fix) for sev, _, fix in found] == [
        ("warning", "safe"),
        ("info", "unsafe"),
        ("warning", "safe"),
    ]
    browser, quiet, parallel = (m for _, m, _ in found)
    assert browser.startswith("service 'selenium' is a browser (image selenium/standalone")
    assert "session deleted because of page crash" in browser
    assert "--disable-dev-shm-usage" in browser
    assert quiet.startswith("service 'db' is PostgreSQL") and "info only" in quiet
    assert "max_parallel_workers_per_gather=8" in parallel
    fixed = fix_file(COMPOSE, "compose.yaml").data
    # the browser gets the 2 GiB docker-selenium documents; PostgreSQL's info fix is unsafe,
    # the one that asks for parallel workers gets the policy's default
    assert fixed.count(b'shm_size: "2g"') == 1 and fixed.count(b'shm_size: "1g"') == 1
    assert fix_file(fixed, "compose.yaml").data == fixed


def test_a_browser_pod_without_a_shm_volume_gets_the_documented_size() -> None:
    pod = b"""apiVersion: v1
kind: Pod
metadata: {name: e2e}
spec:
  containers:
    - name: chrome
      image: selenium/standalone-chrome:4.21.0-20240517
      resources: {limits: {memory: 4Gi}}
"""
    r = fix_file(pod, "pod.yaml")
    assert b"sizeLimit: 2Gi" in r.data and b"mountPath: /dev/shm" in r.data
    assert r.remaining.findings == ()
    found = check_loaded(load_bytes(pod, "pod.yaml")).findings
    assert [f.code for f in found] == ["SHM001"]
    fix = found[0].fix
    assert fix is not None and fix.applicability is Applicability.SAFE
    assert "docker-selenium runs its browser images with --shm-size=2g" in fix.description


@pytest.mark.parametrize(
    "name",
    [
        "docker-selenium__docker-compose-v3.yml",
        "kubernetes-examples__selenium-node-firefox-deployment.yaml",
    ],
)
def test_real_browser_files_that_size_dev_shm_are_clean(name: str) -> None:
    # public files (tests/fixtures/programs/SOURCES.tsv): each browser has a /dev/shm
    data = (FIXTURES / name).read_bytes()
    assert _shm001(data, name) == []


def test_the_fixtures_are_listed_with_their_sources() -> None:
    rows = (FIXTURES / "SOURCES.tsv").read_text().splitlines()[1:]
    listed = {r.split("\t")[0] for r in rows}
    assert listed == {p.name for p in FIXTURES.iterdir() if p.name != "SOURCES.tsv"}
    assert all(r.split("\t")[1].startswith("https://github.com/") for r in rows)
