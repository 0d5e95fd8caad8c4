"""The rule docs are generated from the rules' metadata and kept equal to it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from shmguard.lint.config import RULES as SHM_RULES
from shmguard.lint.docs import SHM_INTRO, render_rules_markdown
from shmguard.lint.env import RULES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules-env.md"
SHM_DOCS = DOCS.with_name("rules-shm.md")


def test_rules_env_md_is_generated_from_the_rules() -> None:
    text = render_rules_markdown(RULES)
    if os.environ.get("SHMGUARD_REGEN_DOCS"):
        DOCS.write_text(text)
    assert DOCS.read_text() == text, "regenerate: SHMGUARD_REGEN_DOCS=1 pytest " + __file__


def test_rules_shm_md_is_generated_from_the_rules() -> None:
    text = render_rules_markdown(SHM_RULES, SHM_INTRO)
    if os.environ.get("SHMGUARD_REGEN_DOCS"):
        SHM_DOCS.write_text(text)
    assert SHM_DOCS.read_text() == text, "regenerate: SHMGUARD_REGEN_DOCS=1 pytest " + __file__


def test_every_rule_documents_every_section() -> None:
    for rule in RULES:
        d = rule.doc
        for name in ("what", "why", "example", "fix", "fix_safety"):
            value = getattr(d, name)
            assert value.strip(), f"{rule.code}: empty {name}"
        assert "```" in d.example, f"{rule.code}: the example is not a code block"
        assert rule.targets == ("host",)
        assert rule.why and rule.summary


def test_docs_link_only_to_pages_that_exist() -> None:
    text = render_rules_markdown(RULES) + render_rules_markdown(SHM_RULES, SHM_INTRO)
    for target in re.findall(r"\]\(([a-z-]+\.md)", text):
        assert (DOCS.parent / target).is_file(), target
