"""The literal pre-filter and the block reader: only the minimal literals are searched, in
Teddy-sized groups, and still every line that holds any catalogue literal is a hit; blocks are
slices of the read, numbered right across reads; removing ANSI sequences keeps line numbers."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest
from _triage_helpers import diagnose_text

from shmguard.triage.model import Signature
from shmguard.triage.scanner import (
    AC_GROUP,
    TEDDY_MASK,
    BlockReader,
    hit_lines,
    literal_groups,
    make_finder,
    minimal_literals,
)

ALLOC = (
    b"RuntimeError: unable to allocate shared memory(shm) for file </torch_1_2_3>: "
    b"No space left on device (28)"
)


def _literals(catalogue: Sequence[Signature]) -> list[bytes]:
    return sorted({p.literal for s in catalogue for p in s.patterns})


def test_minimal_literals_drop_those_containing_another() -> None:
    lits = [b" Bus error", b"Bus error", b"libnccl-net.so", b"nccl", b"abc", b"abc"]
    assert minimal_literals(lits) == [b"Bus error", b"abc", b"nccl"]


def test_literal_groups_cover_the_minimal_literals(catalogue: Sequence[Signature]) -> None:
    lits = _literals(catalogue)
    groups = literal_groups(lits)
    flat = [lit for g in groups for lit in g]
    assert sorted(flat) == minimal_literals(lits)
    assert len(flat) == len(set(flat))
    short = [g for g in groups if min(map(len, g)) < TEDDY_MASK]
    assert len(short) <= 1 and all(len(lit) < TEDDY_MASK for g in short for lit in g)
    long = [g for g in groups if g not in short]
    assert all(len(g) <= AC_GROUP for g in long)
    assert max(map(len, long)) - min(map(len, long)) <= 1


def test_literal_groups_sizes() -> None:
    lits = [b"lit%03d" % i for i in range(100)] + [b"ab", b"xyz"]
    groups = literal_groups(lits, size=48)
    assert groups[0] == [b"ab", b"xyz"]
    assert [len(g) for g in groups[1:]] == [
        34,
        33,
        33,
    ]  # 100 in ceil(100 / 48) = 3 runs differing by at most one


@pytest.mark.parametrize("backend", ["auto", "find"])
def test_every_line_holding_a_literal_is_a_hit(
    catalogue: Sequence[Signature], backend: str
) -> None:
    lits = _literals(catalogue)
    lines = [b"noise %d " % i + lit + b" tail" for i, lit in enumerate(lits)]
    block = b"step 1 loss 0.5\n" + b"\nstep 2 loss 0.4\n".join(lines) + b"\n"
    find, _name = make_finder(lits, backend=backend)
    hits = list(hit_lines(block, 1, find(block)))
    assert [h.line for h in hits] == [2 * i + 2 for i in range(len(lits))]
    assert all(lit in h.raw for h, lit in zip(hits, lits, strict=True))


@pytest.mark.parametrize("backend", ["auto", "find"])
def test_finder_within_bounds(backend: str) -> None:
    block = b"needle 1\nneedle 2\nneedle 3\n"
    find, _name = make_finder([b"needle"], backend=backend)
    assert find(block, 9, 18) == [9]
    assert find(block, 9) == [9, 18]
    hits = list(hit_lines(block, 2, find(block, 9, 18), 9, 18))
    assert [(h.line, h.raw) for h in hits] == [(2, b"needle 2")]


def test_blocks_are_whole_lines_numbered_across_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shmguard.triage.scanner.BLOCK", 10)
    data = b"first line\nsecond\nx\nthe fourth line is long\nfifth"
    reader = BlockReader(io.BytesIO(data), overlap=4)
    got = [(b.line, b.data[b.start : b.stop]) for b in reader]
    lines = data.split(b"\n")
    for line, text in got:
        assert text.split(b"\n")[0] in lines[line - 1]
    assert b"".join(text for _line, text in got) == data
    assert reader.lines == 5 and reader.bytes_read == len(data)


def test_osc_sequence_never_swallows_a_newline(catalogue: Sequence[Signature]) -> None:
    # An OSC title left open at a line end (no BEL there) must not eat the lines up to the
    # next BEL: evidence keeps its real line number.
    data = b"\x1b]0;title\nsecond\n" + ALLOC + b"\nafter \x07 done\n\x1b]0;ok\x07done\n"
    d = diagnose_text(data, catalogue)
    ev = d.results[0].evidence[0]
    assert d.results[0].id == "torch-shm-alloc-failed"
    assert ev.line == 3 and d.inputs[0].lines == 5
