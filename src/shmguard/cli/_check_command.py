"""`shmguard check` as Typer declares it (its help, arguments and options, cli/_check_options.py);
what it does is :func:`shmguard.cli.check.check`, which the console entry point also runs
without building the Typer application when the arguments are plain (cli/_fast.py)."""

from __future__ import annotations

import typer

from shmguard.cli import check as command
from shmguard.cli._app import PlainUsage, app
from shmguard.cli._check_options import (
    AllNamespacesOption,
    BaselineOption,
    ClusterOption,
    ContextOption,
    CreateBaselineOption,
    DiffOption,
    ExcludeOption,
    ExtendExcludeOption,
    FailOnOption,
    FixOption,
    ForceExcludeOption,
    FormatOption,
    IgnoreOption,
    JobsOption,
    JsonOutOption,
    NamespaceOption,
    PathsArgument,
    ReadTimeoutOption,
    SelectOption,
    ShmSizeOption,
    TargetOption,
    UnsafeFixesOption,
)
from shmguard.cli._config import ConfigOption
from shmguard.sources.read import READ_TIMEOUT


@app.command(cls=PlainUsage)
def check(
    paths: PathsArgument = None,
    json_out: JsonOutOption = False,
    output_format: FormatOption = None,
    baseline: BaselineOption = None,
    create_baseline: CreateBaselineOption = None,
    fail_on: FailOnOption = None,
    select: SelectOption = None,
    ignore: IgnoreOption = None,
    fix: FixOption = False,
    diff: DiffOption = False,
    unsafe_fixes: UnsafeFixesOption = False,
    shm_size: ShmSizeOption = None,
    target: TargetOption = None,
    cluster: ClusterOption = False,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
    all_namespaces: AllNamespacesOption = False,
    jobs: JobsOption = 0,
    exclude: ExcludeOption = None,
    extend_exclude: ExtendExcludeOption = None,
    force_exclude: ForceExcludeOption = False,
    read_timeout: ReadTimeoutOption = READ_TIMEOUT,
    config: ConfigOption = None,
) -> None:
    """Check config files (or, with --cluster, a live cluster's objects) for /dev/shm
    problems; exit 1 on findings at --fail-on or above, 2 when a file could not be read.

    Suppress a finding with a `# shmguard: ignore[SHM001]` comment on its line or the line
    above, or a `shmguard.io/ignore: "SHM001"` annotation (Kubernetes) or label (Compose)."""
    status = command.check(
        paths=paths,
        json_out=json_out,
        output_format=output_format,
        baseline=baseline,
        create_baseline=create_baseline,
        fail_on=fail_on,
        select=select,
        ignore=ignore,
        fix=fix,
        diff=diff,
        unsafe_fixes=unsafe_fixes,
        shm_size=shm_size,
        target=target,
        cluster=cluster,
        context=context,
        namespace=namespace,
        all_namespaces=all_namespaces,
        jobs=jobs,
        exclude=exclude,
        extend_exclude=extend_exclude,
        force_exclude=force_exclude,
        read_timeout=read_timeout,
        config=config,
    )
    if status:
        raise typer.Exit(status)


# Registered after `check`, so that --help lists rules and rule beside it.
from shmguard.cli import rules as _rules  # noqa: E402, F401
