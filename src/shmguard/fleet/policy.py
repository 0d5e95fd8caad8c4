"""``shmguard policy``: the SHM rules as policies for the engine a cluster already runs.

:func:`generate` writes the rules of :mod:`shmguard.fleet.policy_rules` as

* ``vap``: a ValidatingAdmissionPolicy and its Binding (``admissionregistration.k8s.io/v1``,
  Kubernetes 1.30+; SHM009's ``quantity()`` needs 1.29+). It validates the final pod, after
  every mutating webhook (kubernetes.io/docs/reference/access-authn-authz/
  validating-admission-policy); it cannot mutate.
* ``kyverno``: a ClusterPolicy (``kyverno.io/v1``) with one CEL validate rule per code
  (``validate.cel``, Kyverno 1.11+; ``validate.failureAction``, 1.13+) and, outside audit
  mode, a mutate rule that mounts a memory emptyDir at /dev/shm in the ML containers that have
  none, sized by the one size decision on no evidence, the sizing policy's default
  (:func:`~shmguard.fleet.policy_rules.policy_shm_size`, 1 GiB): never
  Kyverno's library ``add-emptydir-sizelimit`` value of 100Mi, which would cause the very bus
  errors it means to prevent. The mutate rule writes one fixed size: it does not cap it by
  the container's memory limit as ``check --fix`` does, and it leaves alone a container whose
  memory limit is below that size (the patched pod would fail SHM009, and be rejected in
  enforce mode; Kyverno's numeric operators compare quantity strings as quantities,
  kyverno pkg/engine/variables/operator/numeric.go); such a container still fails SHM001.
* ``gatekeeper``: a ConstraintTemplate (Rego, ``templates.gatekeeper.sh/v1``) and its
  Constraint. Validation only: Gatekeeper's mutation (Assign) sets static values and cannot
  size a volume from the memory limit or test a container's image, so none is generated.
  Its webhook sends UPDATEs as well as CREATEs and a Constraint cannot choose operations, so
  the Rego finds no violation in an UPDATE (as the VAP and Kyverno match CREATE only).

Modes: ``enforce`` rejects the pod; ``audit`` records (VAP ``Audit``, Kyverno ``Audit``,
Gatekeeper ``dryrun``); ``warn`` (the default) returns admission warnings and records (VAP
``[Warn, Audit]``, Kyverno ``Audit`` with ``emitWarning``, Gatekeeper ``warn``). Warnings
reach whatever created the pod (a controller, for pods of a Deployment or Job), not a person.

The generated files were validated against schemas (the VAP with kubernetes-validate, the
Kyverno and Gatekeeper objects against their CRDs' OpenAPI schemas) and their CEL and Rego
evaluated with cel-python and regopy (tests/fleet); none was run in a real API server,
Kyverno or Gatekeeper.
"""

from __future__ import annotations

from typing import Any

import yaml

from shmguard.estimate.policy import Policy
from shmguard.fix.k8s import VOLUME_NAME, mount_entry, volume_entry
from shmguard.fleet.engines import Engine as Engine
from shmguard.fleet.engines import Mode as Mode
from shmguard.fleet.policy_rules import (
    CEL_VARIABLES,
    REGO_HELPERS,
    RULES,
    PodRule,
    policy_shm_size,
)

#: Namespaces no generated policy matches (the webhook skips them too).
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
#: metadata.name of every generated object.
POLICY_NAME = "shmguard-shm"
_GK_KIND = "ShmguardShm"
_DEFAULT = Policy()


def _rule_names() -> dict[str, str]:
    from shmguard.lint.config import RULES as LINT_RULES

    return {r.code: r.name for r in LINT_RULES}


def _title(rule: PodRule) -> str:
    return f"{rule.code} {_rule_names()[rule.code]}"


def _message(rule: PodRule, size: str) -> str:
    return f"'{_title(rule)}: ' + " + rule.message.replace("SIZE", size)


def _cel_variables() -> list[dict[str, str]]:
    return [{"name": n, "expression": e} for n, e in CEL_VARIABLES]


def _validation(rule: PodRule, size: str) -> dict[str, str]:
    return {"expression": rule.cel, "messageExpression": _message(rule, size), "reason": "Invalid"}


def vap(mode: Mode = Mode.WARN, policy: Policy = _DEFAULT) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its Binding, as dicts."""
    size = policy_shm_size(policy)
    actions = {Mode.ENFORCE: ["Deny"], Mode.AUDIT: ["Audit"], Mode.WARN: ["Warn", "Audit"]}
    ns = {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": list(SYSTEM_NAMESPACES),
            }
        ]
    }
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": POLICY_NAME},
            "spec": {
                "failurePolicy": "Ignore",
                "matchConstraints": {
                    "namespaceSelector": ns,
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ],
                },
                "variables": _cel_variables(),
                "validations": [_validation(r, size) for r in RULES],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POLICY_NAME},
            "spec": {"policyName": POLICY_NAME, "validationActions": actions[mode]},
        },
    ]


def _kyverno_match() -> dict[str, Any]:
    return {
        "match": {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE"]}}]},
        "exclude": {"any": [{"resources": {"namespaces": list(SYSTEM_NAMESPACES)}}]},
    }


def _kyverno_mutate(size: str) -> dict[str, Any]:
    from shmguard.sources.tokenmatch import COMMAND_PATTERN, IMAGE_PATTERN
    from shmguard.sources.workload import ENV_PREFIXES

    cmd = "to_lower(join(' ', [element.command || `[]`, element.args || `[]`][]))"
    stated = "{{ request.object.metadata.annotations.\"shmguard.io/workload\" || '' }}"
    return {
        "name": "add-dshm",
        **_kyverno_match(),
        "preconditions": {
            "all": [
                {
                    "key": "{{ request.object.spec.hostIPC || `false` }}",
                    "operator": "Equals",
                    "value": False,
                },
            ]
        },
        "mutate": {
            "foreach": [
                {
                    "list": "request.object.spec.containers",
                    "preconditions": {
                        "all": [
                            {
                                "key": ["/dev/shm", "/dev/shm/"],
                                "operator": "AllNotIn",
                                "value": "{{ element.volumeMounts[].mountPath || `[]` }}",
                            },
                            {"key": stated, "operator": "NotEquals", "value": "container"},
                            # a memory limit below the size: the patched pod would fail SHM009
                            # (and be OOM-killed before /dev/shm is full); Kyverno compares
                            # two quantity strings as quantities (its numeric operators)
                            {
                                "key": f"{{{{ element.resources.limits.memory || '{size}' }}}}",
                                "operator": "GreaterThanOrEquals",
                                "value": size,
                            },
                        ],
                        "any": [
                            {"key": stated, "operator": "Equals", "value": "ml"},
                            {
                                "key": f"{{{{ regex_match('{IMAGE_PATTERN}', "
                                "to_lower(element.image || '')) }}",
                                "operator": "Equals",
                                "value": True,
                            },
                            {
                                "key": f"{{{{ regex_match('{COMMAND_PATTERN}', {cmd}) }}}}",
                                "operator": "Equals",
                                "value": True,
                            },
                            {
                                "key": "{{ element.env[].name || `[]` }}",
                                "operator": "AnyIn",
                                "value": [f"{p}*" for p in ENV_PREFIXES],
                            },
                        ],
                    },
                    "patchStrategicMerge": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "{{ element.name }}",
                                    "volumeMounts": [mount_entry(VOLUME_NAME)],
                                }
                            ],
                            "volumes": [volume_entry(VOLUME_NAME, size)],
                        }
                    },
                }
            ]
        },
    }


def kyverno(mode: Mode = Mode.WARN, policy: Policy = _DEFAULT) -> list[dict[str, Any]]:
    """The Kyverno ClusterPolicy, as a one-item list of dicts."""
    size = policy_shm_size(policy)
    action = "Enforce" if mode is Mode.ENFORCE else "Audit"
    rules: list[dict[str, Any]] = [
        {
            "name": _title(r).lower().replace(" ", "-"),
            **_kyverno_match(),
            "validate": {
                "failureAction": action,
                "cel": {"variables": _cel_variables(), "expressions": [_validation(r, size)]},
            },
        }
        for r in RULES
    ]
    if mode is not Mode.AUDIT:
        rules.append(_kyverno_mutate(size))
    spec: dict[str, Any] = {"background": True, "rules": rules}
    if mode is Mode.WARN:
        spec["emitWarning"] = True
    return [
        {
            "apiVersion": "kyverno.io/v1",
            "kind": "ClusterPolicy",
            "metadata": {
                "name": POLICY_NAME,
                "annotations": {
                    "policies.kyverno.io/title": "/dev/shm for PyTorch pods (shmguard)",
                    "policies.kyverno.io/category": "Best Practices",
                    "policies.kyverno.io/subject": "Pod",
                    "policies.kyverno.io/description": (
                        "shmguard's SHM rules for pods: a PyTorch, NCCL or inference container "
                        "needs a sized memory emptyDir at /dev/shm, written correctly."
                    ),
                },
            },
            "spec": spec,
        }
    ]


def rego() -> str:
    """The Rego module of the Gatekeeper template (package ``shmguardshm``)."""
    bodies = "\n".join(
        f'violation contains {{"msg": msg}} if {{\n    not updated\n    {r.rego}\n}}\n'
        for r in RULES
    )
    return f"package shmguardshm\n\nimport rego.v1\n\n{REGO_HELPERS}\n{bodies}"


def gatekeeper(mode: Mode = Mode.WARN, policy: Policy = _DEFAULT) -> list[dict[str, Any]]:
    """The Gatekeeper ConstraintTemplate and its Constraint, as dicts."""
    size = policy_shm_size(policy)
    action = {Mode.ENFORCE: "deny", Mode.AUDIT: "dryrun", Mode.WARN: "warn"}[mode]
    template = {
        "apiVersion": "templates.gatekeeper.sh/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": _GK_KIND.lower()},
        "spec": {
            "crd": {
                "spec": {
                    "names": {"kind": _GK_KIND},
                    "validation": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "shmSize": {
                                    "type": "string",
                                    "description": "The /dev/shm size messages suggest.",
                                }
                            },
                        }
                    },
                }
            },
            "targets": [{"target": "admission.k8s.gatekeeper.sh", "rego": rego()}],
        },
    }
    constraint = {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": _GK_KIND,
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "enforcementAction": action,
            "match": {
                "kinds": [{"apiGroups": [""], "kinds": ["Pod"]}],
                "excludedNamespaces": list(SYSTEM_NAMESPACES),
            },
            "parameters": {"shmSize": size},
        },
    }
    return [template, constraint]


_BUILD = {Engine.VAP: vap, Engine.KYVERNO: kyverno, Engine.GATEKEEPER: gatekeeper}

_LIMITS = {
    Engine.VAP: (
        "ValidatingAdmissionPolicy: Kubernetes 1.30+ (admissionregistration.k8s.io/v1);",
        "SHM009 uses the CEL quantity library (Kubernetes 1.29+). It validates the final pod",
        "(after the shmguard webhook) and cannot mutate.",
    ),
    Engine.KYVERNO: (
        "Kyverno 1.13+ (validate.cel, validate.failureAction). The add-dshm mutate rule",
        "writes one size, the sizing policy's default; it does not cap it by the memory limit",
        "as `shmguard check --fix` does, skips containers whose memory limit is below it (they",
        "still fail SHM001), and it is left out in audit mode.",
    ),
    Engine.GATEKEEPER: (
        "Gatekeeper (Rego v1 syntax, import rego.v1: OPA 0.59+). Validation only: its",
        "mutation sets static values and cannot size /dev/shm from the memory limit or pick",
        "containers by image.",
        "SHM009 compares with OPA units.parse_bytes; milli quantities are left to SHM004.",
    ),
}


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def generate(engine: Engine, mode: Mode = Mode.WARN, policy: Policy = _DEFAULT) -> str:
    """The YAML text (several documents) of ``engine``'s policy objects, with a header
    comment stating the engine's limits, the mode and the size, and that detection of
    PyTorch workloads (by image and command tokens and environment prefixes) is heuristic."""
    docs = _BUILD[engine](mode, policy)
    size = policy_shm_size(policy)
    head = [
        f"Generated by `shmguard policy --engine {engine.value} --mode {mode.value}`.",
        "shmguard's SHM rules for pods (SHM001 SHM004 SHM006 SHM007 SHM008 SHM009 SHM023;",
        "`shmguard rule CODE` explains each). PyTorch, NCCL and inference containers are",
        "detected by image and command tokens and NCCL_/TORCH_ environment names: a heuristic.",
        f"Suggested /dev/shm size: {size} (the sizing policy's default).",
        *_LIMITS[engine],
        "Not exercised against a live cluster: validated against schemas and evaluated",
        "with cel-python / regopy in shmguard's tests.",
    ]
    body = "---\n".join(
        yaml.dump(d, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True) for d in docs
    )
    return "".join(f"# {line}\n" for line in head) + body
