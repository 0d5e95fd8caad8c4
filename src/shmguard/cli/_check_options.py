"""The arguments and options of `shmguard check` (cli/check.py), declared apart so that the
command reads as what it does: parse, check, render, exit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shmguard.cli.check import OutputFormat
from shmguard.model import FailOn
from shmguard.sources.read import READ_TIMEOUT

__all__ = [
    "AllNamespacesOption",
    "BaselineOption",
    "ClusterOption",
    "ContextOption",
    "CreateBaselineOption",
    "DiffOption",
    "ExcludeOption",
    "ExtendExcludeOption",
    "FailOnOption",
    "FixOption",
    "ForceExcludeOption",
    "FormatOption",
    "IgnoreOption",
    "JobsOption",
    "JsonOutOption",
    "NamespaceOption",
    "OutputFormat",
    "PathsArgument",
    "ReadTimeoutOption",
    "SelectOption",
    "ShmSizeOption",
    "TargetOption",
    "UnsafeFixesOption",
]


PathsArgument = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="PATH...",
        help="Files or directories (walked, .gitignore and --exclude respected; binary, "
        "over-16-MiB, undecodable files, FIFOs and devices in a walk are skipped and "
        "counted) to check; - reads standard input (helm template ... | shmguard check -, "
        "kubectl get -A -o yaml | shmguard check -).",
        show_default=False,
    ),
]
JsonOutOption = Annotated[
    bool,
    typer.Option("--json", help="Print the shmguard.check/1 JSON document (--format json)."),
]
FormatOption = Annotated[
    OutputFormat | None,
    typer.Option(
        "--format",
        case_sensitive=False,
        help="Output: text, json (shmguard.check/1), sarif (SARIF 2.1.0, for code "
        "scanning) or github (::error file=...,line=... annotations for GitHub Actions) "
        "[default: text].",
        show_default=False,
    ),
]
BaselineOption = Annotated[
    Path | None,
    typer.Option(
        "--baseline",
        metavar="FILE",
        help="Report (and count in the exit status) only findings not in this baseline "
        "file (written by --create-baseline).",
    ),
]
CreateBaselineOption = Annotated[
    Path | None,
    typer.Option(
        "--create-baseline",
        metavar="FILE",
        help="Write the current findings to FILE as a baseline; this run then reports "
        "none of them.",
    ),
]
FailOnOption = Annotated[
    FailOn | None,
    typer.Option(
        "--fail-on",
        case_sensitive=False,
        help="Exit 1 when a finding at or above this severity remains "
        "[default: the configuration's fail-on, else warning].",
        show_default=False,
    ),
]
SelectOption = Annotated[
    list[str] | None,
    typer.Option(
        "--select",
        metavar="CODES",
        help="Report only these codes or prefixes (comma-separated; replaces the "
        "configuration's select).",
    ),
]
IgnoreOption = Annotated[
    list[str] | None,
    typer.Option(
        "--ignore",
        metavar="CODES",
        help="Never report these codes or prefixes (added to the configuration's ignore).",
    ),
]
FixOption = Annotated[
    bool,
    typer.Option(
        "--fix",
        help="Apply safe fixes to the files, in place (in a walk, never through a symbolic "
        "link out of the directory walked).",
    ),
]
DiffOption = Annotated[
    bool,
    typer.Option("--diff", help="Print the fixes as a unified diff; write nothing."),
]
UnsafeFixesOption = Annotated[
    bool,
    typer.Option("--unsafe-fixes", help="With --fix or --diff, apply unsafe fixes too."),
]
ShmSizeOption = Annotated[
    str | None,
    typer.Option(
        "--shm-size",
        metavar="SIZE",
        help="The /dev/shm size fixes write (64m, 1g, 2Gi) [default: the "
        "shmguard.io/shm-size annotation, else the sizing policy's 1 GiB, capped by a "
        "memory limit].",
        show_default=False,
    ),
]
TargetOption = Annotated[
    str | None,
    typer.Option(
        "--target",
        metavar="TOOLS",
        help="The tools the files are for, e.g. docker-cli=28,compose=v2|v1|podman-compose,"
        "podman=4.3 (any subset) [default: the configuration's target, else "
        "docker-cli=28,compose=v2,podman=4.3]; findings that depend on it name it.",
        show_default=False,
    ),
]
ClusterOption = Annotated[
    bool,
    typer.Option(
        "--cluster",
        help="Check the live objects of a cluster (the kubeconfig's current context, or "
        "in-cluster) instead of files; needs the cluster extra.",
    ),
]
ContextOption = Annotated[
    str | None,
    typer.Option("--context", metavar="NAME", help="With --cluster: the kubeconfig context."),
]
NamespaceOption = Annotated[
    str | None,
    typer.Option(
        "-n",
        "--namespace",
        metavar="NS",
        help="With --cluster: this namespace [default: the context's].",
        show_default=False,
    ),
]
AllNamespacesOption = Annotated[
    bool,
    typer.Option("-A", "--all-namespaces", help="With --cluster: every namespace."),
]
JobsOption = Annotated[
    int,
    typer.Option(
        "--jobs",
        "-j",
        min=0,
        metavar="N",
        help="Check the files in N processes, this one included (Linux; the output is the "
        "same); 1: one at a time; 0: one per usable CPU, at most one per 64 files and per "
        "768 KiB of work (their bytes and 2 KiB a file). --fix, "
        "and - (standard input), check one at a time. Checked here, a big Kubernetes stream "
        "is cut into N runs of documents (0: one per 768 KiB, at most 2; at most one per CPU) "
        "checked at once.",
    ),
]
ExcludeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        metavar="GLOB",
        help="Leave out of the walk files and directories matching GLOB (a name at any "
        "depth, or a path relative to the project root; ruff's semantics; repeatable); "
        "replaces the configuration's exclude and the default (.git, .venv, venv, "
        "node_modules, build, dist, ...).",
        show_default=False,
    ),
]
ExtendExcludeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--extend-exclude",
        metavar="GLOB",
        help="Leave these out too, beside exclude (repeatable).",
        show_default=False,
    ),
]
ForceExcludeOption = Annotated[
    bool,
    typer.Option(
        "--force-exclude",
        help="Apply the exclusions to paths named on the command line too (for pre-commit, "
        "which names every staged file).",
    ),
]
ReadTimeoutOption = Annotated[
    float,
    typer.Option(
        "--read-timeout",
        min=0.0,
        metavar="SECONDS",
        help="How long a FIFO or device named as PATH may deliver nothing before it is an "
        f"error [default: {READ_TIMEOUT:g}] (standard input, -, waits for its producer).",
        show_default=False,
    ),
]
