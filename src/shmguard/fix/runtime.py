"""One :class:`~shmguard.model.fix.Change` in the syntax of ``docker run``/``podman run`` and
Compose: the flag or entry a fix writes, whether ``check --fix`` splices it into a file
(:func:`shmguard.lint.config._base.change_edit`) or a snippet prints it
(:mod:`shmguard.fix.snippets`), so both write the same text.

Syntax (../shared/research/config_formats.md): ``--shm-size`` and ``--memory`` take go-units
(binary, ``2g``); Compose ``shm_size`` and ``mem_limit`` the same strings, quoted; ``--cpus``
and ``cpus`` a decimal number of CPUs.
"""

from __future__ import annotations

from shmguard.model.fix import Change, Setting
from shmguard.units import format_docker_size

_FLAGS = {
    Setting.SHM_SIZE: ("--shm-size", "shm_size"),
    Setting.SHM_MOUNT: ("--shm-size", "shm_size"),
    Setting.MEMORY_LIMIT: ("--memory", "mem_limit"),
    Setting.CPU_LIMIT: ("--cpus", "cpus"),
}


def cpus(millis: int) -> str:
    """CPUs as Docker's ``--cpus`` and Compose's ``cpus`` take them: ``2``, ``1.5``."""
    return f"{millis / 1000:.3f}".rstrip("0").rstrip(".")


def run_flag(change: Change) -> str:
    """``change`` as a ``docker run``/``podman run`` flag: ``--shm-size=1g``,
    ``--memory=3g``, ``--cpus=1.5``."""
    flag = _FLAGS[change.setting][0]
    if change.setting is Setting.CPU_LIMIT:
        return f"{flag}={cpus(change.value)}"
    return f"{flag}={format_docker_size(change.value)}"


def compose_entry(change: Change) -> str:
    """``change`` as a Compose service entry: ``shm_size: "1g"``, ``mem_limit: "3g"``,
    ``cpus: 1.5``."""
    key = _FLAGS[change.setting][1]
    if change.setting is Setting.CPU_LIMIT:
        return f"{key}: {cpus(change.value)}"
    return f'{key}: "{format_docker_size(change.value)}"'
