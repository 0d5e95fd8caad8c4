"""Where each workload kind keeps its pod spec(s): path patterns per (API group, kind).

A pattern is a dotted path where ``*`` matches every key of a mapping (PyTorchJob replica
types) and ``[]`` every item of a sequence (RayCluster worker groups). Sources, read for this
table (../shared/research/config_formats.md §4.5 has file and line numbers):

* core/apps/batch: k8s.io/api ``PodTemplateSpec`` in Deployment, StatefulSet, DaemonSet,
  ReplicaSet, ReplicationController, Job (``spec.template.spec``), CronJob
  (``spec.jobTemplate.spec.template.spec``), PodTemplate (``template.spec``), Pod (``spec``).
* Kubeflow training-operator v1 (release-1.9 ``pkg/apis/kubeflow.org/v1/*_types.go``):
  ``spec.<framework>ReplicaSpecs.<ReplicaType>.template.spec``; mpi-operator v2beta1 the same
  for MPIJob. Katib Experiment embeds a whole job at ``spec.trialTemplate.trialSpec``.
* Kubeflow Trainer v2 (``pkg/apis/trainer/v1alpha1/trainingruntime_types.go``): a
  (Cluster)TrainingRuntime holds a JobSet template,
  ``spec.template.spec.replicatedJobs[].template.spec.template.spec``
  (kubeflow.org/docs/components/trainer/operator-guides/job-template). A TrainJob has no pod
  spec of its own: see :mod:`~shmguard.sources.k8s`.
* KubeRay (``ray-operator/apis/ray/v1``): RayCluster ``spec.headGroupSpec.template.spec`` and
  ``spec.workerGroupSpecs[].template.spec``; RayJob under ``spec.rayClusterSpec`` plus
  ``spec.submitterPodTemplate.spec``; RayService under ``spec.rayClusterConfig``.
* JobSet (``api/jobset/v1alpha2/jobset_types.go``): ``spec.replicatedJobs[].template.spec
  .template.spec``. LeaderWorkerSet (``api/leaderworkerset/v1``):
  ``spec.leaderWorkerTemplate.{leaderTemplate,workerTemplate}.spec``.
* Volcano Job (``batch.volcano.sh/v1alpha1`` ``job.go``): ``spec.tasks[].template.spec``.
* Knative Serving Service/Configuration: ``spec.template.spec``; Revision: ``spec``.
* KServe ServingRuntime/ClusterServingRuntime (``servingruntime_types.go``): ``spec`` is the
  pod spec, plus ``spec.workerSpec``; LLMInferenceService: ``spec.template``, ``spec.worker``,
  ``spec.prefill.{template,worker}`` are PodSpecs. InferenceService and Argo are handled in
  code (inline PodSpec plus a model container; templates with container/script).
* OME (sgl-project/ome, ``ome.io``): ``spec.{engineConfig,decoderConfig,routerConfig}`` and
  their ``leader``/``worker`` are pod specs whose main container is ``runner``.
"""

from __future__ import annotations

_TEMPLATE = ("spec.template.spec",)
_REPLICAS = "spec.{}ReplicaSpecs.*.template.spec"
_RAY = ("headGroupSpec.template.spec", "workerGroupSpecs[].template.spec")
_OME = tuple(
    f"spec.{c}{sub}"
    for c in ("engineConfig", "decoderConfig", "routerConfig")
    for sub in ("", ".leader", ".worker")
)

#: (group, kind) -> pod spec path patterns. The group is the apiVersion before ``/`` ("" for
#: the core ``v1``); ``*`` as group matches any group.
POD_SPEC_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): ("spec",),
    ("", "PodTemplate"): ("template.spec",),
    ("", "ReplicationController"): _TEMPLATE,
    ("apps", "Deployment"): _TEMPLATE,
    ("apps", "StatefulSet"): _TEMPLATE,
    ("apps", "DaemonSet"): _TEMPLATE,
    ("apps", "ReplicaSet"): _TEMPLATE,
    ("extensions", "Deployment"): _TEMPLATE,
    ("extensions", "DaemonSet"): _TEMPLATE,
    ("extensions", "ReplicaSet"): _TEMPLATE,
    ("batch", "Job"): _TEMPLATE,
    ("batch", "CronJob"): ("spec.jobTemplate.spec.template.spec",),
    ("kubeflow.org", "PyTorchJob"): (_REPLICAS.format("pytorch"),),
    ("kubeflow.org", "TFJob"): (_REPLICAS.format("tf"),),
    ("kubeflow.org", "MPIJob"): (_REPLICAS.format("mpi"),),
    ("kubeflow.org", "XGBoostJob"): (_REPLICAS.format("xgb"),),
    ("kubeflow.org", "PaddleJob"): (_REPLICAS.format("paddle"),),
    ("kubeflow.org", "JAXJob"): (_REPLICAS.format("jax"),),
    ("kubeflow.org", "MXJob"): (_REPLICAS.format("mx"),),
    ("trainer.kubeflow.org", "TrainingRuntime"): (
        "spec.template.spec.replicatedJobs[].template.spec.template.spec",
    ),
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): (
        "spec.template.spec.replicatedJobs[].template.spec.template.spec",
    ),
    ("ray.io", "RayCluster"): tuple(f"spec.{p}" for p in _RAY),
    ("ray.io", "RayJob"): (
        *(f"spec.rayClusterSpec.{p}" for p in _RAY),
        "spec.submitterPodTemplate.spec",
    ),
    ("ray.io", "RayService"): tuple(f"spec.rayClusterConfig.{p}" for p in _RAY),
    ("jobset.x-k8s.io", "JobSet"): ("spec.replicatedJobs[].template.spec.template.spec",),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): (
        "spec.leaderWorkerTemplate.leaderTemplate.spec",
        "spec.leaderWorkerTemplate.workerTemplate.spec",
    ),
    ("batch.volcano.sh", "Job"): ("spec.tasks[].template.spec",),
    ("serving.knative.dev", "Service"): _TEMPLATE,
    ("serving.knative.dev", "Configuration"): _TEMPLATE,
    ("serving.knative.dev", "Revision"): ("spec",),
    ("serving.kserve.io", "ServingRuntime"): ("spec", "spec.workerSpec"),
    ("serving.kserve.io", "ClusterServingRuntime"): ("spec", "spec.workerSpec"),
    ("serving.kserve.io", "LLMInferenceService"): (
        "spec.template",
        "spec.worker",
        "spec.prefill.template",
        "spec.prefill.worker",
    ),
    ("ome.io", "ServingRuntime"): _OME,
    ("ome.io", "ClusterServingRuntime"): _OME,
    ("ome.io", "InferenceService"): _OME,
}

#: Keys of a pod-spec-like mapping that hold one extra main container (KServe predictor
#: ``model`` and framework shorthands, OME ``runner``).
CONTAINER_KEYS = (
    "runner",
    "model",
    "pytorch",
    "tensorflow",
    "sklearn",
    "xgboost",
    "onnx",
    "triton",
    "huggingface",
    "lightgbm",
    "paddle",
    "pmml",
)

#: Kinds whose objects embed a whole workload object: (group, kind) -> path of the embedded one.
EMBEDDED_OBJECTS: dict[tuple[str, str], str] = {
    ("kubeflow.org", "Experiment"): "spec.trialTemplate.trialSpec",
}

#: Kinds that describe schemas or policies, never a workload: no fallback search in them.
NOT_WORKLOADS = frozenset(
    {"CustomResourceDefinition", "ConfigMap", "Secret", "ValidatingAdmissionPolicy"}
)

#: Kubernetes' own API groups (the API reference, kubernetes.io/docs/reference/kubernetes-api):
#: their kinds are all known, and the ones with a pod spec are in :data:`POD_SPEC_PATHS`, so
#: a Service, a Role or a PersistentVolumeClaim needs no fallback search. Groups ending in
#: ``.k8s.io`` (rbac, networking, storage, ...) are Kubernetes' own too, except the SIG
#: projects' ``*.sigs.k8s.io`` (and ``*.x-k8s.io``, which that test never matches), whose
#: custom resources may carry pod templates.
BUILTIN_GROUPS = frozenset({"", "apps", "batch", "autoscaling", "policy"})


def is_builtin_group(group: str) -> bool:
    """Whether ``group`` (``apps``, ``rbac.authorization.k8s.io``, "" for core) is one of
    Kubernetes' own API groups."""
    return group in BUILTIN_GROUPS or (
        group.endswith(".k8s.io") and not group.endswith(".sigs.k8s.io")
    )
