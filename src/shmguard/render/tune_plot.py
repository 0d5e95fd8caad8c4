"""``tune --plot``: throughput and peak /dev/shm against num_workers, with the budget.

Two panels sharing the x axis: samples/s of every trial that ran (prefetch factors as
separate series, the recommended one circled), and its measured peak /dev/shm with the
DataLoader model's peak of every configuration (ruled-out ones included), under a dashed line
at the shm budget. matplotlib comes from the ``plot`` extra (:func:`shmguard.render.plot.pyplot`).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from shmguard.render.plot import pyplot
from shmguard.torch.tuning.model import TuneResult
from shmguard.torch.tuning.search import TOLERANCE
from shmguard.units import MiB


def plot_tune(result: TuneResult, path: Path) -> Path:
    """Draw ``result`` to ``path`` (the format follows the suffix) and return ``path``.

    Raises:
        shmguard.render.plot.PlotUnavailable: matplotlib is not installed.
        OSError: the file cannot be written.
    """
    plt = pyplot()
    fig, (top, low) = plt.subplots(2, 1, sharex=True, figsize=(8, 6), dpi=100)
    try:
        series: dict[str, list[tuple[int, float]]] = defaultdict(list)
        shm: dict[str, list[tuple[int, float]]] = defaultdict(list)
        model: list[tuple[int, float]] = []
        for t in result.trials:
            c = t.config
            name = "no workers" if c.num_workers == 0 else f"prefetch {c.prefetch_factor}"
            if c.persistent_workers:
                name += ", persistent"
            if t.ok and t.samples_per_s is not None:
                series[name].append((c.num_workers, t.samples_per_s))
            if t.peak_shm is not None and t.status != "ruled-out":
                shm[name].append((c.num_workers, t.peak_shm / MiB))
            if t.predicted_peak is not None:
                model.append((c.num_workers, t.predicted_peak / MiB))
        for name, pts in sorted(series.items()):
            pts.sort()
            top.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=name)
        rec = result.recommended
        if rec is not None and rec.samples_per_s is not None:
            top.plot(
                [rec.config.num_workers],
                [rec.samples_per_s],
                "o",
                markersize=14,
                markerfacecolor="none",
                color="tab:green",
                label="recommended",
            )
        if result.best is not None and result.best.samples_per_s:
            floor = result.best.samples_per_s * (1 - TOLERANCE)
            top.axhline(floor, color="tab:gray", linestyle=":", label="2% below the best")
        top.set_ylabel("samples/s")
        top.set_title(f"tune: {result.loader}"[:80])
        top.grid(True, alpha=0.3)
        top.legend(loc="lower right", fontsize="small")
        for name, pts in sorted(shm.items()):
            pts.sort()
            low.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=f"measured, {name}")
        if model:
            low.plot(
                [x for x, _ in model],
                [y for _, y in model],
                "x",
                color="tab:purple",
                label="model peak",
            )
        budget = result.budget.rank_shm / MiB
        low.axhline(budget, color="tab:red", linestyle="--", label=f"shm budget {budget:.0f} MiB")
        from matplotlib.ticker import MaxNLocator

        low.xaxis.set_major_locator(MaxNLocator(integer=True))
        top.set_ylim(bottom=0)
        low.set_xlabel("num_workers")
        low.set_ylabel("peak /dev/shm, MiB")
        low.set_ylim(0, max([budget, *(y for _, y in model)]) * 1.15)
        low.grid(True, alpha=0.3)
        low.legend(loc="upper left", fontsize="small")
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
