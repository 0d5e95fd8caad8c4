"""MkDocs hook: a Markdown link from docs/ to a file outside docs/ (../src/..., ../deploy/...,
../benchmarks/...) becomes a link to that file in the repository (config repo_url, /blob/ or
/tree/ at the branch SHMGUARD_DOCS_REF, default main). A target missing from the checkout is
logged as a warning, so `mkdocs build --strict` fails on it as on a broken page link."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.plugins.shmguard.repo_links")

_LINK = re.compile(r"\]\((?P<target>\.\./[^)\s#]*)(?P<anchor>#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    base = str(config.get("repo_url") or "").rstrip("/")
    ref = os.environ.get("SHMGUARD_DOCS_REF", "main")
    page_dir = (docs / page.file.src_path).parent

    def repl(match: re.Match[str]) -> str:
        target = (page_dir / match["target"]).resolve()
        if docs in target.parents or target == docs:
            return match[0]
        try:
            rel = target.relative_to(root).as_posix()
        except ValueError:
            log.warning("%s: link %s leaves the repository", page.file.src_path, match["target"])
            return match[0]
        if not target.exists():
            log.warning("%s: link %s: no such file in the repository", page.file.src_path, rel)
            return match[0]
        kind = "tree" if target.is_dir() else "blob"
        return f"]({base}/{kind}/{ref}/{rel}{match['anchor'] or ''})"

    return _LINK.sub(repl, markdown)
