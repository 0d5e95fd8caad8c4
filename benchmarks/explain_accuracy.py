#!/usr/bin/env python3
"""Accuracy of `shmguard explain` on labelled public reports, per kind, side by side.

For each report (one JSON object per line: ``kind``, ``lookalike``, ``log``...; format in
tests/fixtures/corpus/README.md) the log is explained with the built-in catalogue and scored
with ``shmguard.triage.scoring``: is the top cause's kind the labelled one, and did a
look-alike (a cause that is not /dev/shm) get a /dev/shm size? For reports whose log alone
cannot decide the cause (``decidable: false``) a second way to be right is counted apart:
explain left it open and printed the check the report's ``next_step`` names
(``Score.open``; the rule is in ``shmguard.triage.scoring.score``).

Two sets are printed side by side: the baseline set explain was built on
(tests/fixtures/logs/public_reports.jsonl) and the corpus of reports it was not
(tests/fixtures/corpus/reports_*.jsonl). A random third of the corpus
(tests/fixtures/corpus/heldout.txt) was set aside untouched and scored once when the
signature work was done (issue 10); that figure is recorded in heldout.txt's header and
benchmarks/results/. ``--heldout`` scores that third again, ``--seen`` the rest.

``--heldout2`` scores tests/fixtures/corpus/reports_heldout2.jsonl alone: the reports of the
programs other than PyTorch that live on /dev/shm (browsers, PostgreSQL, MPI, inference
servers) and their look-alikes, committed before their signatures were written (issue 22) and
scored before and after that work (benchmarks/results/explain_heldout2_*.txt); since then they
are tests like the rest of the corpus. ``--programs2`` scores
tests/fixtures/corpus/reports_programs2.jsonl alone (issue 22 item 4: more reports of those
programs and their look-alikes, each miss fixed by widening its signature's kind); it is part of
the whole corpus too. ``--file PATH`` scores
any file of reports in the corpus format alone. Reports with a ``family`` field also get one
row per family.

Usage: python benchmarks/explain_accuracy.py [--heldout | --seen | --heldout2 | --programs2 |
       --file PATH]
       [--misses]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from shmguard.triage import explain_streams, load_catalogue  # noqa: E402
from shmguard.triage.scoring import Score, score  # noqa: E402

BASELINE = REPO / "tests" / "fixtures" / "logs" / "public_reports.jsonl"
CORPUS = REPO / "tests" / "fixtures" / "corpus"
HELDOUT2 = CORPUS / "reports_heldout2.jsonl"
#: Issue 22 item 4: the second batch of the other programs' reports and their look-alikes.
PROGRAMS2 = CORPUS / "reports_programs2.jsonl"


def load(paths: list[Path]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for p in paths:
        rows += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return rows


def heldout_ids() -> set[str]:
    path = CORPUS / "heldout.txt"
    if not path.is_file():
        return set()
    return {x.strip() for x in path.read_text().splitlines() if x.strip() and x[0] != "#"}


def run(rows: list[dict[str, object]]) -> list[tuple[dict[str, object], Score]]:
    catalogue = load_catalogue()
    out = []
    for r in rows:
        d = explain_streams([("log", io.BytesIO(str(r["log"]).encode()))], signatures=catalogue)
        out.append((r, score(r, d)))
    return out


#: The rows for reports whose log does not decide: each report is in exactly one.
UNDECIDED = (
    "undecidable: right cause first",
    "undecidable: left open, right check",
    "undecidable: wrong",
)


def summary(scored: list[tuple[dict[str, object], Score]]) -> dict[str, tuple[int, int]]:
    """kind -> (top cause right, total), plus the rows 'ALL', 'ALL whose log decides', 'ALL
    right or left open', the three :data:`UNDECIDED` rows and 'look-alikes given shm
    advice'."""
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r, s in scored:
        keys = [str(r["kind"]), "ALL"]
        if r.get("family"):
            keys.append(f"family {r['family']}")
        if r.get("decidable", True):
            keys.append("ALL whose log decides")
        for key in keys:
            by[key][0] += s.right
            by[key][1] += 1
        by["ALL right or left open"][0] += s.right or s.open
        by["ALL right or left open"][1] += 1
        if not r.get("decidable", True):
            row = UNDECIDED[0] if s.right else UNDECIDED[1] if s.open else UNDECIDED[2]
            for key in UNDECIDED:
                by[key][0] += key == row
                by[key][1] += 1
        if s.lookalike:
            by["look-alikes given shm advice"][0] += s.shm_advice
            by["look-alikes given shm advice"][1] += 1
    return {k: (v[0], v[1]) for k, v in by.items()}


def cell(pair: tuple[int, int] | None) -> str:
    if pair is None or pair[1] == 0:
        return "-"
    right, total = pair
    return f"{right}/{total} ({100 * right / total:.0f}%)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group()
    which.add_argument(
        "--heldout",
        action="store_true",
        help="only the held-out third (first scored 2026-12-01: see heldout.txt's header)",
    )
    which.add_argument(
        "--seen", action="store_true", help="only the reports that were never held out (either set)"
    )
    which.add_argument(
        "--heldout2",
        action="store_true",
        help="only tests/fixtures/corpus/reports_heldout2.jsonl (issue 22's held-out programs)",
    )
    which.add_argument(
        "--programs2",
        action="store_true",
        help="only tests/fixtures/corpus/reports_programs2.jsonl (issue 22 item 4's reports)",
    )
    which.add_argument("--file", type=Path, help="only the reports in this jsonl file")
    ap.add_argument(
        "--misses",
        action="store_true",
        help="list every miss of the corpus, and the undecidable reports left open",
    )
    args = ap.parse_args()
    held = heldout_ids()
    corpus_rows = load(sorted(CORPUS.glob("reports_*.jsonl")))
    if args.heldout2 or args.programs2 or args.file:
        path = HELDOUT2 if args.heldout2 else PROGRAMS2 if args.programs2 else args.file
        corpus_rows = load([path])
        name = path.name
    elif args.heldout:
        corpus_rows = [r for r in corpus_rows if r["id"] in held]
        name = "held-out third"
    elif args.seen:
        held |= {r["id"] for r in load([HELDOUT2])}
        corpus_rows = [r for r in corpus_rows if r["id"] not in held]
        name = "corpus (not held out)"
    else:
        name = "whole corpus"
    base = summary(run(load([BASELINE])))
    scored = run(corpus_rows)
    new = summary(scored)
    rows = ("ALL", "ALL whose log decides", *UNDECIDED, "ALL right or left open")
    rows += ("look-alikes given shm advice",)
    kinds = sorted(k for k in set(base) | set(new) if k not in rows and k[:7] != "family ")
    families = sorted(k for k in new if k[:7] == "family ")
    keys = kinds + families + [k for k in rows if k in base or k in new]
    width = max(len(k) for k in keys)
    print(f"{'kind':{width}}  {'baseline (seen)':>18}  {name:>22}")
    for k in keys:
        print(f"{k:{width}}  {cell(base.get(k)):>18}  {cell(new.get(k)):>22}")
    b, n = base.get("ALL", (0, 0)), new.get("ALL", (0, 0))
    if b[1] and n[1]:
        ratio = (n[0] / n[1]) / (b[0] / b[1])
        print(f"top cause right: {name} / baseline = {ratio:.2f}")
    if args.misses:
        for r, s in scored:
            if s.open:
                where = f"{s.check} in {s.check_from}"
                print(f"OPEN {r['id']} ({r['kind']}): top {s.top}, check {where}")
        for r, s in scored:
            if not (s.right or s.open) or (s.lookalike and s.shm_advice):
                why = "shm advice for a look-alike" if s.right else f"top {s.top}"
                print(f"MISS {r['id']} ({r['kind']}): {why}  {r.get('source_url', '')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
