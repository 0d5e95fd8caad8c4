"""The explicit list of SHM rules (``shmguard check``), in code order.

Codes are stable and never reused. They follow the rule table of
../shared/research/config_formats.md ("Lint rules we could implement"), so codes of rules not
built yet (SHM015, SHM027, SHM028, ...) stay reserved for the rule that table gives them.
"""

from __future__ import annotations

from shmguard.lint.config import (
    shm001_ml_workload_without_shm_size,
    shm002_kubernetes_suffix_in_docker_size,
    shm003_docker_suffix_in_quantity,
    shm004_milli_memory_quantity,
    shm005_decimal_quantity_suffix,
    shm006_emptydir_medium_not_memory,
    shm007_dshm_not_mounted,
    shm008_unbounded_memory_emptydir,
    shm009_size_limit_above_memory_limit,
    shm010_shm_size_near_memory_limit,
    shm011_shm_size_ignored_by_ipc,
    shm012_shm_size_ignored_by_mount,
    shm013_ipc_donor_not_shareable,
    shm014_compose_float_size,
    shm016_zero_shm_size,
    shm017_deploy_memory_integer,
    shm018_mem_limit_differs_from_deploy,
    shm019_shm_size_only_under_build,
    shm020_swarm_ignores_shm,
    shm021_tmpfs_size_syntax,
    shm022_daemon_shm_size_syntax,
    shm023_host_shm_shared,
    shm024_ipc_sysctl_for_shm,
    shm025_shm_remount,
    shm026_kuberay_shm,
    shm029_ecs_shm_size_units,
    shm033_policy_shrinks_dev_shm,
)
from shmguard.lint.config._base import CheckOptions, Unit
from shmguard.lint.engine import Rule

RULES: tuple[Rule[Unit, CheckOptions], ...] = (
    shm001_ml_workload_without_shm_size.RULE,
    shm002_kubernetes_suffix_in_docker_size.RULE,
    shm003_docker_suffix_in_quantity.RULE,
    shm004_milli_memory_quantity.RULE,
    shm005_decimal_quantity_suffix.RULE,
    shm006_emptydir_medium_not_memory.RULE,
    shm007_dshm_not_mounted.RULE,
    shm008_unbounded_memory_emptydir.RULE,
    shm009_size_limit_above_memory_limit.RULE,
    shm010_shm_size_near_memory_limit.RULE,
    shm011_shm_size_ignored_by_ipc.RULE,
    shm012_shm_size_ignored_by_mount.RULE,
    shm013_ipc_donor_not_shareable.RULE,
    shm014_compose_float_size.RULE,
    shm016_zero_shm_size.RULE,
    shm017_deploy_memory_integer.RULE,
    shm018_mem_limit_differs_from_deploy.RULE,
    shm019_shm_size_only_under_build.RULE,
    shm020_swarm_ignores_shm.RULE,
    shm021_tmpfs_size_syntax.RULE,
    shm022_daemon_shm_size_syntax.RULE,
    shm023_host_shm_shared.RULE,
    shm024_ipc_sysctl_for_shm.RULE,
    shm025_shm_remount.RULE,
    shm026_kuberay_shm.RULE,
    shm029_ecs_shm_size_units.RULE,
    shm033_policy_shrinks_dev_shm.RULE,
)
