"""Generate the rule documentation (docs/rules-env.md, docs/rules-shm.md, and the rule table
of docs/check.md between :data:`TABLE_BEGIN` and :data:`TABLE_END`) from the rules' metadata,
so it cannot drift from the code.

``tests/lint/test_rule_docs.py`` checks the files equal :func:`render_rules_markdown` and
:func:`render_rules_table`; regenerate them with
``SHMGUARD_REGEN_DOCS=1 python -m pytest tests/lint/test_rule_docs.py``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from shmguard.lint.engine import Example, Rule

_ENV_INTRO = """\
# Environment rules (`ENV0xx`)

This file is generated from the rules' metadata (`src/shmguard/lint/env/env0*.py`) by
`shmguard.lint.docs`; a test keeps it equal to the code.

`shmguard doctor` checks the host facts it reads ([doctor](doctor.md)) against these rules.
Codes are stable and never reused. Each rule is one module in `src/shmguard/lint/env/` with a
pure `check(facts, options)`; `shmguard.lint.env.RULES` lists them and the one rule engine
(`shmguard.lint.engine`) runs them. Every finding carries what is wrong, why it matters and a
fix written for the detected runtime (Docker: `docker run`, Compose and ECS; Podman;
Kubernetes; anything else: all of them) through the one snippet renderer; sizes come from the
one sizing policy ([background](background.md#how-shmguard-sizes)). Each example's message is
what doctor reports on a host fixture tree (tests/fixtures/hosts), and another tree does not get
it (tests/doctor/test_env_rule_examples.py).

Severities below are the defaults. The engine assigns the severity of each finding:
`[tool.shmguard.severity]` in the configuration sets it per rule code, and
`[tool.shmguard.severity.ml]` / `.container` per workload class (a PyTorch / NCCL / inference
workload, or an ordinary container: [configuration](configuration.md)); `select` and `ignore`
choose rules. `--fail-on` (default `error`) decides which severities make doctor exit 1.
"""


SHM_INTRO = """\
# Configuration rules (`SHM0xx`)

This file is generated from the rules' metadata (`src/shmguard/lint/config/shm0*.py`) by
`shmguard.lint.docs`; a test keeps it equal to the code.

`shmguard check` ([check](check.md)) checks `docker|podman run` lines, Compose files and
Kubernetes manifests against these rules. Codes are stable and never reused; they follow the
rule table planned when the rules were designed, so the codes of rules not built yet
(SHM005, SHM007, SHM010, ...) stay reserved. Each rule is one module in
`src/shmguard/lint/config/` with a pure `check(unit, options)` over one Compose service, pod
spec or run line; `shmguard.lint.config.RULES` lists them and the one rule engine
(`shmguard.lint.engine`) runs them, with the unit's workload class (an ordinary container, or a
PyTorch / NCCL / inference workload: `ml`) choosing the severity. Each rule's example is a whole
file that `check` reports the rule in, and the file to write instead, in which `check` reports
nothing; where the rule's fix is applied, `check --fix` (`--unsafe-fixes` for an unsafe fix)
turns the first into the second to the byte (tests/lint/test_rule_examples.py runs all three).

Severities below are the defaults: `[tool.shmguard.severity]` sets them per code and
`[tool.shmguard.severity.ml]` / `.container` per workload class ([configuration](configuration.md));
`select` / `ignore` (and `--select` / `--ignore`) choose rules. `--fail-on` (default `warning`)
decides which severities make check exit 1. Facts about the runtimes come from their source and
from real runs of Docker 20.10 (CLIs 20.10 and 28), Podman 4.3, Compose v1 and podman-compose;
where they differ, the finding says which tool it means.
"""


def _wrap(text: str) -> str:
    """One-line prose (a sentence built from concatenated strings) wrapped at 100 columns."""
    text = text.strip()
    return text if "\n" in text else textwrap.fill(text, 100, break_on_hyphens=False)


def _fill(text: str) -> str:
    """``text`` (Markdown) with each prose paragraph that has a line over 100 columns (a
    sentence with a long interpolated phrase, such as a rule's sources) wrapped at 100;
    code blocks, tables, lists and paragraphs already within 100 columns are left as written."""
    out: list[str] = []
    para: list[str] = []
    fenced = False

    def flush() -> None:
        if any(len(line) > 100 for line in para):
            joined = " ".join(line.strip() for line in para)
            out.append(textwrap.fill(joined, 100, break_on_hyphens=False, break_long_words=False))
        else:
            out.extend(para)
        para.clear()

    for line in text.split("\n"):
        if line.startswith("```"):
            flush()
            fenced = not fenced
            out.append(line)
        elif fenced or not line.strip() or line.lstrip().startswith(("|", "- ", "* ", "#")):
            flush()
            out.append(line)
        else:
            para.append(line)
    flush()
    return "\n".join(out)


def _severity(rule: Rule[Any, Any]) -> str:
    text = rule.severity.value
    extra = [f"{s.value} for {w} workloads" for w, s in rule.by_workload.items()]
    words = rule.doc.variant_words
    extra += [
        f"{s.value} {words.get(v) or 'on a ' + v.replace('-', ' ')}"
        for v, s in rule.variants.items()
    ]
    return text + (f" ({'; '.join(extra)})" if extra else "")


def _fix(rule: Rule[Any, Any]) -> str:
    return rule.doc.applies or rule.fix.value


#: The marks around docs/check.md's generated rule table.
TABLE_BEGIN = "<!-- generated by shmguard.lint.docs: the rule table -->"
TABLE_END = "<!-- end of the generated rule table -->"


def render_rules_table(rules: Sequence[Rule[Any, Any]], *, summary: bool = False) -> str:
    """The Markdown table of ``rules``: code, name, (summary,) default severity, fix."""
    head = ["code", "name", *(["summary"] if summary else []), "default severity", "fix"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rules:
        cells = [r.code, f"`{r.name}`"]
        if summary:
            cells.append(r.summary.replace("|", "\\|"))
        out.append("| " + " | ".join([*cells, _severity(r), _fix(r)]) + " |")
    return "\n".join(out) + "\n"


def _block(ex: Example) -> str:
    return f"```{ex.language}\n{ex.text.rstrip()}\n```"


def _examples(rule: Rule[Any, Any]) -> list[str]:
    """The Example section's lines: the doc's Markdown example, then its whole bad file and
    its good one (which tests/lint/test_rule_examples.py checks)."""
    d = rule.doc
    out = [d.example.strip()] if d.example.strip() else []
    if d.bad is not None:
        out.append(f"A `{d.bad.file}` that {rule.code} reports:\n{_block(d.bad)}")
    if d.good is not None:
        out.append(f"Use instead:\n{_block(d.good)}")
    return out


def render_rules_markdown(rules: Sequence[Rule[Any, Any]], intro: str = _ENV_INTRO) -> str:
    """The Markdown page for ``rules``: the intro, a table, then one section per rule with
    What it detects / Why is this bad? / Example / Fix / Fix safety."""
    out = [intro, render_rules_table(rules, summary=True).rstrip("\n")]
    for r in rules:
        d = r.doc
        out += [
            "",
            f"## {r.code} `{r.name}`",
            "",
            _wrap(
                f"Default severity: {_severity(r)}. Fix: {_fix(r)}. Checks: {', '.join(r.targets)}."
            ),
            "",
            "### What it detects",
            _fill(d.what.strip()),
            "",
            "### Why is this bad?",
            _fill(d.why.strip()),
            "",
            "### Example",
            *_examples(r),
            "",
            "### Fix",
            _fill(d.fix.strip()),
            "",
            "### Fix safety",
            _wrap(d.fix_safety),
        ]
    return "\n".join(out) + "\n"
