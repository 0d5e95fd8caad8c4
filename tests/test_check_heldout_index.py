"""The held-out set's labels and SOURCES cover exactly the files in its folder."""

import csv
from pathlib import Path

HELDOUT = Path(__file__).parent / "fixtures" / "check_heldout"
META = {"labels.tsv", "SOURCES.tsv", "README.md"}


def _column(name: str, column: str) -> list[str]:
    with (HELDOUT / name).open(encoding="utf-8") as fh:
        return [row[column] for row in csv.DictReader(fh, delimiter="\t")]


def test_labels_and_sources_cover_the_folder() -> None:
    files = sorted(
        p.relative_to(HELDOUT).as_posix()
        for p in HELDOUT.rglob("*")
        if p.is_file() and p.name not in META
    )
    labels = _column("labels.tsv", "file")
    sources = _column("SOURCES.tsv", "file")
    assert len(files) >= 40
    assert sorted(labels) == files
    assert sorted(sources) == files
