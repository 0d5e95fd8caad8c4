"""Bundled PyTorch workloads for ``shmguard demo`` and the docs (synthetic data, no downloads).

Each module is a script: ``python examples/<name>.py --help`` from the repository, or
``python -m shmguard.examples.<name>`` from an installed package. They need torch (the
``torch`` extra).

* :mod:`seed_loader`: the classic image-classification loader, 3x224x224 float32 images,
  batch 32, 4 workers, prefetch 2. Needs about 165 MiB of /dev/shm, so it fails in Docker's
  default 64 MiB (crash on most runs, a silent hang on about 5%: torch_shm.md section 2).
* :mod:`numpy_loader`: the same shapes, but the dataset returns numpy arrays (fails the same way).
* :mod:`fits_loader`: the same pipeline configured to fit 64 MiB: images stay uint8 (4x smaller)
  until they reach the model, about 42 MiB of /dev/shm (41 MiB probed with 0.1 s steps).
* :mod:`grid_loader`: the calibration loader of benchmarks/plan_calibration.py (docs/model.md):
  any workers, prefetch, batch size in MiB, dtype, return kind and consumer speed.

Each of these four is also a DataLoader factory for ``shmguard tune`` (docs/tune.md):
``shmguard.examples.<name>:loader`` takes ``num_workers``, ``prefetch_factor``,
``persistent_workers`` and ``pin_memory`` (and its own ``batch_size=``, ``batches=``).

Not in :data:`EXAMPLES` (it never ends in a small /dev/shm): :mod:`hang_loader`, one 24 MiB
numpy array per item with ``batch_size=None``, which always *hangs* when /dev/shm is too small
(every allocation happens in a worker's feeder thread); the guard's tests use it.
"""

from __future__ import annotations

#: Module names, in the order the docs list them.
EXAMPLES = ("seed_loader", "numpy_loader", "fits_loader")
