"""How a :class:`~shmguard.measure.sandbox.Sandbox` starts its helper process.

The default (:func:`popen_helper`) runs ``python -I -S _nsinit.py SPEC`` as a child of
shmguard. A fork server (``shmguard tune``'s, :mod:`shmguard.torch.tuning.zygote`) instead
forks the helper from a process that has imported torch already, and hands back an object
that behaves like the :class:`subprocess.Popen` the sandbox would otherwise hold
(:class:`HelperProcess`), and runs the helper's code in that forked process: this module is
the helper's public face (:data:`HELPER_SIGNALS`, :data:`HELPER_FORWARD`, :data:`HELPER_EXIT_SETUP`,
:func:`run_helper`), so the fork server imports no private module of measure/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NoReturn, Protocol

from shmguard.measure import _nsinit

_HELPER = Path(__file__).with_name("_nsinit.py")
#: The signals the helper blocks to wait for them (those it forwards, and SIGCHLD); a process
#: about to become the helper blocks them first, as the helper's own start does.
HELPER_SIGNALS = _nsinit.WAIT_SET
#: The signals the helper forwards to the command.
HELPER_FORWARD = _nsinit.FORWARD
#: The helper's exit status when its setup failed.
HELPER_EXIT_SETUP = _nsinit.EXIT_SETUP


class HelperProcess(Protocol):
    """What the sandbox uses of its helper process: :class:`subprocess.Popen`'s ``pid``,
    ``stdout``/``stderr`` (the read ends of the helper's output pipes when piped, else None),
    ``returncode`` (None while it runs; ``-N`` when signal N ended it), ``poll()``,
    ``wait()`` and ``kill()``."""

    pid: int
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None
    returncode: Any

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


#: ``launch(helper_spec, piped, env)``: start the helper for ``helper_spec`` (the JSON-able
#: dict :mod:`shmguard.measure._nsinit` reads; its ``status_fd`` and ``gate_fd`` are this
#: process's descriptors to hand on), with piped stdout/stderr when ``piped``, in ``env``.
Launcher = Callable[[dict[str, Any], bool, dict[str, str]], HelperProcess]


def popen_helper(spec: dict[str, Any], piped: bool, env: dict[str, str]) -> HelperProcess:
    """The default :data:`Launcher`: a fresh ``python -I -S _nsinit.py`` child of shmguard."""
    pipe = subprocess.PIPE if piped else None
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(_HELPER), json.dumps(spec)],
        pass_fds=(spec["status_fd"], spec["gate_fd"]),
        stdout=pipe,
        stderr=pipe,
        env=env,
    )


def run_helper(spec: dict[str, Any], run: Callable[[list[str]], int]) -> NoReturn:
    """Be the helper for ``spec`` in this (forked) process, running the command with ``run``
    (called with the argv, returns the exit code) instead of ``execvp``; the process exits
    with the helper's status (:data:`HELPER_EXIT_SETUP` when its setup fails)."""
    try:
        _nsinit.main(["_nsinit", json.dumps(spec)], run=run)
    finally:
        os._exit(_nsinit.EXIT_SETUP)
