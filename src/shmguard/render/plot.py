"""``measure --plot``: the /dev/shm timeline as a PNG (matplotlib, the ``plot`` extra).

matplotlib is imported lazily with the non-interactive Agg backend; when it is missing,
:class:`PlotUnavailable` says how to install it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from shmguard.units import MiB

if TYPE_CHECKING:
    from shmguard.measure.sampler import Timeline


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed; ``str(err)`` says how to get it."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the non-interactive Agg backend.

    Raises:
        PlotUnavailable: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'shmguard[plot]'") from None
    return plt


def plot_timeline(
    timeline: Timeline,
    path: Path,
    *,
    limit: int | None = None,
    recommended: int | None = None,
    title: str = "/dev/shm used",
) -> Path:
    """Draw used MiB over seconds as a step line, with the tmpfs limit and the recommendation.

    Args:
        timeline: the sampler's record.
        path: output file; the format follows the suffix (``.png``, ``.svg``, ``.pdf``).
        limit: bytes of the tmpfs (dashed red line), or None.
        recommended: recommended bytes (dotted green line), or None.
        title: plot title.

    Returns:
        ``path``.

    Raises:
        PlotUnavailable: matplotlib is not installed.
        OSError: the file cannot be written.
    """
    plt = pyplot()
    xs = [t for t, _ in timeline.samples]
    ys = [u / MiB for _, u in timeline.samples]
    fig, ax = plt.subplots(figsize=(9, 4), dpi=100)
    try:
        ax.step(xs, ys, where="post", color="tab:blue", label="used (statvfs)")
        ax.plot([timeline.peak_t], [timeline.peak / MiB], "o", color="tab:blue")
        ax.annotate(
            f"peak {timeline.peak / MiB:.1f} MiB",
            (timeline.peak_t, timeline.peak / MiB),
            textcoords="offset points",
            xytext=(6, 6),
        )
        if limit:
            ax.axhline(
                limit / MiB, color="tab:red", linestyle="--", label=f"limit {limit / MiB:.0f} MiB"
            )
        if recommended:
            ax.axhline(
                recommended / MiB,
                color="tab:green",
                linestyle=":",
                label=f"recommended {recommended / MiB:.0f} MiB",
            )
        top = max([*ys, (recommended or 0) / MiB, 1.0]) * 1.15
        if limit and limit / MiB < top * 3:
            top = max(top, limit / MiB * 1.05)
        ax.set_ylim(0, top)
        ax.set_xlabel("seconds")
        ax.set_ylabel("MiB")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left")
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
