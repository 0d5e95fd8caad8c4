"""The one fix plan per runtime and its emitters (STYLE.md, Architecture: ``fix/``).

:mod:`shmguard.fix.k8s` decides what a Kubernetes pod needs for a /dev/shm (reuse a memory
volume or add ``dshm``, which containers get a mount, memory limits and requests) from a small
neutral pod description that both pod models produce (check's YAML views, the webhook's JSON
pods), and writes that plan as a JSONPatch, a strategic merge patch or the volume and mount
entries; :mod:`shmguard.fix.k8s_yaml` writes it as YAML edits (``check --fix``, ``recommend
--manifests``) with the splices of :mod:`shmguard.fix.yamledit`. :mod:`shmguard.fix.runtime`
writes one :class:`~shmguard.model.fix.Change` in each runtime's syntax (a ``docker run``
flag, a Compose entry). fix/ sits above sources/, estimate/ and model/ and below lint/ (whose
rules build their edits from it); it imports no rule, host, fleet face or renderer.
"""

from __future__ import annotations
