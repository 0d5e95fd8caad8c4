"""Running commands under limits and measuring them: sandbox, sampler, probe.

* :mod:`~shmguard.measure.sandbox`: a private tmpfs /dev/shm, PID namespace, cgroup limits
  (the namespaces themselves are set up by the stdlib-only helper ``_nsinit.py``);
* :mod:`~shmguard.measure.cgroups`: which child cgroups to create, v1 or v2;
* :mod:`~shmguard.measure.sampler`: the one /dev/shm sampler (statvfs + owners + RSS + cgroup);
  its typed results in :mod:`~shmguard.measure.timeline`, its slow loop in
  :mod:`~shmguard.measure.owners`; ``ShmSampler.watcher()`` for long-running watchers
  (:mod:`shmguard.monitor`, the PyTorch guard);
* :mod:`~shmguard.measure.outcome`: how a run ended and why (through the triage catalogue);
* :mod:`~shmguard.measure.stall`: the one stall observer (the failed-block baseline, the progress
  test, the process tree's CPU time) that every watcher feeds the stall verdict from;
* :mod:`~shmguard.measure.hang`: hang detection while it runs;
* :mod:`~shmguard.measure.run` (``measure``) and :mod:`~shmguard.measure.probe` (``probe``);
  the sizes they recommend come from :mod:`shmguard.estimate`.
* :mod:`~shmguard.measure.watched` (``run --watch``): the command under the minimal init of
  :mod:`~shmguard.measure.supervise`, the sampler, the stall verdict and the classifier beside
  it; :mod:`~shmguard.measure.execute`: ``run``'s ``exec`` and the signals it holds.

Submodules are imported explicitly; this package imports nothing, so the CLI stays fast.
"""
