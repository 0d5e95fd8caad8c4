"""SHM029 `ecs-shm-size-units`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

import json

from _rule_helpers import FIXTURES, at, findings

from shmguard.lint.check import fix_file


def test_shm029_bytes_and_strings_in_mib_fields() -> None:
    fs = findings("ecs_bytes.json", "SHM029")
    assert at(fs) == [
        ("SHM029", "error", 9, 29),
        ("SHM029", "error", 10, 57),
        ("SHM029", "error", 16, 47),
    ]
    assert "2,147,483,648 MiB is 2,048 TiB" in fs[0].message and "is 2048 MiB" in fs[0].message
    assert "is a string" in fs[1].message and "write 1024" in fs[1].message
    assert "about 1908 MiB" in fs[2].message
    apps = [f.fix.applicability.value if f.fix and f.fix.edits else None for f in fs]
    assert apps == ["safe", "safe", None]  # 2,000,000,000 bytes is no whole MiB: display-only
    fixed = json.loads(fix_file((FIXTURES / "ecs_bytes.json").read_bytes(), "td.json").data)
    lp = fixed["containerDefinitions"][0]["linuxParameters"]
    assert lp == {"sharedMemorySize": 2048, "tmpfs": [{"containerPath": "/scratch", "size": 1024}]}
    assert fixed["containerDefinitions"][1]["linuxParameters"]["sharedMemorySize"] == 2000000000


def test_shm029_fargate_and_good() -> None:
    fs = findings("ecs_fargate.json", "SHM029")
    assert at(fs) == [("SHM029", "error", 8, 47), ("SHM029", "error", 8, 47)]
    assert "write 2048" in fs[0].message
    assert "FARGATE in requiresCompatibilities" in fs[1].message and fs[1].fix is None
    assert findings("ecs_good.json", "SHM029") == []
