"""Fleet-wide /dev/shm sizing: the admission webhook, policy-engine output, cluster checks.

Issue 13. The webhook (:mod:`shmguard.fleet.admission`, :mod:`shmguard.fleet.webhook`),
the generated policies (:mod:`shmguard.fleet.policy`) and ``check --cluster``
(:mod:`shmguard.fleet.cluster`) share the names in :mod:`shmguard.fleet.names`, so that
``check --cluster`` can tell which pods the webhook sizes.
"""
