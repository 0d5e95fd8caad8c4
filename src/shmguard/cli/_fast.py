"""``shmguard check FILE...`` without Typer: the console entry point's fast path.

A pre-commit hook runs ``shmguard check --jobs 1 --force-exclude FILE...`` on every commit;
importing Typer (and its Click) and building the command took about 30 ms of the 0.14 s such a
run took on the development machine, the interpreter's own start about 30 ms. When the
arguments are paths and the plain forms of the options below (``--opt VALUE``,
``--opt=VALUE``, ``-j N``, each at most once but the repeatable ones), :func:`check_arguments`
gives the keyword arguments Typer would pass to :func:`shmguard.cli.check.check` (tests/
test_cli_fast.py compares them), and :func:`run_fast` runs it as Typer's main would: the same
exit statuses, Ctrl-C, end of input and closed pipe. Anything else (help, ``--``, a short
option cluster, an option not listed, a value Typer would refuse or has to look at: a
negative or non-decimal number, an unknown choice, an empty value, one that starts with ``-``,
a ``--config`` file that cannot be read, shell completion) goes to Typer, so help and usage
errors are Typer's own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["check_arguments", "run_fast"]

#: Flags (no value): the keyword argument each sets to True.
_FLAGS = {
    "--json": "json_out",
    "--fix": "fix",
    "--diff": "diff",
    "--unsafe-fixes": "unsafe_fixes",
    "--force-exclude": "force_exclude",
}

#: Repeatable options: the keyword argument whose list each adds to.
_LISTS = {
    "--select": "select",
    "--ignore": "ignore",
    "--exclude": "exclude",
    "--extend-exclude": "extend_exclude",
}


def _digits(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() else None


def _fail_on(value: str) -> Any:
    from shmguard.model import FailOn

    return next((m for m in FailOn if m.value.casefold() == value.casefold()), None)


def _format(value: str) -> Any:
    from shmguard.cli.check import OutputFormat

    return next((m for m in OutputFormat if m.value.casefold() == value.casefold()), None)


def _config(value: str) -> Any:
    """``--config``'s Path, None when Click's ``readable`` check would refuse it (it exists
    but cannot be read)."""
    from pathlib import Path

    if os.path.lexists(value) and not os.access(value, os.R_OK):
        return None
    return Path(value)


#: Options with one value: the keyword argument and the conversion (None: refused).
_VALUES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--jobs": ("jobs", _digits),
    "-j": ("jobs", _digits),
    "--fail-on": ("fail_on", _fail_on),
    "--format": ("output_format", _format),
    "--config": ("config", _config),
    "--target": ("target", str),
}


def check_arguments(args: list[str]) -> dict[str, Any] | None:
    """The keyword arguments of :func:`shmguard.cli.check.check` that Typer gives for
    ``shmguard check ARGS`` (``args`` after ``check``), only those it would not leave at their
    defaults; None when ``args`` name no path or hold anything this parser leaves to Typer."""
    given: dict[str, Any] = {}
    paths: list[str] = []
    it = iter(args)
    for arg in it:
        if arg == "-" or not arg.startswith("-"):
            paths.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name in _FLAGS and not eq:
            if _FLAGS[name] in given:
                return None
            given[_FLAGS[name]] = True
            continue
        if (name not in _VALUES and name not in _LISTS) or (eq and not name.startswith("--")):
            return None
        if not eq:
            value = next(it, "")
        if not value or value.startswith("-"):
            return None
        if name in _LISTS:
            given.setdefault(_LISTS[name], []).append(value)
            continue
        key, convert = _VALUES[name]
        converted = convert(value)
        if converted is None or key in given:
            return None
        given[key] = converted
    if not paths:
        return None
    return {"paths": paths, **given}


def _completing() -> bool:
    """Whether the environment asks for shell completion (Click's ``_<PROG>_COMPLETE``)."""
    return any(k.endswith("_COMPLETE") for k in os.environ)


def run_fast(argv: list[str]) -> bool:
    """Run ``shmguard ARGV`` and exit when it is ``check`` with arguments
    :func:`check_arguments` takes; False (nothing done) otherwise."""
    if not argv or argv[0] != "check" or _completing():
        return False
    kwargs = check_arguments(argv[1:])
    if kwargs is None:
        return False
    import atexit
    import errno
    import gc

    from shmguard.sources import gcpause

    # At exit the interpreter's last collections walk every object the run made, modules
    # included: about 10 ms of a one-file check on the development machine. Frozen, those
    # objects are freed with their modules as before, without being walked; the output is
    # flushed and closed first either way. Registered here so that it runs only when the
    # interpreter ends (a caller of ``main`` that catches SystemExit is left alone).
    atexit.register(gc.freeze)

    # The modules a check needs, loaded with the cyclic collector paused: their classes and
    # functions are no garbage, and the collections that loading them triggers took about 5 ms
    # of the start-up on the development machine (sources/gcpause.py says why a pause is safe).
    gcpause.pause()
    try:
        import shmguard.lint.report  # noqa: F401
        from shmguard.cli import check
    finally:
        gcpause.resume()
    try:
        status = check.check(**kwargs)
    except KeyboardInterrupt:  # as Typer's main: exit 130, no word
        raise SystemExit(130) from None
    except EOFError:  # as Click's Abort
        sys.stderr.write("\nAborted!\n")
        raise SystemExit(1) from None
    except OSError as err:
        if err.errno != errno.EPIPE:
            raise
        from typer._click.utils import PacifyFlushWrapper

        sys.stdout = PacifyFlushWrapper(sys.stdout)
        sys.stderr = PacifyFlushWrapper(sys.stderr)
        raise SystemExit(1) from None
    except Exception as err:
        typer = sys.modules.get("typer")  # imported by cli._common.fail, which raised it
        if typer is not None and isinstance(err, typer.Exit):
            raise SystemExit(err.exit_code) from None
        raise
    raise SystemExit(status)
