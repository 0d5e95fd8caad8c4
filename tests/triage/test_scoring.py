"""The scoring of explain against labelled reports (shared by the tests and the benchmark)."""

from __future__ import annotations

from collections.abc import Sequence

from _triage_helpers import diagnose_text

from shmguard.estimate.policy import Sized
from shmguard.triage.model import Diagnosis, FixPlan, Result, Signature
from shmguard.triage.scoring import accepts, checks_in, score

BUS = "RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error.\n"
OOM = "RuntimeError: DataLoader worker (pid 7) is killed by signal: Killed.\n"


def test_labels_accept_their_catalogue_kinds() -> None:
    assert accepts("dataloader_shm") == {"dataloader_shm"}
    assert accepts("k8s_emptydir") == {"k8s_emptydir", "dataloader_shm"}


def test_a_right_top_cause_and_shm_advice(catalogue: Sequence[Signature]) -> None:
    s = score({"kind": "dataloader_shm", "lookalike": False}, diagnose_text(BUS, catalogue))
    assert (s.top, s.right, s.lookalike, s.shm_advice) == (
        "dataloader-bus-error",
        True,
        False,
        True,
    )


def test_a_lookalike_is_scored_for_shm_advice(catalogue: Sequence[Signature]) -> None:
    s = score({"kind": "cgroup_oom", "lookalike": True}, diagnose_text(OOM, catalogue))
    assert s.lookalike and not s.shm_advice
    wrong = score({"kind": "cgroup_oom"}, diagnose_text(BUS, catalogue))
    assert wrong.lookalike and wrong.shm_advice and not wrong.right
    assert score({"kind": "memlock"}, diagnose_text("hello\n", catalogue)).top is None


# Undecidable reports, scored on constructed diagnoses: what explain ranked first, what it
# printed to decide, and whether it gave a /dev/shm size.

DF_SHM = "`df -h /dev/shm` in the container shows whether it is full."
ULIMIT = "Compare `ulimit -n` with the number of open /dev/shm/torch_* files."
GENERAL = ("Look for kernel OOM kills on the host: `dmesg -T | grep -i oom`.",)


def _result(
    kind: str,
    confidence: str = "low",
    remedy: str = "investigate",
    decide: str = "",
    shm_size: int | None = None,
    also: tuple[str, ...] = (),
) -> Result:
    fix = None
    if shm_size is not None:
        size = Sized(shm_size, "a starting point", "documented")
        fix = FixPlan("Give it more /dev/shm.", None, size, None, (), (), (), ())
    return Result(
        id=f"sig-{kind}",
        title=kind,
        kind=kind,
        also=also,
        role="cause",
        remedy=remedy,
        confidence=confidence,
        base_confidence=confidence,
        explained_by=None,
        cause="",
        decide=decide,
        notes=(),
        matches=1,
        evidence=(),
        references=(),
        fix=fix,
    )


def _diagnosis(*results: Result, next_steps: tuple[str, ...] = ()) -> Diagnosis:
    return Diagnosis((), None, None, None, (), (), results, (), next_steps, 0)


def _undecidable(kind: str, next_step: str, lookalike: bool = False) -> dict[str, object]:
    return {"kind": kind, "lookalike": lookalike, "decidable": False, "next_step": next_step}


def test_checks_are_found_by_what_they_run() -> None:
    text = "Check ulimit -n against open /dev/shm/torch_* fds, and df -h /dev/shm."
    assert checks_in(text) == ("shm-size", "fd-limit")
    assert checks_in("Run df -h on the filesystem holding ~/.cache.") == ("disk-space",)
    # df on /dev/shm is not a disk check, and text without a command names none.
    assert "disk-space" not in checks_in("`df -h /dev/shm` shows it")
    assert checks_in("The cause is not known.") == ()


def test_left_open_with_the_check_in_the_top_decide_text() -> None:
    report = _undecidable("shm_small", "Check df -h /dev/shm and what caches live there.")
    s = score(report, _diagnosis(_result("worker_exit", decide=DF_SHM)))
    assert (s.right, s.open, s.check, s.check_from) == (False, True, "shm-size", "decide")


def test_left_open_with_the_check_in_the_general_next_steps() -> None:
    report = _undecidable("cgroup_oom", "Check the kernel OOM log (dmesg).", lookalike=True)
    s = score(report, _diagnosis(next_steps=GENERAL))
    assert (s.top, s.open, s.check, s.check_from) == (None, True, "kernel-oom-log", "next steps")
    # Nothing printed, or another check printed: not open.
    assert not score(report, _diagnosis()).open
    assert not score(report, _diagnosis(_result("worker_exit", decide=DF_SHM))).open


def test_only_the_top_result_decide_counts() -> None:
    report = _undecidable("fd_limit", "Check ulimit -n.", lookalike=True)
    d = _diagnosis(_result("shm_open", decide=DF_SHM), _result("worker_exit", decide=ULIMIT))
    assert not score(report, d).open
    d = _diagnosis(_result("shm_open", decide=ULIMIT), _result("worker_exit", decide=DF_SHM))
    assert score(report, d).open


def test_a_decidable_or_right_report_is_never_open() -> None:
    decidable = {"kind": "shm_small", "lookalike": False, "decidable": True, "next_step": None}
    s = score(decidable, _diagnosis(_result("worker_exit", decide=DF_SHM)))
    assert (s.right, s.open, s.check) == (False, False, None)
    right = score(
        _undecidable("shm_small", "df -h /dev/shm"),
        _diagnosis(_result("dataloader_shm", also=("shm_small",), decide=DF_SHM)),
    )
    assert (right.right, right.open, right.check) == (True, False, None)


def test_a_high_confidence_cause_on_the_other_side_is_wrong() -> None:
    # A look-alike (a full disk) diagnosed, confidently, as /dev/shm: wrong, check or not.
    disk = _undecidable("disk_full", "df -h on the filesystem of the file, vs df -h /dev/shm")
    shm = _result("dataloader_shm", "high", "shm-size", decide=DF_SHM)
    s = score(disk, _diagnosis(shm))
    assert (s.check, s.open) == ("shm-size", False)
    # A shm report diagnosed, confidently, as the memory limit: wrong too.
    small = _undecidable("shm_small", "df -h /dev/shm")
    oom = _result("cgroup_oom", "high", "memory", decide=DF_SHM)
    assert not score(small, _diagnosis(oom)).open
    # The same causes at medium confidence leave it open (the shm size is not advice on a
    # report that is not a look-alike).
    assert score(small, _diagnosis(_result("cgroup_oom", "medium", "memory", DF_SHM))).open


def test_a_high_confidence_cause_on_the_labels_side_leaves_the_rest_to_the_check() -> None:
    # "/dev/shm ran out" is true of a report whose label says which shm setting did not apply;
    # the check says which.
    report = _undecidable("docker_run_config", "Check df -h /dev/shm inside the container.")
    bus = _result("dataloader_shm", "high", "shm-size", decide=DF_SHM, shm_size=8 << 30)
    s = score(report, _diagnosis(bus))
    assert (s.right, s.open, s.check) == (False, True, "shm-size")


def test_a_lookalike_given_a_shm_size_is_not_left_open() -> None:
    report = _undecidable("disk_full", "Check df -h on the disk of the mmap file.", True)
    d = "`df -h /dev/shm`, or `df -h` on the file system of a memory-mapped file."
    sigbus = _result("dataloader_shm", "medium", "shm-size", decide=d, shm_size=8 << 30)
    s = score(report, _diagnosis(sigbus))
    assert (s.shm_advice, s.check, s.open) == (True, "disk-space", False)
    sized_not = _result("dataloader_shm", "medium", "shm-size", decide=d)
    assert score(report, _diagnosis(sized_not)).open


def test_a_next_step_that_names_no_known_check_is_never_open() -> None:
    report = _undecidable("other", "Ask the reporter what they changed.")
    s = score(report, _diagnosis(_result("worker_exit", decide=DF_SHM), next_steps=GENERAL))
    assert (s.open, s.check) == (False, None)


def test_disk_check_allows_a_few_words_before_the_file_system() -> None:
    # explain's sigbus-generic decide text and the reports' next steps word it differently.
    assert "disk-space" in checks_in("`df -h` on that file's file system")
    assert "disk-space" in checks_in("Check free space (df -h) on the filesystem that holds it")
    assert "disk-space" not in checks_in("df -h on a hunch, then /dev/shm")


def test_log_kind_is_accepted_beside_the_label(catalogue: Sequence[Signature]) -> None:
    # The label names the setting that fixed it (Compose); the log only shows the failure.
    report = {"kind": "compose_config", "lookalike": False}
    assert not score(report, diagnose_text(BUS, catalogue)).right
    assert score({**report, "log_kind": "dataloader_shm"}, diagnose_text(BUS, catalogue)).right


def test_disk_check_names_a_cache_directory() -> None:
    assert "disk-space" in checks_in("Run df -h for cache_dir and for /.")


def test_a_platform_disk_metric_is_a_disk_check() -> None:
    assert "disk-space" in checks_in("Check the job's DiskUtilization metric.")
