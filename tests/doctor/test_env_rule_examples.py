"""Every ENV rule's documented example runs: doctor over a host fixture tree
(tests/fixtures/hosts) reports the rule with the very message its doc's example shows, and over
another tree does not report it.

The ENV examples are host situations, not files, so the pair of hosts of each rule is named
here (:data:`EXAMPLES`), not in the rule's doc; a rule missing from it fails the test.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from shmguard.inspect.host import inspect_host
from shmguard.inspect.shm import statvfs_from_json
from shmguard.lint.doctor import DoctorOptions, diagnose
from shmguard.lint.engine import Rule
from shmguard.lint.env import RULES
from shmguard.units import GiB

#: code -> (the host its doc's example shows, a host without the problem, the options).
EXAMPLES: dict[str, tuple[str, str, DoctorOptions]] = {
    "ENV001": ("docker-v2-default", "k8s-v2-sized-full", DoctorOptions()),
    "ENV002": ("docker-v2-default", "k8s-v2-unsized-emptydir", DoctorOptions(require=GiB)),
    "ENV003": ("k8s-v2-sized-full", "docker-v2-default", DoctorOptions()),
    "ENV004": ("docker-v1-ipc-host", "k8s-v2-sized-full", DoctorOptions()),
    "ENV005": ("k8s-v2-unsized-emptydir", "k8s-v2-sized-full", DoctorOptions()),
    "ENV006": ("docker-v1-ipc-host", "docker-v2-default", DoctorOptions()),
    "ENV007": ("k8s-v2-unsized-emptydir", "k8s-v2-sized-full", DoctorOptions()),
    "ENV008": ("docker-ipc-none", "docker-v2-default", DoctorOptions()),
    "ENV009": ("slurm-disk-shm", "docker-v2-default", DoctorOptions()),
    "ENV010": ("docker-v1-ipc-host", "docker-v2-default", DoctorOptions()),
    # the bad host gets the sparse torch_* file a failed allocation leaves (below)
    "ENV011": ("docker-v2-default", "docker-v2-default", DoctorOptions()),
}


def _leftover(root: Path) -> None:
    with open(root / "dev" / "shm" / "torch_77_123_0", "wb") as fh:
        fh.truncate(18 * 2**20)  # sparse: st_blocks 0, as a failed MapAllocator leaves it
    if os.stat(root / "dev" / "shm" / "torch_77_123_0").st_blocks:
        pytest.skip("this filesystem does not keep truncated files sparse")


def _codes_and_messages(
    fixture_root: Callable[[str], Path], tree: str, options: DoctorOptions, leftover: bool
) -> list[tuple[str, str]]:
    root = fixture_root(tree)
    if leftover:
        _leftover(root)
    facts = inspect_host(root, statvfs=statvfs_from_json(root))
    return [(f.code, f.message) for f in diagnose(facts, options).findings]


def test_every_env_rule_has_an_example_pair() -> None:
    assert sorted(EXAMPLES) == [r.code for r in RULES]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_the_bad_host_gets_the_documented_message(
    rule: Rule[object, object], fixture_root: Callable[[str], Path]
) -> None:
    bad, _, options = EXAMPLES[rule.code]
    got = _codes_and_messages(fixture_root, bad, options, rule.code == "ENV011")
    own = [m for c, m in got if c == rule.code]
    assert own, f"{rule.code}: {bad} gives {got}"
    for message in own:
        assert message in rule.doc.example, f"{rule.code}: the doc does not show {message!r}"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_the_good_host_does_not_get_it(
    rule: Rule[object, object], fixture_root: Callable[[str], Path]
) -> None:
    _, good, options = EXAMPLES[rule.code]
    got = _codes_and_messages(fixture_root, good, options, False)
    assert rule.code not in [c for c, _ in got], f"{rule.code}: {good} gives {got}"
