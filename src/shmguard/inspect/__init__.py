"""Host facts read through an injectable root: /dev/shm, cgroups, runtime, ulimits, holders, GPUs."""
