"""GPUs through nvidia-ml-py (``pynvml``), imported only when asked; never guessed."""

from __future__ import annotations

import contextlib
import os

from shmguard.model import Fact
from shmguard.model.host import Gpu, GpuFacts


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_gpus(dev: str = "/dev") -> Fact[GpuFacts]:
    """Query NVML. Unknown with the reason when the NVIDIA driver's control device is absent
    (``/dev/nvidiactl``, created by the driver and passed into GPU containers by the NVIDIA
    container toolkit; checking it first skips a 50-80 ms NVML library search), when
    nvidia-ml-py is not installed, or when NVML fails: ``"NVML: <error>"``."""
    if not os.path.exists(f"{dev}/nvidiactl"):
        return Fact.unknown(f"no NVIDIA driver device ({dev}/nvidiactl missing)")
    try:
        import pynvml
    except ImportError:
        return Fact.unknown("nvidia-ml-py not installed (pip install 'shmguard[gpu]')")
    try:
        pynvml.nvmlInit()
    except Exception as err:  # pynvml raises NVMLError subclasses built at runtime
        return Fact.unknown(f"NVML: {err}")
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(Gpu(i, _text(pynvml.nvmlDeviceGetName(handle)), int(memory.total)))
        return Fact.known(GpuFacts(driver, tuple(gpus)))
    except Exception as err:
        return Fact.unknown(f"NVML: {err}")
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
