"""SHM022 `daemon-shm-size-syntax`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

import json

from _rule_helpers import FIXTURES, at, findings

from shmguard.lint.check import fix_file


def test_shm022_daemon_json_number_is_spliced_as_a_string() -> None:
    (f,) = findings("daemon_number.json", "SHM022")
    assert at([f]) == [("SHM022", "error", 3, 23)]
    assert 'invalid size: "2147483648"' in f.message
    assert f.fix is not None and f.fix.applicability.value == "safe"
    src = (FIXTURES / "daemon_number.json").read_bytes()
    fixed = fix_file(src, "daemon.json").data
    assert json.loads(fixed) == {"log-driver": "json-file", "default-shm-size": "2g"}
    assert fixed == src.replace(b"2147483648", b'"2g"')


def test_shm022_kubernetes_suffix_and_small_number() -> None:
    (f,) = findings("daemon_gi.json", "SHM022")
    assert at([f]) == [("SHM022", "error", 2, 23)]
    assert "invalid suffix: 'gi'" in f.message
    fixed = fix_file((FIXTURES / "daemon_gi.json").read_bytes(), "daemon.json").data
    assert json.loads(fixed)["default-shm-size"] == "2g"
    (f,) = findings("daemon_small.json", "SHM022")
    assert at([f]) == [("SHM022", "error", 1, 22)]
    assert f.fix is not None and f.fix.edits == () and "under 1 MiB" in f.message
    assert findings("daemon_good.json", "SHM022") == []
