"""`check` as a library: :func:`check_paths` checks (and fixes) files and returns a
:class:`CheckReport`, the one value ``shmguard check`` renders in every format.

The report holds every step the command takes after reading its options: the files found
(:func:`shmguard.sources.discover.walk`: ``.gitignore`` and the exclusions applied; what a
walk skips, FIFOs, devices and the files that are binary, over the cap or undecodable, counted
in :attr:`CheckReport.skipped`; a directory that cannot be listed or a symbolic link loop is
an error entry), checked in one process or several
(:mod:`shmguard.lint.check_files`), the webhook-coverage step over Kubernetes streams
(:mod:`shmguard.lint.coverage`), the fixes written or diffed, the baseline recorded and the
findings it knows taken out, the exit status. So the library and the CLI give the same
findings (tests/lint/test_check_library_cli.py). ``check --cluster`` builds the same value
from a live cluster's objects (:func:`shmguard.fleet.cluster_check.check_cluster`).

Nothing here prints or writes a report: the CLI renders it (:mod:`shmguard.render.json_bodies`
for JSON) and writes the baseline file from :attr:`CheckReport.new_baseline`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from shmguard.config import Config
from shmguard.lint.check import CheckOptions, FileResult
from shmguard.lint.check_files import Checked, Reading, check_files, jobs_for
from shmguard.model import FailOn, exit_status
from shmguard.model.finding import Finding
from shmguard.sources.discover import walk
from shmguard.sources.exclude import DEFAULT_EXCLUDE, Exclusions
from shmguard.sources.read import READ_TIMEOUT

if TYPE_CHECKING:
    from shmguard.lint.baseline import Baseline, BaselineEntry

__all__ = ["CheckReport", "Checked", "check_paths", "report_of"]


@dataclass(frozen=True)
class CheckReport:
    """What ``check`` found, fixed and left.

    Attributes:
        files: one :class:`Checked` per file (or cluster object), in the order checked, its
            findings without those the baseline knows.
        fail_on: the exit threshold the exit status was taken against.
        baselined: findings left out because the baseline knows them.
        errors: files that could not be read (diagnostics that are not ``info``) or written;
            any makes the exit status 2.
        written: False when fixes were only diffed (``--diff``), not written.
        config: the configuration file read, or None.
        notes: what was skipped reading a cluster (one line each).
        new_baseline: the entries of a baseline of every finding, when asked for
            (``create_baseline``), for the caller to write.
        skipped: ``(path, reason)`` of the files a directory walk met and did not check:
            ``binary``, ``too-large``, ``not-utf8`` (read), ``fifo``, ``device``, ``socket``
            (not opened). No error.
    """

    files: tuple[Checked, ...]
    fail_on: FailOn = FailOn.WARNING
    baselined: int = 0
    errors: int = 0
    written: bool = True
    config: Path | None = None
    notes: tuple[str, ...] = ()
    new_baseline: tuple[BaselineEntry, ...] | None = None
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def skipped_counts(self) -> dict[str, int]:
        """Reason -> files skipped, most first (ties by reason)."""
        counts: dict[str, int] = {}
        for _, why in self.skipped:
            counts[why] = counts.get(why, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def results(self) -> tuple[FileResult, ...]:
        """Each file's findings and diagnostics."""
        return tuple(c.result for c in self.files)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every finding reported, file by file."""
        return tuple(f for c in self.files for f in c.result.findings)

    @property
    def fixed(self) -> int:
        """Fixes applied (or, with ``--diff``, to apply)."""
        return sum(c.fixed for c in self.files)

    @property
    def repaired(self) -> tuple[Finding, ...]:
        """The findings whose fixes were written."""
        return tuple(f for c in self.files for f in c.repaired)

    @property
    def sources(self) -> dict[str, bytes]:
        """Path -> the bytes checked, for the files whose bytes were kept."""
        return {c.result.path: c.data for c in self.files if c.data is not None}

    @property
    def exit_status(self) -> int:
        """2 on errors, else 1 on a finding at or above :attr:`fail_on`, else 0."""
        return 2 if self.errors else exit_status(self.findings, self.fail_on)


def check_paths(
    paths: str | Path | Iterable[str | Path],
    *,
    config: Config | None = None,
    options: CheckOptions | None = None,
    fail_on: FailOn | None = None,
    fix: bool = False,
    diff: bool = False,
    unsafe: bool = False,
    jobs: int = 0,
    baseline: Baseline | None = None,
    create_baseline: bool = False,
    keep_sources: bool = False,
    skip: Iterable[Path] = (),
    exclude: Iterable[str] | None = None,
    extend_exclude: Iterable[str] = (),
    force_exclude: bool | None = None,
    read_timeout: float | None = READ_TIMEOUT,
) -> CheckReport:
    """``shmguard check PATH...``: check the files of ``paths`` (one path or several; ``-``:
    standard input; directories walked, ignored files and those of ``skip`` left out) as the
    CLI does.

    Args:
        config: the configuration (rules selected, user-defined checks, policy, target);
            default: none (:class:`~shmguard.config.Config`).
        options: the rules' options; default: the configuration's policy and target.
        fail_on: the exit threshold; default: the configuration's, else ``warning``.
        fix: write the safe fixes (``unsafe``: and the unsafe ones) to the files, in place.
        diff: compute the fixes without writing them (:attr:`Checked.fixed_data`).
        jobs: processes to check in (:func:`~shmguard.lint.check_files.jobs_for`; 0: one per
            usable CPU, at most one per 64 files and per 768 KiB of work; 1: this one). When
            the files are checked in this process, a big Kubernetes stream among them is cut
            into that many runs of documents checked at once (0: one per usable CPU and per
            768 KiB). The report is the same.
        baseline: leave out the findings it knows (counted in ``baselined``).
        create_baseline: record every finding as :attr:`CheckReport.new_baseline`, and leave
            them all out (it replaces ``baseline``).
        keep_sources: keep every file's bytes (:attr:`CheckReport.sources`, which SARIF's
            snippets read); they are kept with a baseline too.
        exclude: glob patterns a walk leaves out (:mod:`shmguard.sources.exclude`, ruff's
            semantics), replacing the configuration's ``exclude`` (default: ruff's list,
            :data:`~shmguard.sources.exclude.DEFAULT_EXCLUDE`).
        extend_exclude: patterns added to those (after the configuration's own).
        force_exclude: apply the exclusions to the paths named too (pre-commit); default:
            the configuration's ``force-exclude``.
        read_timeout: seconds a FIFO or device named by path may deliver nothing (None:
            wait).

    Raises:
        ValueError: the configuration's target cannot be read (when ``options`` is None).
    """
    conf = config or Config()
    if options is None:
        from shmguard.model.target import parse_target

        options = CheckOptions(policy=conf.policy, target=parse_target(conf.target))
    given = [paths] if isinstance(paths, str | Path) else paths
    patterns = (
        *(exclude if exclude is not None else _default(conf.exclude, DEFAULT_EXCLUDE)),
        *conf.extend_exclude,
        *extend_exclude,
    )
    force = conf.force_exclude if force_exclude is None else force_exclude
    root = conf.path.parent if conf.path is not None else None
    found = walk([str(p) for p in given], skip, Exclusions(patterns, root, force))
    files = found.files
    reading = Reading(frozenset(found.walked), frozenset(found.outside), read_timeout)
    keep = keep_sources or baseline is not None or create_baseline
    checked = check_files(
        files,
        options,
        conf,
        fix=fix,
        diff=diff,
        unsafe=unsafe,
        jobs=jobs_for(jobs, files, fix=fix),
        keep_data=keep,
        reading=reading,
        stream_jobs=jobs,
    )
    walk_errors = [Checked(FileResult(d.file, "error", (), (d,)), None) for d in found.errors]
    return report_of(
        [*checked, *walk_errors],
        skipped=found.skipped,
        fail_on=fail_on or conf.fail_on or FailOn.WARNING,
        baseline=baseline,
        create_baseline=create_baseline,
        written=not diff,
        config=conf.path,
    )


def _default(value: tuple[str, ...] | None, default: tuple[str, ...]) -> tuple[str, ...]:
    return default if value is None else value


def report_of(
    checked: Iterable[Checked],
    *,
    fail_on: FailOn,
    baseline: Baseline | None = None,
    create_baseline: bool = False,
    written: bool = True,
    config: Path | None = None,
    notes: Iterable[str] = (),
    errors: int | None = None,
    skipped: Iterable[tuple[str, str]] = (),
) -> CheckReport:
    """The report of files (or objects) checked: the baseline recorded (``create_baseline``)
    and the findings it knows (or ``baseline``'s) left out; the files skipped
    (:attr:`Checked.skipped`) taken out into :attr:`CheckReport.skipped`, after ``skipped``
    (those a walk did not open). ``errors`` default: the diagnostics that are not ``info`` and
    the failed writes."""
    every = tuple(checked)
    files = tuple(c for c in every if c.skipped is None)
    left = (*skipped, *((c.result.path, c.skipped) for c in every if c.skipped is not None))
    if errors is None:
        errors = sum(
            (c.write_error is not None) + sum(not d.info for d in c.result.diagnostics)
            for c in files
        )
    found = None
    if create_baseline or baseline is not None:
        from shmguard.lint.baseline import Baseline, entries

        sources = {c.result.path: c.data for c in files if c.data is not None}
        if create_baseline:
            found = tuple(entries((c.result, sources.get(c.result.path, b"")) for c in files))
            baseline = Baseline.of(found)
        assert baseline is not None
        kept, baselined = [], 0
        for c in files:
            r, n = baseline.new_findings(c.result, sources.get(c.result.path, b""))
            kept.append(replace(c, result=r))
            baselined += n
        return CheckReport(
            tuple(kept), fail_on, baselined, errors, written, config, tuple(notes), found, left
        )
    return CheckReport(files, fail_on, 0, errors, written, config, tuple(notes), None, left)
