"""Evaluate the generated CEL (cel-python) and Rego (regopy) on pods, and ``check`` on the
same pods: helpers for tests/fleet. The Kubernetes CEL libraries cel-python lacks are given
here from their documentation: ``join`` (cel-go strings extension: joins a list of strings
with a separator), ``lowerAscii`` (the same extension: ASCII capitals lowered, every other
character kept) and ``quantity``/``compareTo`` (kubernetes.io/docs/reference/using-api/cel,
"Kubernetes quantity library"), quantities parsed by shmguard.units. cel-python's
``matches`` runs RE2 (google-re2), as the API server's cel-go does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from shmguard.fleet.policy import CEL_VARIABLES, RULES, rego
from shmguard.lint.check import check_loaded
from shmguard.sources.load import load_bytes
from shmguard.units import parse_k8s_quantity

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "k8s"
CODES = {r.code for r in RULES}
_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


def corpus_pods() -> Iterator[tuple[str, dict[str, Any]]]:
    """(file:doc, Pod dict) for every Pod and pod template of a core/apps/batch object in
    the corpus (CronJobs' too)."""
    for path in sorted(CORPUS.rglob("*")):
        if path.suffix not in (".yaml", ".yml") or not path.is_file():
            continue
        try:
            docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        for i, d in enumerate(docs):
            if not isinstance(d, dict):
                continue
            kind, tpl = d.get("kind"), None
            if kind == "Pod":
                tpl = d
            elif kind in _TEMPLATE_KINDS:
                tpl = (d.get("spec") or {}).get("template")
            elif kind == "CronJob":
                tpl = (((d.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}).get(
                    "template"
                )
            if not isinstance(tpl, dict) or not isinstance(tpl.get("spec"), dict):
                continue
            spec = tpl["spec"]
            if not isinstance(spec.get("containers"), list) or not all(
                isinstance(c, dict) and isinstance(c.get("name"), str) for c in spec["containers"]
            ):
                continue
            meta = tpl.get("metadata") if isinstance(tpl.get("metadata"), dict) else {}
            pod = _drop_nulls(
                {"apiVersion": "v1", "kind": "Pod", "metadata": meta or {}, "spec": spec}
            )
            try:
                json.dumps(pod)
            except (TypeError, ValueError):
                continue  # dates and other YAML-only values: not what the API holds
            yield f"{path.relative_to(CORPUS)}:{i}", pod


def _drop_nulls(v: Any) -> Any:
    """What the API server stores: null fields are absent."""
    if isinstance(v, dict):
        return {k: _drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls(x) for x in v if x is not None]
    return v


def check_codes(pod: dict[str, Any]) -> set[str]:
    """The policy codes ``check`` reports for ``pod`` (written as YAML)."""
    data = yaml.safe_dump(pod).encode()
    return {f.code for f in check_loaded(load_bytes(data, "pod.yaml")).findings} & CODES


def cel_functions() -> dict[str, Any]:
    from celpy import celtypes

    def join(items: Any, sep: Any = "") -> Any:
        return celtypes.StringType(str(sep).join(str(x) for x in items))

    def lower_ascii(text: Any) -> Any:
        return celtypes.StringType(
            "".join(chr(ord(ch) + 32) if "A" <= ch <= "Z" else ch for ch in str(text))
        )

    def quantity(text: Any) -> Any:
        return celtypes.StringType(str(text))

    def compare_to(a: Any, b: Any) -> Any:
        x, y = parse_k8s_quantity(str(a)), parse_k8s_quantity(str(b))
        return celtypes.IntType((x > y) - (x < y))

    return {
        "join": join,
        "lowerAscii": lower_ascii,
        "quantity": quantity,
        "compareTo": compare_to,
    }


class CelPolicy:
    """The policy's variables and validations compiled once with cel-python."""

    def __init__(self) -> None:
        import celpy

        self._celpy = celpy
        env = celpy.Environment()
        fns = cel_functions()
        self.vars = [(n, env.program(env.compile(e), functions=fns)) for n, e in CEL_VARIABLES]
        self.rules = [(r.code, env.program(env.compile(r.cel), functions=fns)) for r in RULES]

    def variables(self, pod: dict[str, Any]) -> Any:
        """The CEL ``variables`` map for ``pod``, each evaluated in order."""
        from celpy import celtypes

        variables: dict[Any, Any] = {}
        act = {"object": self._celpy.json_to_cel(pod), "variables": celtypes.MapType()}
        for n, prog in self.vars:
            v = prog.evaluate(act)
            if isinstance(v, Exception):
                raise v
            variables[celtypes.StringType(n)] = v
            act["variables"] = celtypes.MapType(variables)
        return act["variables"]

    def failing(self, pod: dict[str, Any]) -> set[str]:
        """Codes whose validation is false for ``pod``."""
        act = {"object": self._celpy.json_to_cel(pod), "variables": self.variables(pod)}
        out = set()
        for code, prog in self.rules:
            v = prog.evaluate(act)
            if isinstance(v, Exception):
                raise v
            if not v:
                out.add(code)
        return out


class RegoPolicy:
    """The Gatekeeper template's Rego, run with regopy (rego-cpp) as Gatekeeper runs it:
    ``input.review.object`` and ``input.parameters``."""

    def __init__(self) -> None:
        from regopy import Interpreter

        self._interp = Interpreter()
        self._interp.add_module("shmguardshm", rego())

    def messages(
        self,
        pod: dict[str, Any],
        parameters: dict[str, Any] | None = None,
        operation: str | None = None,
    ) -> list[str]:
        """The ``violation`` messages for ``pod`` (Constraint parameters as given; the review's
        ``operation`` when given, none as in Gatekeeper's audit)."""
        given: dict[str, Any] = {"review": {"object": pod}}
        if operation is not None:
            given["review"]["operation"] = operation
        if parameters is not None:
            given["parameters"] = parameters
        self._interp.set_input_term(json.dumps(given))
        out = self._interp.query("x = data.shmguardshm.violation")
        return sorted(v["msg"] for v in json.loads(str(out))["bindings"]["x"])

    def failing(self, pod: dict[str, Any]) -> set[str]:
        """Codes of the ``violation`` set for ``pod``."""
        return {m.split(" ", 1)[0] for m in self.messages(pod, {"shmSize": "1Gi"})}


class KyvernoMutate:
    """The ClusterPolicy's ``add-dshm`` rule run as Kyverno documents its parts: ``{{ }}``
    JMESPath (python jmespath, with Kyverno's ``regex_match`` and ``to_lower`` added:
    kyverno.io/docs/writing-policies/jmespath/#regex_match, #to_lower; Go's
    ``strings.ToLower``, which for ASCII is Python's ``str.lower``), the condition operators
    ``Equals``, ``NotEquals``, ``AnyIn`` (wildcards), ``AllNotIn``, ``GreaterThanOrEquals`` on
    quantity strings (kyverno.io/docs/writing-policies/preconditions/#operators; kyverno
    pkg/engine/variables/operator/numeric.go), ``foreach`` over the containers and the
    strategic merge of its patch (lists of containers and volumes merged by ``name``)."""

    def __init__(self, rule: dict[str, Any]) -> None:
        import jmespath
        from jmespath import functions

        class _Fns(functions.Functions):
            @functions.signature({"types": ["string"]}, {"types": ["string", "number"]})
            def _func_regex_match(self, pattern: str, value: Any) -> bool:
                import re

                return re.search(pattern, str(value)) is not None

            @functions.signature({"types": ["string"]})
            def _func_to_lower(self, value: str) -> str:
                return value.lower()

        self._jp = jmespath
        self._opts = jmespath.Options(custom_functions=_Fns())
        self.rule = rule

    def _value(self, v: Any, data: dict[str, Any]) -> Any:
        if isinstance(v, str) and v.startswith("{{") and v.endswith("}}"):
            return self._jp.search(v[2:-2].strip(), data, options=self._opts)
        return v

    def _holds(self, cond: dict[str, Any], data: dict[str, Any]) -> bool:
        import fnmatch

        key, value = self._value(cond["key"], data), self._value(cond["value"], data)
        keys = key if isinstance(key, list) else [key]
        op = cond["operator"]
        if op == "Equals":
            return bool(key == value)
        if op == "NotEquals":
            return bool(key != value)
        if op == "AnyIn":
            return any(fnmatch.fnmatchcase(str(k), str(p)) for k in keys for p in value)
        if op == "AllNotIn":
            return all(k not in value for k in keys)
        if op == "GreaterThanOrEquals":  # two quantity strings compare as quantities
            from shmguard.units import parse_k8s_quantity

            return parse_k8s_quantity(str(key)) >= parse_k8s_quantity(str(value))
        raise ValueError(op)

    def _pass(self, pre: dict[str, Any], data: dict[str, Any]) -> bool:
        every = all(self._holds(c, data) for c in pre.get("all", ()))
        some = not pre.get("any") or any(self._holds(c, data) for c in pre["any"])
        return every and some

    def selected(self, pod: dict[str, Any]) -> list[str]:
        """Names of the containers the rule mounts its volume in."""
        data: dict[str, Any] = {"request": {"object": pod}}
        if not self._pass(self.rule["preconditions"], data):
            return []
        (each,) = self.rule["mutate"]["foreach"]
        out = []
        for c in self._jp.search(each["list"], data) or ():
            if self._pass(each["preconditions"], {**data, "element": c}):
                out.append(c["name"])
        return out

    def apply(self, pod: dict[str, Any]) -> dict[str, Any]:
        """``pod`` after the rule: each selected container's patch merged in by name."""
        import copy

        out = copy.deepcopy(pod)
        (each,) = self.rule["mutate"]["foreach"]
        for name in self.selected(pod):
            patch = each["patchStrategicMerge"]["spec"]
            (mount,) = patch["containers"][0]["volumeMounts"]
            c = next(c for c in out["spec"]["containers"] if c["name"] == name)
            c.setdefault("volumeMounts", [])
            if all(m["name"] != mount["name"] for m in c["volumeMounts"]):
                c["volumeMounts"].append(dict(mount))
            vols = out["spec"].setdefault("volumes", [])
            for v in patch["volumes"]:
                if all(x["name"] != v["name"] for x in vols):
                    vols.append(copy.deepcopy(v))
        return out
