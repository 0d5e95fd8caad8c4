"""shmguard: find, measure, fix and prevent /dev/shm exhaustion in containerized PyTorch jobs.

The library never prints; :mod:`shmguard.cli` renders. Sizes are ``int`` bytes everywhere.
The curated public API is :data:`__all__` (docs/api.md); names are imported on first use, so
``import shmguard`` costs nothing for the CLI. Anything not listed is internal and may change.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from shmguard._version import __version__

#: Public name -> the module that defines it.
_EXPORTS = {
    # values
    "Fact": "shmguard.model",
    "Finding": "shmguard.model",
    "Fix": "shmguard.model",
    "Change": "shmguard.model",
    "Setting": "shmguard.model",
    "Location": "shmguard.model",
    "Edit": "shmguard.model",
    "Applicability": "shmguard.model",
    "Severity": "shmguard.model",
    "FailOn": "shmguard.model",
    "apply_edits": "shmguard.model",
    "exit_status": "shmguard.model",
    # sizing
    "Policy": "shmguard.estimate",
    "Recommendation": "shmguard.estimate",
    "clean_size": "shmguard.estimate",
    "dataloader_bound": "shmguard.estimate",
    "LoaderSpec": "shmguard.estimate",
    "LoaderPrediction": "shmguard.estimate",
    "predict": "shmguard.estimate",
    "padded_bytes": "shmguard.estimate",
    "batch_leaves": "shmguard.estimate",
    "max_workers": "shmguard.estimate",
    "default_shm_size": "shmguard.estimate",
    "memory_limit_for": "shmguard.estimate",
    "recommend": "shmguard.estimate",
    "shm_size_for": "shmguard.estimate",
    "Plan": "shmguard.estimate",
    "PlanFit": "shmguard.estimate",
    "PlanRequest": "shmguard.estimate",
    "check_fit": "shmguard.estimate",
    "make_plan": "shmguard.estimate",
    "workers_that_fit": "shmguard.estimate",
    # configuration
    "ANNOTATIONS": "shmguard.config",
    "LABELS": "shmguard.config",
    "Config": "shmguard.config",
    "ConfigError": "shmguard.config",
    "load_config": "shmguard.lint.settings",
    # find
    "HostFacts": "shmguard.model.host",
    "inspect_host": "shmguard.inspect.host",
    "NodeScan": "shmguard.inspect.node",
    "NodeScanner": "shmguard.inspect.node",
    "scan_node": "shmguard.inspect.node",
    "CheckReport": "shmguard.lint.report",
    "check_paths": "shmguard.lint.report",
    "DoctorOptions": "shmguard.lint.doctor",
    "DoctorReport": "shmguard.lint.doctor",
    "diagnose": "shmguard.lint.doctor",
    "Diagnosis": "shmguard.triage",
    "explain_each": "shmguard.triage",
    "explain_files": "shmguard.triage",
    "explain_streams": "shmguard.triage",
    # monitor (the Prometheus exporter)
    "ExporterOptions": "shmguard.monitor.exporter",
    "ShmCollector": "shmguard.monitor.exporter",
    "ExporterServer": "shmguard.monitor.exporter",
    "NodeCollector": "shmguard.monitor.node_exporter",
    "Monitor": "shmguard.monitor.watch",
    "WatchSnapshot": "shmguard.monitor.watch",
    "WatchTarget": "shmguard.monitor.target",
    "resolve_target": "shmguard.monitor.target",
    "rightsize": "shmguard.monitor.rightsize",
    "RightsizeOptions": "shmguard.monitor.rightsize",
    "RightsizeReport": "shmguard.monitor.rightsize",
    # fleet (the admission webhook)
    "AdmissionDecision": "shmguard.fleet.admission",
    "WebhookOptions": "shmguard.fleet.admission",
    "admission_response": "shmguard.fleet.admission",
    "decide_admission": "shmguard.fleet.admission",
    "WebhookServer": "shmguard.fleet.webhook",
    "WebhookServerOptions": "shmguard.fleet.webhook",
    # prevent (the torch extra; torch is imported when a function runs)
    "check_dataloader": "shmguard.torch",
    "assess_dataloader": "shmguard.torch",
    "LoaderCheck": "shmguard.torch",
    "guard": "shmguard.torch",
    "ShmInsufficientError": "shmguard.torch",
    "ShmExhaustedError": "shmguard.torch",
    "tune": "shmguard.torch",
    "TuneResult": "shmguard.torch",
}

__all__ = [
    "ANNOTATIONS",
    "LABELS",
    "AdmissionDecision",
    "Applicability",
    "Change",
    "CheckReport",
    "Config",
    "ConfigError",
    "Diagnosis",
    "DoctorOptions",
    "DoctorReport",
    "Edit",
    "ExporterOptions",
    "ExporterServer",
    "Fact",
    "FailOn",
    "Finding",
    "Fix",
    "HostFacts",
    "LoaderCheck",
    "LoaderPrediction",
    "LoaderSpec",
    "Location",
    "Monitor",
    "NodeCollector",
    "NodeScan",
    "NodeScanner",
    "Plan",
    "PlanFit",
    "PlanRequest",
    "Policy",
    "Recommendation",
    "RightsizeOptions",
    "RightsizeReport",
    "Setting",
    "Severity",
    "ShmCollector",
    "ShmExhaustedError",
    "ShmInsufficientError",
    "TuneResult",
    "WatchSnapshot",
    "WatchTarget",
    "WebhookOptions",
    "WebhookServer",
    "WebhookServerOptions",
    "__version__",
    "admission_response",
    "apply_edits",
    "assess_dataloader",
    "batch_leaves",
    "check_dataloader",
    "check_fit",
    "check_paths",
    "clean_size",
    "dataloader_bound",
    "decide_admission",
    "default_shm_size",
    "diagnose",
    "exit_status",
    "explain_each",
    "explain_files",
    "explain_streams",
    "guard",
    "inspect_host",
    "load_config",
    "make_plan",
    "max_workers",
    "memory_limit_for",
    "padded_bytes",
    "predict",
    "recommend",
    "resolve_target",
    "rightsize",
    "scan_node",
    "shm_size_for",
    "tune",
    "workers_that_fit",
]

if TYPE_CHECKING:
    from shmguard.config import ANNOTATIONS, LABELS, Config, ConfigError
    from shmguard.estimate import (
        LoaderPrediction,
        LoaderSpec,
        Plan,
        PlanFit,
        PlanRequest,
        Policy,
        Recommendation,
        batch_leaves,
        check_fit,
        clean_size,
        dataloader_bound,
        default_shm_size,
        make_plan,
        max_workers,
        memory_limit_for,
        padded_bytes,
        predict,
        recommend,
        shm_size_for,
        workers_that_fit,
    )
    from shmguard.fleet.admission import (
        AdmissionDecision,
        WebhookOptions,
        admission_response,
        decide_admission,
    )
    from shmguard.fleet.webhook import WebhookServer, WebhookServerOptions
    from shmguard.inspect.host import inspect_host
    from shmguard.inspect.node import NodeScan, NodeScanner, scan_node
    from shmguard.lint.doctor import DoctorOptions, DoctorReport, diagnose
    from shmguard.lint.report import CheckReport, check_paths
    from shmguard.lint.settings import load_config
    from shmguard.model import (
        Applicability,
        Change,
        Edit,
        Fact,
        FailOn,
        Finding,
        Fix,
        Location,
        Setting,
        Severity,
        apply_edits,
        exit_status,
    )
    from shmguard.model.host import HostFacts
    from shmguard.monitor.exporter import ExporterOptions, ExporterServer, ShmCollector
    from shmguard.monitor.node_exporter import NodeCollector
    from shmguard.monitor.rightsize import RightsizeOptions, RightsizeReport, rightsize
    from shmguard.monitor.target import WatchTarget, resolve_target
    from shmguard.monitor.watch import Monitor, WatchSnapshot
    from shmguard.torch import (
        LoaderCheck,
        ShmExhaustedError,
        ShmInsufficientError,
        TuneResult,
        assess_dataloader,
        check_dataloader,
        guard,
        tune,
    )
    from shmguard.triage import Diagnosis, explain_each, explain_files, explain_streams


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'shmguard' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
