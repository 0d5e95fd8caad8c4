"""mkdocs.yml builds docs/ as a site with --strict: every page in the nav, every link resolves,
and links out of docs/ (src/, deploy/, benchmarks/) become repository links (docs/hooks)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        "SHMGUARD_REPO_URL": "https://example.org/shmguard",
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(root / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_site_builds_strict_with_repository_links(tmp_path: Path) -> None:
    proc = _build(ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "site" / "exporter" / "index.html").read_text()
    assert 'href="https://example.org/shmguard/blob/main/deploy/prometheus/prometheus.yml"' in page
    assert (tmp_path / "site" / "index.html").is_file()


def test_broken_links_fail_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "deploy").mkdir()
    page = copy / "docs" / "plan.md"
    page.write_text(page.read_text() + "\n[gone](no-such-page.md)\n")
    proc = _build(copy, tmp_path / "site1")
    assert proc.returncode == 1 and "no-such-page.md" in proc.stderr, proc.stderr
    page.write_text(page.read_text().replace("[gone](no-such-page.md)", "[out](../deploy/x.yaml)"))
    proc = _build(copy, tmp_path / "site2")
    assert proc.returncode == 1 and "deploy/x.yaml: no such file" in proc.stderr, proc.stderr
