"""The leak check counts the test's own cgroups: made for the test, not the machine's listing."""

from __future__ import annotations

import secrets
from pathlib import Path

from measure_helpers import _my_cgroup_dirs, leftover_cgroups, own_cgroups


def test_counts_only_cgroups_made_inside_the_test(root_only: None) -> None:
    home = _my_cgroup_dirs()
    other = home[0] / f"shmguard-other-run-{secrets.token_hex(4)}"
    other.mkdir()  # another shmguard run on the machine, at this process's level
    try:
        with own_cgroups() as mine:
            assert mine is not None and len(mine) == len(home)
            assert _my_cgroup_dirs() == mine  # this process moved in
            assert leftover_cgroups() == []  # the other run is not seen
            leak = mine[0] / "shmguard-leaked"
            leak.mkdir()
            assert leftover_cgroups() == [str(leak)]
        assert _my_cgroup_dirs() == home  # moved back
        assert not leak.exists() and not mine[0].exists()  # removed, leak included
        assert str(other) in leftover_cgroups()
    finally:
        other.rmdir()


def test_moves_back_when_the_body_raises(root_only: None) -> None:
    home = _my_cgroup_dirs()
    made: list[Path] = []
    try:
        with own_cgroups() as mine:
            assert mine is not None
            made = mine
            raise KeyError("body failed")
    except KeyError:
        pass
    assert _my_cgroup_dirs() == home
    assert made and not any(m.exists() for m in made)
