"""GPU facts through the real nvidia-ml-py (no GPU here: unknown with a reason) and torch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from shmguard.inspect.gpu import read_gpus
from shmguard.inspect.torchinfo import read_torch


def test_no_driver_device_is_unknown_without_loading_nvml(tmp_path: Path):
    gpus = read_gpus(str(tmp_path))
    assert gpus.value is None
    assert gpus.reason == f"no NVIDIA driver device ({tmp_path}/nvidiactl missing)"


def test_nvml_failure_is_unknown_with_nvmls_error(tmp_path: Path):
    # A driver device node without the NVML library: the real pynvml reports why.
    (tmp_path / "nvidiactl").write_text("")
    gpus = read_gpus(str(tmp_path))
    if importlib.util.find_spec("pynvml") is None:
        assert gpus.reason == "nvidia-ml-py not installed (pip install 'shmguard[gpu]')"
    elif gpus.value is None:
        assert (gpus.reason or "").startswith("NVML: ")
    else:  # a real GPU host
        assert gpus.value.driver and all(g.memory_total > 0 for g in gpus.value.gpus)


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.timeout(120)
def test_torch_facts():
    torch = pytest.importorskip("torch")
    facts = read_torch()
    assert facts.value is not None
    assert facts.value.version == str(torch.__version__)
    assert facts.value.sharing_strategy == "file_descriptor"
    assert facts.value.strategies == ("file_descriptor", "file_system")
