"""The volume names every shmguard writer of a Kubernetes /dev/shm uses.

A leaf module (no import of shmguard), so the snippet renderer can name the volume without
loading the YAML pod model that :mod:`shmguard.fix.k8s` reads (``doctor --json`` imports no
YAML parser: tests/doctor/test_doctor_cli.py).
"""

from __future__ import annotations

#: The name of the memory-backed emptyDir every shmguard writer adds (check --fix, recommend,
#: the webhook, the Kyverno mutate, the snippets).
VOLUME_NAME = "dshm"
#: Names older releases' webhook gave the volume it added (pods created then still carry it).
LEGACY_VOLUME_NAMES = ("shmguard-dshm",)
