"""Score `shmguard check` on the held-out set in tests/fixtures/check_heldout.

Runs `python -m shmguard check --format json` (the src of this tree) on every labelled
file and prints, per file kind, the recall of expected findings (rule id matched; line
matched reported beside it) and the share of files labelled 'none' that got a warning
or an error, then every miss and every false warning. A score, not a test: the set is
held out, so nothing here asserts a threshold.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELDOUT = ROOT / "tests" / "fixtures" / "check_heldout"


def parse_expected(text: str) -> list[tuple[str, int | None]]:
    """'SHM001@14;SHM011@31' -> [('SHM001', 14), ('SHM011', 31)]; 'none' -> []."""
    if text.strip() == "none":
        return []
    out: list[tuple[str, int | None]] = []
    for item in text.split(";"):
        code, _, line = item.strip().partition("@")
        out.append((code, int(line) if line else None))
    return out


def run_check(path: Path) -> list[tuple[str, int | None, str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run(
        [sys.executable, "-m", "shmguard", "check", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=HELDOUT,
        check=False,
    )
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return [("CRASH", None, "error")]
    found: list[tuple[str, int | None, str]] = []
    for entry in doc.get("files", []):
        for finding in entry.get("findings", []):
            loc = finding.get("location") or {}
            found.append((finding.get("code", "?"), loc.get("line"), finding.get("severity", "?")))
        for diag in entry.get("diagnostics", []):
            if diag.get("severity") == "error":
                found.append(("DIAG:" + str(diag.get("kind", "?")), None, "error"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the first 10 files")
    args = parser.parse_args()
    with (HELDOUT / "labels.tsv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    if args.quick:
        rows = rows[:10]
    expected_n: dict[str, int] = defaultdict(int)
    matched_code: dict[str, int] = defaultdict(int)
    matched_line: dict[str, int] = defaultdict(int)
    none_files: dict[str, int] = defaultdict(int)
    none_warned: dict[str, int] = defaultdict(int)
    misses: list[str] = []
    false_warnings: list[str] = []
    for row in rows:
        kind, name = row["kind"], row["file"]
        expected = parse_expected(row["expected"])
        found = run_check(HELDOUT / name)
        loud = [f for f in found if f[2] in ("warning", "error")]
        if not expected:
            none_files[kind] += 1
            if loud:
                none_warned[kind] += 1
                false_warnings.append(
                    f"{name}: " + ", ".join(f"{c}@{ln} [{s}]" for c, ln, s in loud)
                )
            continue
        pool = list(found)
        for code, line in expected:
            expected_n[kind] += 1
            hit = next((f for f in pool if f[0] == code and f[1] == line), None)
            hit = hit or next((f for f in pool if f[0] == code), None)
            if hit is None:
                misses.append(f"{name}: {code}@{line} not reported (got: {found or 'nothing'})")
                continue
            pool.remove(hit)
            matched_code[kind] += 1
            matched_line[kind] += hit[1] == line
    kinds = sorted(set(expected_n) | set(none_files))
    print(f"{'kind':<14}{'recall (code)':>16}{'line also':>12}{'none files warned':>20}")
    for kind in [*kinds, "ALL"]:
        pick = kinds if kind == "ALL" else [kind]
        e = sum(expected_n[k] for k in pick)
        c = sum(matched_code[k] for k in pick)
        ln = sum(matched_line[k] for k in pick)
        n = sum(none_files[k] for k in pick)
        w = sum(none_warned[k] for k in pick)
        rec = f"{c}/{e} {100 * c / e:.0f}%" if e else "-"
        fw = f"{w}/{n} {100 * w / n:.0f}%" if n else "-"
        print(f"{kind:<14}{rec:>16}{ln:>12}{fw:>20}")
    print("\nmisses:")
    print("\n".join(f"  {m}" for m in misses) or "  none")
    print("false warnings on files that need none:")
    print("\n".join(f"  {m}" for m in false_warnings) or "  none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
