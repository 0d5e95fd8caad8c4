"""Linear work on big inputs (issue 24 item 3): positions come from a line index built once per
file, and anchor/alias reach is computed once per document, not once per object. The speed
itself is measured by benchmarks/hostile_inputs.py; these tests pin what makes it linear and
that the answers are the ones the old per-call computation gave."""

from __future__ import annotations

import random

import pytest

from shmguard.fix import k8s_yaml
from shmguard.lint.report import check_paths
from shmguard.sources.text import SourceText


def _old_line_col(src: SourceText, offset: int) -> tuple[int, int]:
    """The former computation: newlines counted from the start of the file."""
    line = src.data.count(b"\n", 0, offset) + 1
    start = src.data.rfind(b"\n", 0, offset) + 1
    col = len(src.data[max(start, src.bias) : offset].decode("utf-8", "replace")) + 1
    return line, col


@pytest.mark.parametrize(
    "data",
    [
        b"a: 1\nb: 2\n\n  c: 3",
        "\ufeffname: caf\u00e9\n  x: \u6f22\u5b57 \U0001f600 y\r\nz: \u00e9\u00e9\n".encode(),
        b"\n\n\n",
        b"no newline at all",
        "\u00e9\n".encode() * 50,
    ],
    ids=["ascii", "bom-wide-crlf", "newlines", "one-line", "many-wide"],
)
def test_line_col_matches_counting_from_the_start(data: bytes) -> None:
    src = SourceText.decode(data, "f.yaml")
    assert isinstance(src, SourceText)
    boundaries = [src.byte_offset(i) for i in range(len(src.text) + 1)]
    for offset in boundaries:
        assert src.line_col(offset) == _old_line_col(src, offset), offset
        assert src.char_index(offset) == len(src.data[src.bias : offset].decode("utf-8"))


def test_line_index_is_built_once() -> None:
    src = SourceText.decode(b"x\n" * 1000, "f.sh")
    assert isinstance(src, SourceText)
    rng = random.Random(1)
    for _ in range(100):
        src.line_col(rng.randrange(2000))
    assert len(src._lines) == 1001  # one start per line, not appended to on each call


POD = """  - apiVersion: v1
    kind: Pod
    metadata: {{name: p{i}, labels: {labels}}}
    spec:
      containers:
      - name: c
        image: pytorch/pytorch:2.3.0
"""


def _list(n: int, anchor: bool) -> str:
    items = [
        POD.format(i=i, labels="&l {app: a}" if anchor and i == 0 else "{app: a}") for i in range(n)
    ]
    if anchor:
        items.append(POD.format(i=n, labels="*l"))
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(items)


def test_shared_ranges_are_computed_once_per_document(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    built: list[object] = []
    real = k8s_yaml._SharedRanges.__init__

    def counting(self, root, limit=200_000):  # type: ignore[no-untyped-def]
        built.append(root)
        real(self, root, limit)

    monkeypatch.setattr(k8s_yaml._SharedRanges, "__init__", counting)
    f = tmp_path / "list.yaml"
    f.write_text(_list(40, anchor=True))
    report = check_paths([f], jobs=1)
    fixed = [x for r in report.files for x in r.result.findings if x.fix and x.fix.edits]
    assert len(fixed) >= 40  # every unaliased Pod still gets its /dev/shm fix
    assert len(built) == 1


def test_an_anchor_changes_only_the_aliased_objects_fixes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    def fixes(text: str) -> list[str]:
        f = tmp_path / "l.yaml"
        f.write_text(text)
        report = check_paths([f], jobs=1)
        return sorted(
            f"{x.code}:{x.location.line}:{bool(x.fix and x.fix.edits)}"
            for r in report.files
            for x in r.result.findings
        )

    plain, anchored = fixes(_list(5, anchor=False)), fixes(_list(5, anchor=True))
    assert set(plain) <= set(anchored)  # the five Pods are fixed as without the anchor
    assert len(anchored) == len(plain) + 1  # and the aliased sixth is reported
