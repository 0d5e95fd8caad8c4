"""`check` as a library: :func:`check_paths` checks (and fixes) files and returns a
:class:`CheckReport`, the one value ``shmguard check`` renders in every format.

The report holds every step the command takes after reading its options: the files found
(:func:`shmguard.sources.discover.discover`), checked in one process or several
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

from shmguard.config import Config
from shmguard.lint.baseline import Baseline, BaselineEntry, entries
from shmguard.lint.check import CheckOptions, FileResult
from shmguard.lint.check_files import Checked, check_files, jobs_for
from shmguard.model import FailOn, exit_status
from shmguard.model.finding import Finding
from shmguard.sources.discover import discover

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
    """

    files: tuple[Checked, ...]
    fail_on: FailOn = FailOn.WARNING
    baselined: int = 0
    errors: int = 0
    written: bool = True
    config: Path | None = None
    notes: tuple[str, ...] = ()
    new_baseline: tuple[BaselineEntry, ...] | None = None

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
            usable CPU, at most one per 64 files; 1: this one). The report is the same.
        baseline: leave out the findings it knows (counted in ``baselined``).
        create_baseline: record every finding as :attr:`CheckReport.new_baseline`, and leave
            them all out (it replaces ``baseline``).
        keep_sources: keep every file's bytes (:attr:`CheckReport.sources`, which SARIF's
            snippets read); they are kept with a baseline too.

    Raises:
        ValueError: the configuration's target cannot be read (when ``options`` is None).
    """
    conf = config or Config()
    if options is None:
        from shmguard.model.target import parse_target

        options = CheckOptions(policy=conf.policy, target=parse_target(conf.target))
    given = [paths] if isinstance(paths, str | Path) else paths
    files = list(discover([str(p) for p in given], skip=skip))
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
    )
    return report_of(
        checked,
        fail_on=fail_on or conf.fail_on or FailOn.WARNING,
        baseline=baseline,
        create_baseline=create_baseline,
        written=not diff,
        config=conf.path,
    )


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
) -> CheckReport:
    """The report of files (or objects) checked: the baseline recorded (``create_baseline``)
    and the findings it knows (or ``baseline``'s) left out. ``errors`` default: the
    diagnostics that are not ``info`` and the failed writes."""
    files = tuple(checked)
    if errors is None:
        errors = sum(
            (c.write_error is not None) + sum(not d.info for d in c.result.diagnostics)
            for c in files
        )
    found = None
    if create_baseline or baseline is not None:
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
            tuple(kept), fail_on, baselined, errors, written, config, tuple(notes), found
        )
    return CheckReport(files, fail_on, 0, errors, written, config, tuple(notes))
