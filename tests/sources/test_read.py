"""The one bounded reader (sources/read.py): the same cap for every kind of input, FIFOs with
and without a writer, standard input, and UTF-16 text (issues 21 and 24)."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

import pytest

from shmguard.sources.diagnostics import DiagnosticKind, SourceDiagnostic
from shmguard.sources.load import load_path
from shmguard.sources.read import read_input
from shmguard.sources.text import MAX_BYTES, SourceText


def _kind(got: bytes | SourceDiagnostic) -> DiagnosticKind:
    assert isinstance(got, SourceDiagnostic), got[:40]
    return got.kind


def test_regular_file_is_read_and_one_over_the_cap_is_refused(tmp_path: Path) -> None:
    small = tmp_path / "a.yaml"
    small.write_bytes(b"a: b\n")
    assert read_input(str(small)) == b"a: b\n"
    big = tmp_path / "big.csv"
    big.write_bytes(b"x,y\n" * (MAX_BYTES // 4 + 1))  # 16 MiB + 4 bytes of text
    got = read_input(str(big))
    assert _kind(got) is DiagnosticKind.TOO_LARGE
    assert isinstance(got, SourceDiagnostic)
    assert (
        got.message
        == f"file is {MAX_BYTES + 4:,} bytes, over the {MAX_BYTES:,}-byte limit; not read"
    )


def test_binary_start_and_directory_and_missing(tmp_path: Path) -> None:
    pt = tmp_path / "model.pt"
    pt.write_bytes(b"PK\x03\x04\x00\x00" + b"x" * 100)
    assert _kind(read_input(str(pt))) is DiagnosticKind.BINARY
    assert _kind(read_input(str(tmp_path))) is DiagnosticKind.UNREADABLE
    assert _kind(read_input(str(tmp_path / "nope"))) is DiagnosticKind.UNREADABLE


def test_a_device_is_read_up_to_the_cap(tmp_path: Path) -> None:
    # /dev/zero never ends and has st_size 0: the cap holds (its NULs make it binary first)
    assert _kind(read_input("/dev/zero", cap=1 << 20)) is DiagnosticKind.BINARY
    assert read_input("/dev/null") == b""


def test_fifo_without_a_writer_times_out(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    got = read_input(str(fifo), timeout=0.3)
    took = time.monotonic() - t0
    assert _kind(got) is DiagnosticKind.READ_TIMEOUT
    assert isinstance(got, SourceDiagnostic) and "no data for 0.3 s" in got.message
    assert 0.25 <= took < 5


def test_fifo_with_a_writer_is_read_and_capped(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)

    def write(data: bytes) -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)

    w = threading.Thread(target=write, args=(b"services: {}\n",))
    w.start()
    assert read_input(str(fifo), timeout=5) == b"services: {}\n"
    w.join()
    # endless text through a FIFO: more than the cap is never held
    w = threading.Thread(target=lambda: _endless(fifo))
    w.start()
    got = read_input(str(fifo), cap=1 << 20, timeout=5)
    w.join()
    assert _kind(got) is DiagnosticKind.TOO_LARGE
    assert isinstance(got, SourceDiagnostic)
    assert got.message == "input goes past the 1,048,576-byte limit; not read"


def _endless(fifo: Path) -> None:
    try:
        with open(fifo, "wb") as fh:
            while True:
                fh.write(b"a: b\n" * 4096)
    except BrokenPipeError:  # the reader stopped at the cap and closed its end
        pass


def test_standard_input_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stdin:
        buffer = io.BytesIO(b"a: b\n" * 1000)

    monkeypatch.setattr("sys.stdin", Stdin)
    assert _kind(read_input("-", cap=1000)) is DiagnosticKind.TOO_LARGE
    Stdin.buffer.seek(0)
    assert read_input("-") == b"a: b\n" * 1000


@pytest.mark.parametrize("codec,bom", [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")])
def test_utf16_with_a_bom_is_text(tmp_path: Path, codec: str, bom: bytes) -> None:
    text = "services:\n  train:\n    image: pytorch/pytorch  # é\n"
    f = tmp_path / "compose.yaml"
    f.write_bytes(bom + text.encode(codec))
    lf = load_path(str(f))
    assert lf.kind == "compose" and lf.src is not None
    assert lf.src.text == text and lf.src.encoding == codec
    # written back in its own encoding, byte-order mark included
    assert lf.src.encoded(lf.src.data) == f.read_bytes()


def test_utf8_bom_is_text_and_bad_utf16_is_a_diagnostic() -> None:
    src = SourceText.decode(b"\xef\xbb\xbfa: b\n", "x.yaml")
    assert isinstance(src, SourceText) and src.text == "a: b\n" and src.bias == 3
    bad = SourceText.decode(b"\xff\xfe\x00\xd8", "x.yaml")  # a lone surrogate
    assert isinstance(bad, SourceDiagnostic) and bad.kind is DiagnosticKind.NOT_UTF8
    assert "UTF-16-LE" in bad.message
