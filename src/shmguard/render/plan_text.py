"""``shmguard plan``'s text report and its check and max-workers lines (its JSON body:
:func:`shmguard.render.json_bodies.plan_body`)."""

from __future__ import annotations

from shmguard.estimate.plan import WORKERS_LIMIT, Plan, PlanFit
from shmguard.fix.snippets import fix_snippets
from shmguard.render.escape import printable
from shmguard.render.measure_text import _kv, snippets_parts
from shmguard.render.parts import Part
from shmguard.units import format_iec


def _bytes(n: int) -> str:
    return f"{format_iec(n)} ({n:,} B)"


def loader_line(plan: Plan) -> str:
    """The loader in one line: ``4 workers x prefetch 2, batch 32 x 3x224x224 float32``."""
    r = plan.request
    if r.batch_bytes is not None:
        batch = f"batch of {format_iec(r.batch_bytes)}"
    else:
        assert r.sample_shape is not None
        batch = f"batch {r.batch_size} x {'x'.join(map(str, r.sample_shape))} {r.dtype}"
    flags = [
        name
        for name, on in (
            ("pin_memory", r.pin_memory),
            ("persistent_workers", r.persistent_workers),
            ("del batch", r.drops_batch),
        )
        if on
    ]
    if r.local_ranks > 1 or r.loaders > 1:
        flags.append(f"{r.local_ranks} local rank(s) x {r.loaders} loader(s)")
    tail = f" ({', '.join(flags)})" if flags else ""
    return f"{r.num_workers} workers x prefetch {r.prefetch_factor}, {batch}{tail}"


def plan_report(plan: Plan, fit: PlanFit | None = None) -> list[Part]:
    """The plan as parts: prediction, sizes with their basis, notes, snippets, and the check
    against this /dev/shm when ``fit`` is given."""
    from rich.text import Text

    p = plan.prediction
    rows = [
        ("loader", loader_line(plan)),
        (
            "batch",
            f"{_bytes(sum(plan.storages))} in {len(plan.storages)} storages; "
            f"{_bytes(plan.batch_pages)} in /dev/shm (B', whole 4 KiB pages)",
        ),
    ]
    if p.peak:
        q = plan.request.num_workers * plan.request.prefetch_factor
        rows += [
            (
                "steady",
                f"{_bytes(p.steady)}: {q + 1} batches (workers x prefetch queued + the one the "
                f"loop holds) + {p.semaphores // 4096} semaphore pages, queues full",
            ),
            (
                "peak",
                f"{_bytes(p.peak)}: {p.in_flight} batches + semaphores"
                + (
                    ", the transient inside next() while the loop still holds the last batch"
                    if not plan.request.drops_batch
                    else " (the loop drops each batch)"
                ),
            ),
        ]
        if p.pinned_memory:
            rows.append(("pinned memory", f"{_bytes(p.pinned_memory)} of ordinary memory"))
    if plan.shm is not None:
        rows.append(("shm size", f"{format_iec(plan.shm.bytes)}  ({plan.shm.basis})"))
    else:
        rows.append(("shm size", "any: num_workers=0 uses no /dev/shm"))
    mem = format_iec(plan.memory_limit) if plan.memory_limit is not None else "none"
    rows.append(("memory limit", f"{mem}  ({plan.memory_basis})"))
    parts: list[Part] = [
        (Text("Plan", style="bold underline"), False),
        (_kv(rows), False),
    ]
    if p.notes:
        parts.append((Text("Notes", style="bold"), False))
        from rich.table import Table

        notes = Table.grid(padding=(0, 1))
        notes.add_column(no_wrap=True)
        notes.add_column(overflow="fold")  # a long path folds, never cut with "…"
        for n in p.notes:
            notes.add_row("-", n)
        parts.append((notes, False))
    if fit is not None:
        parts.append((Text(fit_line(fit)), False))
    if plan.changes:
        parts.append((Text(""), False))
        parts += snippets_parts(fix_snippets(plan))
    return parts


def fit_line(fit: PlanFit) -> str:
    """``fits: ...`` or ``does not fit: ...``: the predicted peak against the free space (the
    path's control characters escaped)."""
    return printable(_fit_line(fit))


def _fit_line(fit: PlanFit) -> str:
    total = f" of {format_iec(fit.total)}" if fit.total is not None else ""
    if fit.fits:
        return (
            f"fits: predicted peak {format_iec(fit.peak)} <= {format_iec(fit.free)} free"
            f"{total} in {fit.path}"
        )
    return (
        f"does not fit: predicted peak {format_iec(fit.peak)} > {format_iec(fit.free)} free"
        f"{total} in {fit.path} (short by {format_iec(fit.peak - fit.free)})"
    )


def max_workers_line(n: int, free: int, path: str, plan: Plan) -> str:
    """How many workers fit, with what they were computed from."""
    path = printable(path)
    r = plan.request
    what = (
        f"prefetch {r.prefetch_factor}, B' {format_iec(plan.batch_pages)}"
        f"{', del batch' if r.drops_batch else ''}"
    )
    if r.local_ranks > 1 or r.loaders > 1:
        what += f", {r.local_ranks} local rank(s) x {r.loaders} loader(s)"
    if n == 0:
        return f"no worker fits in the {format_iec(free)} free in {path} ({what})"
    many = f"{n} or more workers" if n >= WORKERS_LIMIT else f"{n} worker{'s' if n > 1 else ''}"
    return f"{many} fit in the {format_iec(free)} free in {path} ({what})"
