"""The rule docs are generated from the rules' metadata and kept equal to it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from shmguard.lint.config import RULES as SHM_RULES
from shmguard.lint.docs import (
    SHM_INTRO,
    TABLE_BEGIN,
    TABLE_END,
    render_rules_markdown,
    render_rules_table,
)
from shmguard.lint.env import RULES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules-env.md"
SHM_DOCS = DOCS.with_name("rules-shm.md")
CHECK_DOCS = DOCS.with_name("check.md")


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


def test_the_rule_table_of_check_md_is_generated_from_the_rules() -> None:
    text = CHECK_DOCS.read_text()
    head, begin, rest = text.partition(TABLE_BEGIN + "\n")
    table, end, tail = rest.partition(TABLE_END)
    assert begin and end, f"{CHECK_DOCS.name} lost the marks around its rule table"
    want = render_rules_table(SHM_RULES)
    if os.environ.get("SHMGUARD_REGEN_DOCS"):
        CHECK_DOCS.write_text(head + begin + want + end + tail)
        table = want
    assert table == want, "regenerate: SHMGUARD_REGEN_DOCS=1 pytest " + __file__


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


def test_variant_words_name_variants_of_their_rule() -> None:
    for rule in (*RULES, *SHM_RULES):
        unknown = set(rule.doc.variant_words) - set(rule.variants)
        assert not unknown, f"{rule.code}: words for no variant {unknown}"


def test_each_rule_module_is_named_after_its_rule() -> None:
    """``shm001_ml_workload_without_shm_size.py`` holds SHM001 ``ml-workload-without-shm-size``:
    the code, then the name in snake case."""
    for rule in (*RULES, *SHM_RULES):
        module = rule.check.__module__.rsplit(".", 1)[1]
        assert module == f"{rule.code.lower()}_{rule.name.replace('-', '_')}", rule.code
