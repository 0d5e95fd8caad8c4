"""Watching /dev/shm over time: ``shmguard watch`` (:mod:`shmguard.monitor.watch`), on the one
sampler (:class:`shmguard.measure.sampler.ShmSampler`) and the one stall verdict
(:func:`shmguard.triage.stall.stall_verdict`)."""
