"""One tune trial, run inside the sandbox: build the user's DataLoader and time it.

``python -m shmguard.torch.tuning._child '<json>'`` with ``{"loader": "MODULE:FACTORY",
"kwargs": {...}, "steps": N, "warmup": W, "step_time": S}``. It imports MODULE, calls
``FACTORY(**kwargs)``, checks that the result is a DataLoader with the ``num_workers`` asked
for, iterates ``W`` warm-up batches (worker start-up included) and then ``N`` timed ones,
sleeping ``S`` seconds per batch as a training step would, and prints one line
``shmguard-tune: <json>`` on stdout: either the figures (``elapsed``, ``wait``: seconds blocked
in ``next()``, ``samples``, ``epochs``, ``leaves``: the first batch's storage bytes,
``threads``: torch's intra-op threads) or an
input error (``error``: ``import``, ``factory``, ``not-a-dataloader``, ``fixed-workers``,
``ignored-kwargs``, ``empty``, ``dataset``: the loop raised without workers, so the user's
code, not the budget; ``message``: one line), with exit status :data:`EXIT_INPUT`. The line
starts on a new line of its own, whatever the user's code printed before it. Without
automatic batching (``batch_size=None``) every item counts as one sample.

With ``"configs": [{...}, ...], "rounds": R`` instead of ``"kwargs"`` it is a confirmation:
R rounds of the configurations in alternation (A B C A B C ...), each measured as above from
a fresh loader, printed as ``{"runs": [[figures, ...] per configuration]}``.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import time
import warnings
from typing import Any

#: Prefix of the line the parent reads.
MARKER = "shmguard-tune: "
#: Exit status of a trial whose input is wrong (the factory, not the configuration).
EXIT_INPUT = 3


def _emit(data: dict[str, Any]) -> None:
    # On a line of its own even after a half line the user's code printed, in one write (a
    # pipe keeps writes of up to PIPE_BUF bytes whole), so workers printing at the same time
    # cannot cut into it.
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), ("\n" + MARKER + json.dumps(data) + "\n").encode())


def _input_error(kind: str, message: str) -> None:
    _emit({"error": kind, "message": message.splitlines()[0] if message else kind})
    sys.exit(EXIT_INPUT)


def _factory(ref: str) -> Any:
    module_name, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as err:
        _input_error("import", f"cannot import {module_name}: {type(err).__name__}: {err}")
    for part in attr.split("."):
        if not hasattr(obj, part):
            _input_error("import", f"module {module_name} has no attribute {attr}")
        obj = getattr(obj, part)
    if not callable(obj):
        _input_error("import", f"{ref} is not callable ({type(obj).__name__})")
    return obj


def _samples(batch: Any, default: int) -> int:
    """Samples in ``batch``: the first dimension of its first tensor, else ``default``."""
    import torch

    todo = [batch]
    while todo:
        obj = todo.pop(0)
        if isinstance(obj, torch.Tensor):
            return int(obj.shape[0]) if obj.dim() else default
        if isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            todo.extend(obj)
    return default


def _build(ref: str, factory: Any, kwargs: dict[str, Any]) -> Any:
    """``factory(**kwargs)``, checked: a DataLoader with the ``num_workers`` asked for."""
    try:
        loader = factory(**kwargs)
    except Exception as err:
        _input_error("factory", f"{ref}(**{kwargs}) raised {type(err).__name__}: {err}")
    from torch.utils.data import DataLoader

    if not isinstance(loader, DataLoader):
        _input_error(
            "not-a-dataloader",
            f"{ref} returned {type(loader).__module__}.{type(loader).__qualname__}, "
            "not a torch.utils.data.DataLoader",
        )
    if loader.num_workers != kwargs["num_workers"]:
        _input_error(
            "fixed-workers",
            f"{ref}(num_workers={kwargs['num_workers']}) returned a DataLoader with "
            f"num_workers={loader.num_workers}: the factory must pass its num_workers keyword "
            "to the DataLoader",
        )
    # Without workers torch keeps prefetch_factor None and persistent_workers False.
    names = ("prefetch_factor", "persistent_workers") if kwargs["num_workers"] else ()
    for name in (*names, "pin_memory"):
        if getattr(loader, name, kwargs[name]) != kwargs[name]:
            _input_error(
                "ignored-kwargs",
                f"{ref}({name}={kwargs[name]}) returned a DataLoader with "
                f"{name}={getattr(loader, name)}: the factory must pass its {name} keyword to "
                "the DataLoader, or tune would recommend a setting that changes nothing",
            )
    return loader


def _time(ref: str, loader: Any, steps: int, warmup: int, step_time: float) -> dict[str, Any]:
    """Iterate ``warmup`` then ``steps`` timed batches of ``loader`` (starting new epochs as
    needed); the figures of the timed ones."""
    from shmguard.torch.sizing import shm_leaves

    # Without automatic batching (batch_size=None) every item the loader yields is a sample.
    unbatched = loader.batch_size is None and loader.batch_sampler is None
    default = loader.batch_size or 1
    it = iter(loader)
    epochs = 1
    leaves: list[int] | None = None
    wait = samples = 0.0
    t_start = time.perf_counter()
    for i in range(warmup + steps):
        if i == warmup:
            t_start = time.perf_counter()
            wait = samples = 0.0
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            epochs += 1
            it = iter(loader)
            try:
                batch = next(it)
            except StopIteration:
                _input_error("empty", f"{ref} returned a DataLoader with no batches")
        except Exception as err:
            if loader.num_workers:
                raise  # with workers it may be the budget's doing (no space in /dev/shm)
            _input_error(
                "dataset",
                f"{ref}: iterating its DataLoader (num_workers=0) raised "
                f"{type(err).__name__}: {err} at batch {i + 1}",
            )
        wait += time.perf_counter() - t0
        if leaves is None:
            leaves = shm_leaves(batch)
        samples += 1 if unbatched else _samples(batch, default)
        if step_time:
            time.sleep(step_time)
        del batch
    elapsed = time.perf_counter() - t_start
    del it
    return {
        "elapsed": elapsed,
        "wait": wait,
        "samples": samples,
        "batches": steps,
        "epochs": epochs,
        "leaves": leaves or [],
        "num_workers": loader.num_workers,
        "threads": _threads(),
    }


def _threads() -> int:
    """torch's intra-op threads in this process (read after the timed batches: the first call
    starts its pool)."""
    import torch

    return int(torch.get_num_threads())


def main(argv: list[str]) -> None:
    """Run the trial described by ``argv[0]`` (see the module docstring)."""
    spec = json.loads(argv[0])
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    ref = spec["loader"]
    factory = _factory(ref)
    steps, warmup, step_time = int(spec["steps"]), int(spec["warmup"]), float(spec["step_time"])
    if "configs" not in spec:
        loader = _build(ref, factory, spec["kwargs"])
        _emit(_time(ref, loader, steps, warmup, step_time))
        return
    # Confirmation: the configurations in alternation (A B C A B C ...), each from a fresh
    # loader, so a change of load on the machine falls on all of them alike.
    runs: list[list[dict[str, Any]]] = [[] for _ in spec["configs"]]
    for _ in range(int(spec["rounds"])):
        for i, kwargs in enumerate(spec["configs"]):
            loader = _build(ref, factory, kwargs)
            runs[i].append(_time(ref, loader, steps, warmup, step_time))
            del loader  # shuts its workers down (persistent ones too) before the next
            gc.collect()
    _emit({"runs": runs})


if __name__ == "__main__":
    main(sys.argv[1:])
