"""shmguard policy: the generated Kyverno, Gatekeeper and VAP objects validate against their
schemas, carry the linter's patterns and the sizing policy's size, and their CEL and Rego give
``check``'s verdicts on every pod of the corpus and on one pod per rule."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from policy_eval import CORPUS, CelPolicy, RegoPolicy, check_codes, corpus_pods
from typer.testing import CliRunner

from shmguard.cli import app
from shmguard.estimate.policy import DEFAULT_SHM_SIZE, Policy
from shmguard.fleet.policy import Engine, Mode, gatekeeper, generate, kyverno, rego, vap
from shmguard.sources.tokenmatch import COMMAND_PATTERN, IMAGE_PATTERN
from shmguard.units import GiB, format_k8s_quantity, parse_k8s_quantity

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]


def _schema(name: str) -> dict[str, Any]:
    with gzip.open(FIXTURES / f"{name}.schema.json.gz") as f:
        schema: dict[str, Any] = json.load(f)
    return schema


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields of ``value`` its structural schema does not declare (the API server prunes
    them silently, so jsonschema alone would not notice a misspelt or misplaced field)."""
    out: list[str] = []
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return out
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            if props is not None and k in props:
                out += unknown_fields(v, props[k], f"{path}.{k}")
            elif isinstance(extra, dict):
                out += unknown_fields(v, extra, f"{path}.{k}")
            elif props is not None and not extra:
                out.append(f"{path}.{k}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            out += unknown_fields(v, schema["items"], f"{path}[{i}]")
    return out


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


@pytest.mark.parametrize("mode", list(Mode))
def test_vap_validates_against_kubernetes_1_37(mode: Mode) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    docs = _docs(generate(Engine.VAP, mode))
    assert [d["kind"] for d in docs] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    for d in docs:
        kv.validate(d, "1.37", strict=True)
    actions = {Mode.ENFORCE: ["Deny"], Mode.AUDIT: ["Audit"], Mode.WARN: ["Warn", "Audit"]}
    assert docs[1]["spec"]["validationActions"] == actions[mode]
    assert docs[1]["spec"]["policyName"] == docs[0]["metadata"]["name"]


@pytest.mark.parametrize("mode", list(Mode))
def test_kyverno_validates_against_its_crd(mode: Mode) -> None:
    (doc,) = _docs(generate(Engine.KYVERNO, mode))
    jsonschema.validate(doc, _schema("kyverno-clusterpolicy-v1"))
    assert unknown_fields(doc, _schema("kyverno-clusterpolicy-v1")) == []
    rules = doc["spec"]["rules"]
    actions = {r["validate"]["failureAction"] for r in rules if "validate" in r}
    assert actions == {"Enforce" if mode is Mode.ENFORCE else "Audit"}
    assert doc["spec"].get("emitWarning", False) is (mode is Mode.WARN)
    mutates = [r for r in rules if "mutate" in r]
    assert len(mutates) == (0 if mode is Mode.AUDIT else 1)


def test_kyverno_schema_rejects_a_broken_policy() -> None:
    """The vendored schema is not vacuous: a wrong failureAction fails it, and a field put
    where Kyverno has none is found."""
    (doc,) = kyverno(Mode.ENFORCE)
    doc["spec"]["rules"][0]["validate"]["failureAction"] = "Reject"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, _schema("kyverno-clusterpolicy-v1"))
    (doc,) = kyverno(Mode.ENFORCE)
    doc["spec"]["rules"][0]["validate"]["cel"]["messageExpresion"] = "'x'"
    doc["spec"]["rules"][-1]["mutate"]["foreach"][0]["precondition"] = {}
    assert unknown_fields(doc, _schema("kyverno-clusterpolicy-v1")) == [
        ".spec.rules[0].validate.cel.messageExpresion",
        ".spec.rules[7].mutate.foreach[0].precondition",
    ]


def test_kyverno_mutate_writes_the_policy_size_not_100mi() -> None:
    (doc,) = kyverno(Mode.WARN, Policy(default_shm_size=2 * GiB))
    (mutate,) = [r for r in doc["spec"]["rules"] if "mutate" in r]
    patch = mutate["mutate"]["foreach"][0]["patchStrategicMerge"]["spec"]
    assert patch["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}
    ]
    assert patch["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert "100Mi" not in generate(Engine.KYVERNO)
    (default,) = kyverno()
    (m,) = [r for r in default["spec"]["rules"] if "mutate" in r]
    assert (
        m["mutate"]["foreach"][0]["patchStrategicMerge"]["spec"]["volumes"][0]["emptyDir"][
            "sizeLimit"
        ]
        == "1Gi"
    )


@pytest.mark.parametrize("mode", list(Mode))
def test_gatekeeper_template_and_constraint(mode: Mode) -> None:
    template, constraint = _docs(generate(Engine.GATEKEEPER, mode))
    jsonschema.validate(template, _schema("gatekeeper-constrainttemplate-v1"))
    assert unknown_fields(template, _schema("gatekeeper-constrainttemplate-v1")) == []
    kind = template["spec"]["crd"]["spec"]["names"]["kind"]
    assert template["metadata"]["name"] == kind.lower()  # Gatekeeper requires it
    assert constraint["kind"] == kind
    assert constraint["apiVersion"] == "constraints.gatekeeper.sh/v1beta1"
    params = template["spec"]["crd"]["spec"]["validation"]["openAPIV3Schema"]
    jsonschema.validate(constraint["spec"]["parameters"], params)
    assert constraint["spec"]["parameters"] == {"shmSize": "1Gi"}
    action = {Mode.ENFORCE: "deny", Mode.AUDIT: "dryrun", Mode.WARN: "warn"}[mode]
    assert constraint["spec"]["enforcementAction"] == action
    assert template["spec"]["targets"][0]["rego"] == rego()


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_patterns_come_from_the_linter() -> None:
    """Every engine's objects carry the patterns compiled from the token lists (as loaded:
    YAML may fold a long quoted scalar at a space, which reads back as the space)."""
    for engine in Engine:
        text = generate(engine)
        loaded = "\n".join(_strings(_docs(text)))
        assert IMAGE_PATTERN in loaded and COMMAND_PATTERN in loaded, engine
        assert "heuristic" in text and "live cluster" in text


def test_limits_are_stated_in_the_files() -> None:
    assert "cannot mutate" in generate(Engine.VAP)
    assert "1.29" in generate(Engine.VAP)
    assert "cannot size /dev/shm from the memory limit" in generate(Engine.GATEKEEPER)
    assert "does not cap it by the memory limit" in generate(Engine.KYVERNO)


def test_deployed_vap_is_the_generator_output() -> None:
    path = REPO / "deploy" / "webhook" / "validating-admission-policy.yaml"
    assert path.read_text(encoding="utf-8") == generate(Engine.VAP, Mode.WARN)


def _pod(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}, "spec": spec}


_TORCH = {"name": "train", "image": "nvcr.io/nvidia/pytorch:24.01-py3", "command": ["torchrun"]}
_SHM = {"name": "dshm", "mountPath": "/dev/shm"}

#: One pod per rule (and clean ones), with the codes check reports for it.
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("no dshm", _pod({"containers": [_TORCH]}), {"SHM001"}),
    (
        "nccl env only",
        _pod(
            {
                "containers": [
                    {"name": "a", "image": "x", "env": [{"name": "NCCL_DEBUG", "value": "INFO"}]}
                ]
            }
        ),
        {"SHM001"},
    ),
    (
        "stated container",
        _pod({"containers": [_TORCH]}, annotations={"shmguard.io/workload": "container"}),
        set(),
    ),
    ("ray pod", _pod({"containers": [_TORCH]}, labels={"ray.io/node-type": "worker"}), {"SHM001"}),
    (
        "sized",
        _pod(
            {
                "containers": [{**_TORCH, "volumeMounts": [_SHM]}],
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
            }
        ),
        set(),
    ),
    (
        "not mounted",
        _pod(
            {
                "containers": [
                    _TORCH,
                    {"name": "side", "image": "busybox", "volumeMounts": [_SHM]},
                ],
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
            }
        ),
        {"SHM007"},
    ),
    (
        "medium memory",
        _pod(
            {
                "containers": [{**_TORCH, "volumeMounts": [_SHM]}],
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "memory"}}],
            }
        ),
        {"SHM006"},
    ),
    (
        "milli",
        _pod(
            {
                "containers": [{**_TORCH, "volumeMounts": [_SHM]}],
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64m"}}],
            }
        ),
        {"SHM004"},
    ),
    (
        "unbounded",
        _pod(
            {
                "containers": [{**_TORCH, "volumeMounts": [_SHM]}],
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
            }
        ),
        {"SHM008"},
    ),
    (
        "above limit",
        _pod(
            {
                "containers": [
                    {**_TORCH, "volumeMounts": [_SHM], "resources": {"limits": {"memory": "2Gi"}}}
                ],
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Gi"}}],
            }
        ),
        {"SHM009"},
    ),
    ("hostIPC", _pod({"hostIPC": True, "containers": [_TORCH]}), {"SHM023"}),
    (
        "hostPath",
        _pod(
            {
                "containers": [{**_TORCH, "volumeMounts": [_SHM]}],
                "volumes": [{"name": "dshm", "hostPath": {"path": "/dev/shm"}}],
            }
        ),
        {"SHM023"},
    ),
]


@pytest.fixture(scope="module")
def cel() -> CelPolicy:
    pytest.importorskip("celpy")
    return CelPolicy()


@pytest.fixture(scope="module")
def opa() -> RegoPolicy:
    pytest.importorskip("regopy")
    return RegoPolicy()


@pytest.mark.parametrize(("name", "pod", "codes"), CASES, ids=[c[0] for c in CASES])
def test_one_pod_per_rule(
    cel: CelPolicy, opa: RegoPolicy, name: str, pod: dict[str, Any], codes: set[str]
) -> None:
    assert check_codes(pod) == codes
    assert cel.failing(pod) == codes
    assert opa.failing(pod) == codes


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")
def test_cel_and_rego_agree_with_check_on_the_corpus(cel: CelPolicy, opa: RegoPolicy) -> None:
    pods = list(corpus_pods())
    assert len(pods) >= 300
    found: dict[str, int] = {}
    for where, pod in pods:
        codes = check_codes(pod)
        for c in codes:
            found[c] = found.get(c, 0) + 1
        assert cel.failing(pod) == codes, where
        assert opa.failing(pod) == codes, where
    assert found["SHM001"] >= 10 and found["SHM008"] >= 5  # the comparison is not vacuous


def test_vap_messages_are_cel_strings(cel: CelPolicy) -> None:
    """The messageExpressions compile and give the code and the containers' names."""
    import celpy

    env = celpy.Environment()
    (policy, _) = vap()
    msg = policy["spec"]["validations"][0]["messageExpression"]
    pod = CASES[0][1]
    act: dict[str, Any] = {"object": celpy.json_to_cel(pod)}
    act["variables"] = cel.variables(pod)
    from policy_eval import cel_functions

    out = env.program(env.compile(msg), functions=cel_functions()).evaluate(act)
    assert str(out).startswith("SHM001 ml-workload-without-shm-size: container(s) train run")
    assert "sizeLimit: 1Gi" in str(out)


def test_cli_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "p.yaml"
    r = CliRunner().invoke(
        app, ["policy", "--engine", "gatekeeper", "--mode", "enforce", "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert out.read_text() == generate(Engine.GATEKEEPER, Mode.ENFORCE)
    r = CliRunner().invoke(app, ["policy", "--engine", "vap"])
    assert r.exit_code == 0 and r.stdout == generate(Engine.VAP)


def test_cli_bad_output_and_engine(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["policy", "--engine", "vap", "-o", str(tmp_path / "no" / "x")])
    assert r.exit_code == 2
    assert "--output" in r.output and "cannot write" in r.output
    r = CliRunner().invoke(app, ["policy", "--engine", "opa"])
    assert r.exit_code == 2


def test_cli_size_from_configuration(tmp_path: Path) -> None:
    conf = tmp_path / ".shmguard.toml"
    conf.write_text('[sizes]\ndefault-shm-size = "2g"\n')
    r = CliRunner().invoke(app, ["policy", "--engine", "kyverno", "--config", str(conf)])
    assert r.exit_code == 0, r.output
    assert "sizeLimit: 2Gi" in r.stdout
    assert gatekeeper(policy=Policy(default_shm_size=2 * GiB))[1]["spec"]["parameters"] == {
        "shmSize": "2Gi"
    }


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")
def test_kyverno_mutate_fixes_the_pods_check_flags(cel: CelPolicy) -> None:
    """The add-dshm rule, run per Kyverno's documented semantics, picks exactly the ML
    containers with nothing at /dev/shm (the CEL ``bare`` variable, in pods without hostIPC),
    and after it check reports no SHM001 or SHM007 on the pod."""
    pytest.importorskip("jmespath")
    from policy_eval import KyvernoMutate

    (doc,) = kyverno()
    (rule,) = [r for r in doc["spec"]["rules"] if "mutate" in r]
    mutate = KyvernoMutate(rule)
    changed = 0
    size = parse_k8s_quantity(format_k8s_quantity(DEFAULT_SHM_SIZE))
    low = 0
    for where, pod in [*corpus_pods(), *((c[0], c[1]) for c in CASES), LOW_LIMIT]:
        v = cel.variables(pod)
        bare = [] if v["hostIPC"] else [c for c in v["bare"]]
        # a memory limit under the size is left alone: patched, the pod would fail SHM009
        fits = [c for c in bare if _limit(c) is None or _limit(c) >= size]
        low += len(bare) - len(fits)
        want = [str(c["name"]) for c in fits]
        assert mutate.selected(pod) == want, where
        if want:
            changed += 1
            patched = mutate.apply(pod)
            after = check_codes(patched)
            assert not after & {"SHM007"}, where
            assert "SHM001" not in after or len(fits) < len(bare), where
            assert "SHM009" not in cel.failing(patched) - cel.failing(pod), where
    assert changed >= 20 and low >= 1
    # the pod whose 512Mi limit is under the 1Gi size: untouched, still SHM001, no SHM009
    assert mutate.selected(LOW_LIMIT[1]) == [] and "SHM001" in cel.failing(LOW_LIMIT[1])


#: A PyTorch pod with no /dev/shm and a memory limit under the policy's size.
LOW_LIMIT = (
    "low-limit",
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "low"},
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                    "command": ["torchrun", "train.py"],
                    "resources": {"limits": {"memory": "512Mi"}},
                }
            ]
        },
    },
)


def _limit(c: Any) -> Any:
    """The container's memory limit as a number (``c``: a CEL map value), or None."""
    limits = c.get("resources", {}).get("limits", {})  # celpy's get needs a default
    return parse_k8s_quantity(str(limits["memory"])) if "memory" in limits else None


def test_rego_messages_name_the_container_and_size(opa: RegoPolicy) -> None:
    pod = CASES[0][1]
    msg = (
        "SHM001 ml-workload-without-shm-size: container train runs PyTorch, NCCL or an "
        "inference server with no volume at /dev/shm: it gets the runtime's 64 MiB. Mount an "
        "emptyDir {medium: Memory, sizeLimit: SIZE} at /dev/shm."
    )
    assert opa.messages(pod, {"shmSize": "2Gi"}) == [msg.replace("SIZE", "2Gi")]
    assert opa.messages(pod) == [msg.replace("SIZE", "1Gi")]  # no parameters: the default


def test_rego_leaves_updates_alone(opa: RegoPolicy) -> None:
    """Gatekeeper sends UPDATEs (a finalizer's removal): denying one would keep a controller
    from deleting a pod admitted before the policy. CREATE and audit (no operation) report."""
    pod = LOW_LIMIT[1]
    assert opa.messages(pod, {"shmSize": "1Gi"}, "UPDATE") == []
    for op in ("CREATE", None):
        assert [m.split(" ", 1)[0] for m in opa.messages(pod, {"shmSize": "1Gi"}, op)] == ["SHM001"]
