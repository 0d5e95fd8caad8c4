"""Host facts read through an injectable root: /dev/shm, cgroups, runtime, limits, holders."""
