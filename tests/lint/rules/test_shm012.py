"""SHM012 `shm-size-ignored-by-mount`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example


def test_shm012_doc_example_names_the_mount_line() -> None:
    assert in_doc_example("SHM012") == [
        (
            "warning",
            5,
            15,
            None,
            "shm_size is unused: a tmpfs at /dev/shm (line 6) replaces Docker's /dev/shm",
        )
    ]


def test_shm012_run_line_tmpfs_wins_other_volumes_do_not_count() -> None:
    src = "docker run --shm-size=8g --tmpfs /dev/shm:size=8g pytorch/pytorch python t.py\n"
    ((_, _, column, _, message),) = found(src, "run.sh", "SHM012")
    assert column == 12 and "--tmpfs /dev/shm:size=8g mounts /dev/shm itself" in message
    other = "docker run --shm-size=8g -v /data:/data pytorch/pytorch python t.py\n"
    assert found(other, "run.sh", "SHM012") == []
