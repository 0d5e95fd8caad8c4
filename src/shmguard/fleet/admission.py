"""The webhook's decision for one AdmissionReview: pure, no I/O.

Input: an ``admission.k8s.io/v1`` ``AdmissionReview`` (a parsed JSON object) whose request is
about a Pod (kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers,
"Request" and "Response"). Output: a :class:`AdmissionDecision`: always allowed (the webhook sizes,
never denies), a JSONPatch (RFC 6902) made only of ``add`` operations, the warnings returned to
the client, the ``shmguard.io/decision`` annotation and a log record.

What it does, for a CREATE of a Pod that is not skipped (:data:`SKIP_ORDER`): every main
container ``check`` would flag for a missing /dev/shm (:mod:`shmguard.fleet.pods`) gets a
mount of one memory-backed emptyDir, sized by :mod:`shmguard.fleet.sizing`, as the fix plan
decides (:func:`shmguard.fix.k8s.plan_pod`: the pod's /dev/shm memory emptyDir reused, else
``dshm`` added); with ``shmguard.io/raise-memory-limit: "true"`` each such container's memory
limit grows by the size, and its ``requests.memory`` with it where the two were equal (a
Guaranteed pod stays Guaranteed). Idempotent: the patched pod mounts /dev/shm and
carries the decision annotation, so a second pass (``reinvocationPolicy: IfNeeded``) adds
nothing. In audit mode nothing is patched; the warnings and the log say what would be.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shmguard.estimate.policy import Policy
from shmguard.fix.k8s import ADD, RESIZE, REUSE, Op, PodFix, json_patch, plan_pod
from shmguard.fleet import names
from shmguard.fleet.logline import json_line
from shmguard.fleet.patch import annotation_ops
from shmguard.fleet.pods import as_list, as_map, json_pod_view, read_containers, strings
from shmguard.fleet.sizing import SMALLEST_SHM, choose_size, quantity_problem, raised_limit
from shmguard.model.fix import Change
from shmguard.units import format_iec, format_k8s_quantity

#: Namespaces the webhook never patches by default: the control plane's and the node lease's.
DEFAULT_EXCLUDED = ("kube-system", "kube-public", "kube-node-lease")
#: The annotation the kubelet puts on a static pod's mirror (k8s.io/api/core/v1
#: ``MirrorPodAnnotationKey``); the API server refuses changes to mirror pods' specs.
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
API_VERSION = "admission.k8s.io/v1"
#: Why a pod is left alone, in the order they are tested.
SKIP_ORDER = (
    "excluded-namespace",
    "mirror-pod",
    "opted-out",
    "host-ipc",
    "no-ml-container",
    "no-shm-need",
    "already-mounted",
    "no-room",
    "invalid-size",
)
#: Most containers (``containers``, ``initContainers`` and ``ephemeralContainers`` together)
#: and most volumes, or volume mounts of one container, in a pod the webhook decides: far
#: above any real pod (a decision is ~0.03 ms a container), far below the ~16,000 a 1.45 MiB
#: review can hold (a 2.6 MiB answer and half a second of a core). A pod over either is
#: refused with an AdmissionReview error (HTTP 413; ``failurePolicy`` applies).
MAX_CONTAINERS = 256
MAX_VOLUMES = 1024


class ReviewError(ValueError):
    """A request that is not an AdmissionReview v1 this webhook can answer; the message says
    what is wrong (it becomes the response's ``status.message``), :attr:`code` the HTTP
    status of the answer."""

    code = 400
    reason = "bad-request"


class PodTooLarge(ReviewError):
    """A pod with more containers or volumes than the webhook decides
    (:data:`MAX_CONTAINERS`, :data:`MAX_VOLUMES`)."""

    code = 413
    reason = "too-many"


@dataclass(frozen=True)
class WebhookOptions:
    """What the webhook does.

    Attributes:
        audit: patch nothing; warn and log what would be done.
        excluded_namespaces: namespaces never patched.
        policy: the sizing policy.
    """

    audit: bool = False
    excluded_namespaces: frozenset[str] = frozenset(DEFAULT_EXCLUDED)
    policy: Policy = field(default_factory=Policy)


@dataclass(frozen=True)
class AdmissionDecision:
    """The answer to one AdmissionReview.

    Attributes:
        uid: the request's uid (echoed in the response).
        action: ``inject`` (patched), ``audit`` (would patch), ``skip`` or ``ignore`` (not a
            Pod CREATE: nothing to decide).
        reason: for a skip, one of :data:`SKIP_ORDER`; else "".
        message: the decision in one line (the annotation's value).
        patch: JSONPatch operations (only ``add``).
        warnings: admission warnings (what was done or would be, and annotations not read).
        changes: the fix as values (shm size, raised memory limit), for the snippet renderer.
        record: the structured log record (JSON-serialisable).
    """

    uid: str
    action: str
    reason: str
    message: str
    patch: tuple[Op, ...] = ()
    warnings: tuple[str, ...] = ()
    changes: tuple[Change, ...] = ()
    record: Mapping[str, Any] = field(default_factory=dict)


def _request(review: object) -> Mapping[str, Any]:
    if not isinstance(review, Mapping):
        raise ReviewError("the body is not a JSON object")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != "AdmissionReview":
        raise ReviewError(f"expected apiVersion {API_VERSION}, kind AdmissionReview")
    req = review.get("request")
    if not isinstance(req, Mapping) or not isinstance(req.get("uid"), str) or not req["uid"]:
        raise ReviewError("the AdmissionReview has no request with a uid")
    return req


def decide_admission(
    review: object, options: WebhookOptions = WebhookOptions()
) -> AdmissionDecision:
    """The decision for one AdmissionReview (see the module docstring).

    Raises:
        ReviewError: when ``review`` is not an AdmissionReview v1 with a request and uid.
        PodTooLarge: for a pod over :data:`MAX_CONTAINERS` or :data:`MAX_VOLUMES`.
    """
    req = _request(review)
    kind = as_map(req.get("kind"))
    obj = req.get("object")
    group = kind.get("group") or ""  # null reads as the core group, as the API server's ""
    if kind.get("kind") != "Pod" or group != "" or req.get("operation") != "CREATE":
        # The group is named where it is what differs: "not a Pod CREATE (Pod CREATE)" told
        # nothing for a Pod of another API group.
        name = f"{group}/{kind.get('kind') or '?'}" if group else kind.get("kind") or "?"
        what = f"not a Pod CREATE ({name} {req.get('operation') or '?'})"
        return _Pod(req, {}, options).decision("ignore", "", what)
    if not isinstance(obj, Mapping):
        return _Pod(req, {}, options).decision("ignore", "", "a Pod CREATE without an object")
    return _Pod(req, obj, options).decide()


def _check_counts(spec: Mapping[str, Any]) -> None:
    """Raise :class:`PodTooLarge` for a pod over the caps (counted before anything is read)."""
    kinds = ("containers", "initContainers", "ephemeralContainers")
    containers = sum(len(as_list(spec.get(k))) for k in kinds)
    if containers > MAX_CONTAINERS:
        raise PodTooLarge(
            f"the pod has {containers} containers, over the {MAX_CONTAINERS} the webhook decides"
        )
    mounts = max(
        (
            len(as_list(c.get("volumeMounts")))
            for k in kinds
            for c in as_list(spec.get(k))
            if isinstance(c, Mapping)
        ),
        default=0,
    )
    volumes = max(len(as_list(spec.get("volumes"))), mounts)
    if volumes > MAX_VOLUMES:
        raise PodTooLarge(
            f"the pod has {volumes} volumes or volume mounts in one container, over the "
            f"{MAX_VOLUMES} the webhook decides"
        )


class _Pod:
    """One Pod CREATE being decided: the request, the pod and the options."""

    def __init__(
        self, req: Mapping[str, Any], obj: Mapping[str, Any], options: WebhookOptions
    ) -> None:
        self.req, self.obj, self.options = req, obj, options
        self.uid = str(req["uid"])
        meta = as_map(obj.get("metadata"))
        self.meta = meta
        self.ann = strings(meta.get("annotations"))
        self.spec = as_map(obj.get("spec"))

    def decision(
        self,
        action: str,
        reason: str,
        message: str,
        patch: tuple[Op, ...] = (),
        warnings: tuple[str, ...] = (),
        changes: tuple[Change, ...] = (),
        **extra: Any,
    ) -> AdmissionDecision:
        """The :class:`AdmissionDecision`, with its log record."""
        record = {
            "uid": self.uid,
            "namespace": self.req.get("namespace") or self.meta.get("namespace") or "",
            "pod": self.meta.get("name") or self.meta.get("generateName") or "",
            "action": action,
            "reason": reason,
            "message": message,
            "patched": bool(patch),
            **extra,
        }
        return AdmissionDecision(
            self.uid, action, reason, message, patch, warnings, changes, record
        )

    def skip(self, reason: str, why: str, problems: tuple[str, ...] = ()) -> AdmissionDecision:
        """A skip: annotated (unless audit, or a pod already annotated) and warned, except
        for excluded namespaces and mirror pods, which are only logged."""
        message = f"skipped: {why}"
        if reason in ("excluded-namespace", "mirror-pod"):
            return self.decision("skip", reason, message)
        patch = () if self.options.audit else annotation_ops(self.obj, message, overwrite=False)
        warnings = _warnings(message, *problems)
        return self.decision("skip", reason, message, tuple(patch), warnings)

    def skip_reason(self) -> tuple[str, str] | None:
        """(reason, why) when the pod is left alone whatever its containers are."""
        ns = str(self.req.get("namespace") or self.meta.get("namespace") or "")
        if ns in self.options.excluded_namespaces:
            return "excluded-namespace", f"namespace {ns} is excluded"
        if MIRROR_ANNOTATION in self.ann:
            return "mirror-pod", "a mirror pod (static pod of a kubelet)"
        if self.ann.get(names.POD_INJECT_ANNOTATION, "").lower() == "false":
            return "opted-out", f"{names.POD_INJECT_ANNOTATION}=false"
        if self.spec.get("hostIPC") is True:
            return "host-ipc", "hostIPC: true (the node's /dev/shm)"
        return None

    def decide(self) -> AdmissionDecision:
        """The decision for the pod."""
        skip = self.skip_reason()
        if skip is not None:
            return self.skip(*skip)
        _check_counts(self.spec)
        containers = read_containers(self.spec, {**strings(self.meta.get("labels")), **self.ann})
        wanted = [c for c in containers if c.needs_shm]
        if not wanted and self.ann.get(names.POD_INJECT_ANNOTATION, "").lower() == "true":
            wanted = list(containers)  # opted in by annotation: every main container
        if not wanted:
            quiet = [c for c in containers if c.no_need]
            if quiet:
                return self.skip("no-shm-need", f"{quiet[0].no_need} (as check's SHM001 says)")
            return self.skip("no-ml-container", "no PyTorch, NCCL or inference container")
        todo = [c for c in wanted if c.shm_volume is None]
        if not todo:
            return self.skip("already-mounted", "/dev/shm is already mounted")
        limits = [c.memory_limit for c in todo if c.memory_limit is not None]
        raise_memory = self.ann.get(names.RAISE_MEMORY_ANNOTATION, "").lower() == "true"
        policy = self.options.policy
        choice = choose_size(
            todo[0].workload, None if raise_memory or not limits else min(limits), policy
        )
        if choice.memory_limit is not None:  # the decision's "no room" answer
            why = (
                f"{choice.basis} (a {format_iec(choice.bytes)} /dev/shm needs a memory limit of "
                f"{format_k8s_quantity(choice.memory_limit)}); set {names.SHM_SIZE_ANNOTATION}"
            )
            why += f" or {names.RAISE_MEMORY_ANNOTATION}"
            return self.skip("no-room", why, choice.problems)
        size = choice.bytes
        view = json_pod_view(self.spec)
        plan = plan_pod(
            view,
            [c.view for c in todo],
            size,
            (lambda limit: raised_limit(limit, size, policy)) if raise_memory else None,
        )
        raises = {f.container.index: f.memory_limit for f in plan.containers if f.memory_limit}
        bad = _reused_problem(plan) or quantity_problem(size, "/dev/shm sizeLimit", SMALLEST_SHM)
        bad = bad or next(
            filter(None, (quantity_problem(n, "raised memory limit") for n in raises.values())),
            None,
        )
        if bad is not None:  # every size written is checked: else skipped, never written
            return self.skip("invalid-size", bad, choice.problems)
        requests = [f for f in plan.containers if f.memory_request is not None]
        who = ", ".join(c.name or f"#{c.index}" for c in todo)
        message, short = _what(plan, size, who, choice.basis, _SOURCES[choice.source])
        if raises:
            message += "; memory limit raised to " + ", ".join(
                format_k8s_quantity(n) for n in raises.values()
            )
            if requests:
                message += " (and requests.memory, which equalled it)"
        elif raise_memory:
            message += "; no memory limit to raise"
        gets = plan.size if plan.size is not None else size  # a kept sizeLimit, if readable
        notes = tuple(
            f"/dev/shm {format_iec(gets)} leaves container {c.name or c.index} less "
            f"than the {format_iec(policy.memory_margin)} margin under its memory limit"
            for c in todo
            if c.memory_limit is not None
            and c.index not in raises
            and gets + policy.memory_margin > c.memory_limit
        )
        changes = plan.changes()
        facts: dict[str, Any] = {
            "shm_bytes": plan.size,
            "source": _RECORD_SOURCES.get(choice.source, choice.source),
            "containers": [c.name for c in todo],
            "memory_limits": sorted(raises.values()),
        }
        if raises:
            short += "; memory limit raised"
        done, would = _VERBS[plan.action]
        if self.options.audit:
            message = f"audit: would {would} {message}"
            warnings = _warnings(f"audit: would {would} {short}", *choice.problems, *notes)
            return self.decision("audit", "", message, (), warnings, changes, **facts)
        message = f"{done} {message}"
        patch = (
            *json_patch(plan, view),
            *annotation_ops(self.obj, message, overwrite=True),
        )
        warnings = _warnings(f"{done} {short}", *choice.problems, *notes)
        return self.decision("inject", "", message, patch, warnings, changes, **facts)


def _reused_problem(plan: PodFix) -> str | None:
    """Why the pod's own memory volume, which the plan mounts at /dev/shm as it is, is not a
    /dev/shm: a ``sizeLimit`` below the smallest size (``1m`` is one byte) or unreadable
    (``1e999``, over 8 EiB); None when it is one, or when the plan writes the size."""
    if plan.action != REUSE or (plan.size is None and plan.not_applied is None):
        return None
    what = f"sizeLimit of the memory volume {plan.volume!r}"
    if plan.size is None:
        return f"the {what} is not a Kubernetes quantity of at most 8 EiB"
    return quantity_problem(plan.size, what, SMALLEST_SHM)


#: The decision's verb for each plan action (:data:`~shmguard.fix.k8s.ADD`, ``REUSE``,
#: ``RESIZE``): done, and in audit mode.
_VERBS = {ADD: ("added", "add"), REUSE: ("mounted", "mount"), RESIZE: ("mounted", "mount")}


def _what(plan: PodFix, size: int, who: str, basis: str, source: str) -> tuple[str, str]:
    """What the plan gives the containers ``who``, after its verb (:data:`_VERBS`): the
    decision annotation's text and the warning's shorter one. ``size``: the decided bytes;
    ``basis``: the decision's reason; ``source``: where the size came from, in a few words.
    A reused volume is named with the size the pod really gets: its own ``sizeLimit``, kept
    when it has one (the decided size then said not applied), else the decided size."""
    quantity = format_k8s_quantity(size)
    if plan.action == ADD:
        return (
            f"/dev/shm {quantity} ({basis}) for {who}",
            f"/dev/shm {quantity} for {who} ({source})",
        )
    vol = f"the existing memory volume {plan.volume!r}"
    if plan.action == RESIZE:
        what = f"{vol} at /dev/shm for {who}, its sizeLimit set to {quantity}"
        return f"{what} ({basis})", f"{what} ({source})"
    kept = f" (sizeLimit {format_k8s_quantity(plan.size)})" if plan.size is not None else ""
    what = f"{vol}{kept} at /dev/shm for {who}"
    if plan.not_applied is None and plan.size is not None:
        return f"{what} ({basis})", f"{what} ({source})"
    why = "not applied: the volume's sizeLimit is kept"
    return f"{what}; {quantity} ({basis}) {why}", f"{what}; {quantity} ({source}) {why}"


#: How the decision's sources (:attr:`~shmguard.estimate.policy.Sized.source`) read in a
#: warning, and in the log record (``annotation`` there, as the webhook has always logged it).
_RECORD_SOURCES = {"configured": "annotation"}
_SOURCES = {
    "configured": names.SHM_SIZE_ANNOTATION,
    "model": "sizing model",
    "default": "sizing policy default",
}
#: Longest warning: the API server may truncate longer ones (k8s.io/api admission/v1
#: ``AdmissionResponse.Warnings``: "Limit warnings to 120 characters if possible. Warnings
#: over 256 characters and large numbers of warnings may be truncated.").
WARNING_MAX = 256


def _warnings(*texts: str) -> tuple[str, ...]:
    """Each text prefixed ``shmguard: `` and cut to :data:`WARNING_MAX` characters."""
    out = []
    for t in texts:
        w = t if t.startswith("shmguard: ") else f"shmguard: {t}"
        out.append(w if len(w) <= WARNING_MAX else w[: WARNING_MAX - 3] + "...")
    return tuple(out)


def admission_response(decision: AdmissionDecision) -> dict[str, Any]:
    """The AdmissionReview v1 response for ``decision`` (the patch base64-encoded, with
    ``patchType: JSONPatch``, only when there is one)."""
    resp: dict[str, Any] = {"uid": decision.uid, "allowed": True}
    if decision.patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json_line(list(decision.patch)).encode()).decode()
    if decision.warnings:
        resp["warnings"] = list(decision.warnings)
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": resp}


def admission_error(message: str, code: int = 400, uid: str = "") -> dict[str, Any]:
    """An AdmissionReview v1 response that reports a failure (``status.code``/``message``)
    instead of a decision: for a body that is not an AdmissionReview the webhook can read."""
    return {
        "apiVersion": API_VERSION,
        "kind": "AdmissionReview",
        "response": {
            "uid": uid,
            "allowed": False,
            "status": {"status": "Failure", "code": code, "message": message},
        },
    }
