"""The explicit list of ENV rules, in code order. Codes are stable and never reused."""

from __future__ import annotations

from shmguard.lint.engine import Rule
from shmguard.lint.env import (
    env001_runtime_default_shm_size,
    env002_shm_free_below_require,
    env003_shm_usage_high,
    env004_shm_exceeds_memory_limit,
    env005_memory_margin_low,
    env006_nofile_low,
    env007_oom_kills_recorded,
    env008_shm_missing,
    env009_shm_not_tmpfs,
    env010_shm_unsized_tmpfs,
    env011_leftover_torch_files,
)
from shmguard.lint.env._base import DoctorOptions
from shmguard.model.host import HostFacts

RULES: tuple[Rule[HostFacts, DoctorOptions], ...] = (
    env001_runtime_default_shm_size.RULE,
    env002_shm_free_below_require.RULE,
    env003_shm_usage_high.RULE,
    env004_shm_exceeds_memory_limit.RULE,
    env005_memory_margin_low.RULE,
    env006_nofile_low.RULE,
    env007_oom_kills_recorded.RULE,
    env008_shm_missing.RULE,
    env009_shm_not_tmpfs.RULE,
    env010_shm_unsized_tmpfs.RULE,
    env011_leftover_torch_files.RULE,
)
