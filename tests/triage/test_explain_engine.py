"""The streaming matcher on awkward input: exact line numbers across blocks, literals cut at
a block boundary, a 100 MB single line in bounded memory, binary data, invalid UTF-8, NUL
bytes, CRLF, ANSI colours, empty input; and the two pre-filter backends agree."""

from __future__ import annotations

import codecs
import io
import json
import os
import tracemalloc
from collections.abc import Sequence

import pytest
from _triage_helpers import FIXTURES, diagnose_text
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from shmguard.triage import explain_streams, load_catalogue
from shmguard.triage.matchers import Matcher, read_unit
from shmguard.triage.model import Signature
from shmguard.triage.scanner import BLOCK, clean, looks_utf16, make_finder

_CATALOGUE = load_catalogue()
ALLOC = (
    b"RuntimeError: unable to allocate shared memory(shm) for file </torch_1_2_3>: "
    b"No space left on device (28)"
)


class _Generated(io.RawIOBase):
    """A read-only stream of ``size`` bytes made of ``filler``, with ``insert`` at ``at``,
    produced on the fly (never held in memory)."""

    def __init__(self, size: int, filler: bytes, insert: bytes, at: int) -> None:
        self.size, self.filler, self.insert, self.at, self.pos = size, filler, insert, at, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        chunk = bytearray((self.filler * (n // len(self.filler) + 2))[:n])
        lo, hi = self.pos, self.pos + n
        s, e = self.at, self.at + len(self.insert)
        if s < hi and e > lo:
            a, z = max(s, lo), min(e, hi)
            chunk[a - lo : z - lo] = self.insert[a - s : z - s]
        b[:n] = chunk
        self.pos += n
        return n


def _one(data: bytes, catalogue: Sequence[Signature]) -> Matcher:
    m = Matcher(catalogue)
    m.feed("log", io.BytesIO(data))
    return m


def test_line_numbers_exact_across_many_blocks(catalogue: Sequence[Signature]) -> None:
    noise = b"".join(
        b"step %d loss 0.%04d lr 3e-4 throughput 812.5 samples/s\n" % (i, i) for i in range(60_000)
    )
    assert len(noise) > 3 * BLOCK
    d = diagnose_text(noise + ALLOC + b"\n" + noise + ALLOC + b"\n", catalogue)
    top = d.results[0]
    assert top.id == "torch-shm-alloc-failed"
    assert [e.line for e in top.evidence] == [60_001, 120_002]
    assert top.matches == 2
    assert d.inputs[0].lines == 120_002


@pytest.mark.parametrize("shift", [-40, -20, -5, 0, 5])
def test_literal_cut_by_a_block_boundary_is_found(
    catalogue: Sequence[Signature], shift: int
) -> None:
    line = b"x" * 70 + b"\n"
    prefix = line * (BLOCK // len(line))
    pad = BLOCK - len(prefix) + shift - 20  # the literal starts ~20 bytes into ALLOC
    data = prefix + b"y" * max(pad, 0) + b" " + ALLOC + b"\n"
    m = _one(data, catalogue)
    t = m.tallies["torch-shm-alloc-failed"]
    assert [e.line for e in t.evidence] == [len(prefix) // len(line) + 1]


@pytest.mark.timeout(120)
def test_100mb_single_line_bounded_memory(catalogue: Sequence[Signature]) -> None:
    size = 100 * 1024 * 1024
    stream = _Generated(size, b"abcdefghij" * 7, b" " + ALLOC + b" ", at=size // 2 + 13)
    tracemalloc.start()
    d = explain_streams([("big", io.BufferedReader(stream, BLOCK))], signatures=catalogue)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert d.inputs[0].bytes == size and d.inputs[0].lines == 1
    assert d.results[0].id == "torch-shm-alloc-failed"
    assert d.results[0].evidence[0].line == 1
    assert len(d.results[0].evidence[0].text) <= 402
    assert peak < 24 * 1024 * 1024, f"peak {peak} bytes for a 100 MB line"


def test_memory_does_not_grow_with_input(catalogue: Sequence[Signature]) -> None:
    def peak(size: int) -> int:
        stream = _Generated(size, b"epoch 1 step 2 loss 0.3 lr 1e-4\n", ALLOC + b"\n", at=0)
        tracemalloc.start()
        explain_streams([("g", io.BufferedReader(stream, BLOCK))], signatures=catalogue)
        p = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return p

    small, large = peak(4 * BLOCK), peak(32 * BLOCK)
    assert large < small + 2 * BLOCK, (small, large)


def test_binary_input_no_crash(catalogue: Sequence[Signature]) -> None:
    data = os.urandom(3 * BLOCK)
    d = diagnose_text(data, catalogue)
    assert d.inputs[0].binary is True
    assert d.exit_code == 0
    assert d.notes[0] == "log looks binary (many control bytes): only its text lines could match."


def test_binary_with_a_real_failure_inside(catalogue: Sequence[Signature]) -> None:
    data = os.urandom(BLOCK) + b"\n" + ALLOC + b"\n" + os.urandom(BLOCK)
    d = diagnose_text(data, catalogue)
    assert d.results[0].id == "torch-shm-alloc-failed"


def test_invalid_utf8_nul_crlf(catalogue: Sequence[Signature]) -> None:
    data = b"\xff\xfe\xfa garbage\r\n\x00\x00" + ALLOC + b"\r\n\xc3\x28 more\r\n"
    d = diagnose_text(data, catalogue)
    ev = d.results[0].evidence[0]
    assert ev.line == 2
    assert ev.text.startswith("RuntimeError: unable to allocate") and ev.text.endswith("(28)")
    json.dumps(ev.text)  # serialisable


def test_ansi_colours_and_crlf_fixture(catalogue: Sequence[Signature]) -> None:
    path = FIXTURES / "docker_logs_ansi_crlf.log"
    assert b"\x1b[31m" in path.read_bytes()
    d = diagnose_text(path.read_bytes(), catalogue)
    ev = d.results[0].evidence[0]
    assert ev.line == 2 and ev.text.startswith(
        "RuntimeError: unable to allocate shared memory(shm)"
    )
    assert "\x1b" not in ev.text and "\r" not in ev.text


def test_progress_bar_redraws_keep_the_last_segment() -> None:
    assert clean(b" 10%|#  \r 20%|##  \rRuntimeError: boom\r\n") == "RuntimeError: boom"
    assert clean(b"\x00abc\x00") == "abc"


def test_empty_input(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(b"", catalogue)
    assert d.inputs[0].lines == 0 and d.inputs[0].bytes == 0
    assert d.results == () and d.exit_code == 0 and d.next_steps


def test_last_line_without_newline(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(b"a\nb\n" + ALLOC, catalogue)
    assert d.results[0].evidence[0].line == 3 and d.inputs[0].lines == 3


@pytest.mark.timeout(120)
def test_backends_agree(catalogue: Sequence[Signature]) -> None:
    pytest.importorskip("ahocorasick_rs")
    logs = [
        json.loads(x)["log"].encode()
        for x in (FIXTURES / "public_reports.jsonl").read_text().splitlines()
    ]
    logs += [p.read_bytes() for p in sorted((FIXTURES / "torch_2.13").glob("*.txt"))]
    for data in logs:
        a = explain_streams([("l", io.BytesIO(data))], signatures=catalogue, backend="ac")
        b = explain_streams([("l", io.BytesIO(data))], signatures=catalogue, backend="find")
        assert [(r.id, r.confidence, [e.line for e in r.evidence]) for r in a.results] == [
            (r.id, r.confidence, [e.line for e in r.evidence]) for r in b.results
        ]


def test_finder_offsets() -> None:
    block = b"aa needle bb haystack needle"
    for backend in ("find", "auto"):
        f, _name = make_finder([b"needle", b"hay"], backend=backend)
        assert f(block) == [3, 13, 22]
    assert make_finder([b"x"], backend="find")[1] == "find"
    with pytest.raises(ValueError, match="unknown pre-filter backend"):
        make_finder([b"x"], backend="grep")


@pytest.mark.parametrize(
    ("text", "unit", "expected"),
    [
        ("9637888", "bytes", 9_637_888),
        ("65536", "df", 64 * 1024 * 1024),
        ("64M", "df", 64 * 1024 * 1024),
        ("1.0G", "df", 1024**3),
        ("1Gi", "k8s", 1024**3),
        ("2G", "k8s", 2_000_000_000),
        ("2g", "docker", 2 * 1024**3),
        ("2Gi", "size", 2 * 1024**3),
        ("2gb", "size", 2 * 1024**3),
        ("64MB", "size", 64 * 1024**2),
        ("65536k", "tmpfs", 64 * 1024**2),
        ("64000k", "tmpfs", 65_536_000),
        ("15.032385536", "gb", 15_032_385_536),
        ("2Gi", "docker", None),
        ("abc", "bytes", None),
    ],
)
def test_read_unit(text: str, unit: str, expected: int | None) -> None:
    assert read_unit(text, unit) == expected


@pytest.mark.parametrize("at", [2 * BLOCK - 60, 2 * BLOCK - 1, 3 * BLOCK - 45, 3 * BLOCK + 3])
def test_literal_cut_inside_a_very_long_line_is_found_once(
    catalogue: Sequence[Signature], at: int
) -> None:
    stream = _Generated(6 * BLOCK, b"0123456789", ALLOC, at=at)
    m = Matcher(catalogue)
    m.feed("long", io.BufferedReader(stream, BLOCK))
    t = m.tallies["torch-shm-alloc-failed"]
    assert t.matches == 1 and [e.line for e in t.evidence] == [1]


@settings(max_examples=60, deadline=None)
@given(
    chunks=st.lists(
        st.one_of(
            st.binary(max_size=300),
            st.sampled_from([ALLOC, b"\n", b"\r\n", b"\x1b[31m", b"\x00", b"\xff\xfe"]),
        ),
        max_size=40,
    )
)
@example(chunks=[codecs.BOM_UTF8])  # found by CI: a byte-order mark alone is 0 lines
def test_any_bytes_never_raise_and_lines_are_counted(chunks: list[bytes]) -> None:
    data = b"".join(chunks)
    assume(not looks_utf16(data))  # UTF-16 text is recoded: its lines are not b"\n" counts
    d = explain_streams([("fuzz", io.BytesIO(data))], signatures=_CATALOGUE)
    # A leading UTF-8 byte-order mark marks the encoding and is dropped: alone, it is no line.
    text = data.removeprefix(codecs.BOM_UTF8)
    expected_lines = text.count(b"\n") + (0 if text.endswith(b"\n") or not text else 1)
    assert d.inputs[0].lines == expected_lines and d.inputs[0].bytes == len(data)
    for r in d.results:
        for ev in r.evidence:
            assert 1 <= ev.line <= expected_lines
            assert "\x00" not in ev.text and "\x1b" not in ev.text
