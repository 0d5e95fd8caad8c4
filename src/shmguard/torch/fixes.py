"""From a DataLoader and a /dev/shm to what to change: the model's spec, the loader settings
that fit, and the runtime-specific size fix.

The size comes from the one size decision (:func:`~shmguard.estimate.choose_shm`); the fix
value and its sentence from doctor's fix builder (:func:`shmguard.lint.env._base.shm_fix`: the
runtime doctor detects, the memory limit that must grow with /dev/shm, the platform notes);
the snippet from the one snippet renderer, so a size reads the same here as in every command.
An exception's text is the only rendering the library does: it is what a training script
shows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from shmguard.estimate import LoaderSpec, Policy, predict
from shmguard.estimate.dataloader import DEFAULT_PREFETCH_FACTOR
from shmguard.estimate.decide import Need, RanShort, ShmEvidence, choose_shm
from shmguard.estimate.policy import Sized
from shmguard.model import Fix
from shmguard.model.fix import FIX_RUNTIMES
from shmguard.units import format_iec


@dataclass(frozen=True)
class ShmSpace:
    """A /dev/shm's figures at one moment (statvfs; what ``df`` shows).

    Attributes:
        path: the directory asked about.
        total: the filesystem's size in bytes.
        used: bytes in use (``(f_blocks - f_bfree) x f_frsize``; counts unlinked files still
            held, which is how PyTorch's default strategy keeps its batches,
            torch_shm.md 1.2).
        free: bytes an unprivileged allocation can still get (``f_bavail x f_frsize``).
    """

    path: str
    total: int
    used: int
    free: int


def shm_space(path: str) -> ShmSpace:
    """statvfs of ``path``.

    Raises:
        OSError: ``path`` cannot be read.
    """
    st = os.statvfs(path)
    return ShmSpace(
        path,
        st.f_blocks * st.f_frsize,
        (st.f_blocks - st.f_bfree) * st.f_frsize,
        st.f_bavail * st.f_frsize,
    )


def local_ranks_from_env(environ: Any = None) -> int:
    """Processes on this node that run the same loader: ``LOCAL_WORLD_SIZE``, which torchrun
    sets for every worker (pytorch.org/docs/stable/elastic/run.html, "Environment
    Variables"), else 1."""
    env = os.environ if environ is None else environ
    try:
        return max(1, int(env.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def loader_spec(loader: Any, pages: int, local_ranks: int = 1) -> LoaderSpec:
    """The model's :class:`~shmguard.estimate.LoaderSpec` for a ``torch.utils.data.DataLoader``
    whose batches take ``pages`` bytes (``B'``)."""
    nw = int(loader.num_workers)
    pf = loader.prefetch_factor if nw > 0 else None
    return LoaderSpec(
        batch_pages=pages,
        num_workers=nw,
        prefetch_factor=max(1, int(pf)) if pf else DEFAULT_PREFETCH_FACTOR,
        pin_memory=bool(loader.pin_memory),
        persistent_workers=bool(loader.persistent_workers),
        local_ranks=local_ranks,
    )


def fitting(spec: LoaderSpec, free: int) -> tuple[int, int]:
    """``(num_workers, prefetch_factor)`` whose predicted peak fits in ``free`` bytes, found by
    lowering ``prefetch_factor`` first (down to 1), then ``num_workers``; ``(0, 0)`` when not
    even one worker with ``prefetch_factor=1`` fits (loading in the main process takes no
    shm). The spec's own values when they fit."""
    nw, pf = spec.num_workers, spec.prefetch_factor
    if nw == 0:
        return 0, 0
    while pf > 1 and predict(replace(spec, prefetch_factor=pf)).peak > free:
        pf -= 1
    while nw > 0 and predict(replace(spec, num_workers=nw, prefetch_factor=pf)).peak > free:
        nw -= 1
    return (nw, pf) if nw > 0 else (0, 0)


@dataclass(frozen=True)
class SizeFix:
    """The size to give /dev/shm and the fix, for the runtime this process runs under.

    Attributes:
        size: the size and its basis (the sizing policy).
        fix: the fix value: changes for the detected runtime, and its sentence.
        runtime: the runtime doctor detects here (``docker``, ``kubernetes``, ``none``...).
        text: the fix as it is printed: the sentence, the basis, and the snippet for the
            runtime (the first that applies; Docker's when the runtime is not known).
    """

    size: Sized
    fix: Fix
    runtime: str
    text: str


def size_fix(need: int | None, what: str, policy: Policy, *, too_small: int) -> SizeFix:
    """The fix for a need of ``need`` bytes (the DataLoader model's predicted peak, plus what
    /dev/shm held; ``what`` names it in the basis), or, when the need is unknown, the policy's
    default size (at least twice ``too_small``, the /dev/shm that ran short): the one size
    decision (:func:`~shmguard.estimate.decide.choose_shm`), never at or below ``too_small``."""
    from shmguard.fix.snippets import render_snippets
    from shmguard.inspect.host import inspect_host
    from shmguard.lint.doctor import DoctorOptions, shm_fix

    facts = inspect_host(holders=False, gpus=False)
    model = Need(need, what) if need is not None and need > 0 else None
    sized = choose_shm(ShmEvidence(model=model, ran_short=RanShort(too_small)), policy)
    fix = shm_fix(facts, sized.bytes, "Give /dev/shm", DoctorOptions(policy=policy))
    runtime = facts.runtime.name
    wanted = FIX_RUNTIMES.get(runtime, ("docker",))
    snippets = render_snippets(fix.changes, wanted[:1])
    text = f"{fix.description}\n  size: {sized.basis}"
    for snip in snippets:
        lead = "" if runtime in FIX_RUNTIMES else "for example, "
        text += f"\n  {lead}{snip.title}:\n" + "\n".join(
            "    " + line for line in snip.text.splitlines()
        )
    return SizeFix(sized, fix, runtime, text)


#: Why ``adapt`` never lowers an IterableDataset's ``num_workers``: each worker iterates its
#: own copy of the dataset (PyTorch docs, torch.utils.data, "Multi-process data loading"), so
#: the batches, their order and, for a dataset that does not split itself by worker, their
#: number depend on it.
ITERABLE_WORKERS = (
    "fewer workers change an IterableDataset's batches (each worker iterates its own copy "
    'of it), so check_dataloader(loader, action="adapt") lowers only prefetch_factor'
)


def adapt_sentence(spec: LoaderSpec, free: int, *, iterable: bool = False) -> str:
    """What to change in the loader itself to fit ``free`` bytes, one sentence; for an
    IterableDataset (``iterable``), also that ``adapt`` will not lower ``num_workers``."""
    nw, pf = fitting(spec, free)
    keeps = not iterable or nw == spec.num_workers
    if nw == 0:
        one = predict(replace(spec, num_workers=1, prefetch_factor=1)).peak
        text = (
            f"Or, in this /dev/shm: not even num_workers=1, prefetch_factor=1 fits (it needs "
            f"{format_iec(one)}): use smaller batches, or num_workers=0 (no shm, loading in "
            "the main process)"
        )
        return text + ("." if keeps else f"; {ITERABLE_WORKERS}.")
    peak = predict(replace(spec, num_workers=nw, prefetch_factor=pf)).peak
    text = (
        f"Or, in this /dev/shm: num_workers={nw}, prefetch_factor={pf} fits (predicted peak "
        f"{format_iec(peak)})"
    )
    if not keeps:
        return f"{text}, but {ITERABLE_WORKERS}."
    return f'{text}; check_dataloader(loader, action="adapt") makes that change.'
