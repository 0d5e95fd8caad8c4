"""Long-running monitors on the one sampler (:class:`shmguard.measure.sampler.ShmSampler`) and
the one stall verdict (:func:`shmguard.triage.stall.stall_verdict`): ``shmguard watch``
(:mod:`shmguard.monitor.watch`) and the Prometheus exporter (:mod:`shmguard.monitor.exporter`)."""
