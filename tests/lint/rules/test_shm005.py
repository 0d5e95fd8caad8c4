"""SHM005 `decimal-quantity-suffix`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from _rule_helpers import at, findings, only

from shmguard.lint.check import check_loaded
from shmguard.sources.load import load_bytes


def test_shm005_decimal_beside_binary_and_exa() -> None:
    fs = findings("shm005_decimal.yaml", "SHM005")
    assert at(fs) == [
        ("SHM005", "info", 7, 45),
        ("SHM005", "info", 14, 28),
        ("SHM005", "info", 28, 26),  # E flagged even where nothing else is binary
    ]
    assert "'16G' is decimal (16 x 10^9 bytes)" in fs[0].message
    assert "'64Gi'" in fs[0].message and "write 16Gi" in fs[0].message
    assert (
        fs[0].fix is not None and fs[0].fix.edits == () and fs[0].fix.title.startswith("Write 16Gi")
    )
    assert "500Mi" in fs[1].message
    assert "2 exabytes" in fs[2].message and fs[2].fix is None


def test_shm005_silent_on_decimal_only_and_exponent() -> None:
    src = (
        b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n"
        b"    resources: {limits: {memory: 2G}, requests: {memory: 1e9}}\n"
    )
    assert check_loaded(load_bytes(src, "p.yaml"), rules=only("SHM005")).findings == ()
