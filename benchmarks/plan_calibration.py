"""Calibration of the DataLoader shm model (src/shmguard/estimate/dataloader.py) against real runs.

Runs ``shmguard measure --json`` (a real sandbox, real torch) on the bundled
``shmguard.examples.grid_loader`` over a grid of 32 configurations: workers 1-8, prefetch 1-4,
batches of 1-20 MiB (1.0-21.0 MB), float32 and uint8, tensor, dict and numpy returns, slow
consumers (0.15 s per batch, so the queues fill; some with ``del batch``) and fast ones. The
raw measure JSON of each run goes to benchmarks/results/plan_calibration.jsonl, one line per
run with the configuration beside it.

Per configuration it prints the measured steady level and transient peak next to the model's
(``predict``) and predicted / measured. The measured steady level is the plateau: the highest
level the timeline held for at least ``--hold`` seconds in one stretch (default 0.05 s; a slow
consumer's step is 0.15 s). The peak is measure's own (every poll, not the thinned timeline).
Both are above the sandbox's baseline. The done-when (issue 9): predicted never below measured;
for slow consumers steady and peak within 15% wherever workers x prefetch >= 4; fast consumers
apart, against the model's bound (and the lowest level it expects from them).

``--probe`` also probes the seed configuration (32x3x224x224 float32, 4 workers, prefetch 2;
``shmguard.examples.seed_loader`` with 0.1 s steps, 20 batches) with ``shmguard probe --json``
and compares ``shmguard plan``'s recommendation with the probed minimum; the JSON goes to
benchmarks/results/plan_probe.json.

Run (root, torch; about 5 minutes on 2 cores): ``python benchmarks/plan_calibration.py
[--repeats N] [--only 3 7] [--probe] [--markdown]``; ``--from FILE`` reprints the tables from a
saved jsonl (with the model as it is now).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from shmguard.estimate import LoaderSpec, padded_bytes, predict
from shmguard.examples.grid_loader import batch_storages

RESULTS = Path(__file__).resolve().parent / "results"
JSONL = RESULTS / "plan_calibration.jsonl"
PROBE_JSON = RESULTS / "plan_probe.json"
MiB = 2**20

# (workers, prefetch, batch MiB, dtype, returns, consumer, del batch)
GRID: tuple[tuple[int, int, float, str, str, str, bool], ...] = (
    (1, 1, 1, "float32", "tensor", "slow", False),
    (1, 2, 5, "uint8", "tensor", "slow", False),
    (1, 4, 20, "float32", "tensor", "slow", False),
    (2, 1, 5, "float32", "numpy", "slow", False),
    (2, 2, 1, "uint8", "dict", "slow", False),
    (2, 2, 5, "float32", "tensor", "slow", False),
    (2, 2, 20, "uint8", "numpy", "slow", False),
    (2, 4, 5, "float32", "dict", "slow", False),
    (3, 2, 10, "float32", "tensor", "slow", False),
    (4, 1, 20, "float32", "tensor", "slow", False),
    (4, 1, 5, "uint8", "dict", "slow", False),
    (4, 2, 1, "float32", "numpy", "slow", False),
    (4, 2, 5, "uint8", "tensor", "slow", False),
    (4, 2, 18.375, "float32", "tensor", "slow", False),
    (4, 2, 20, "float32", "dict", "slow", False),
    (4, 4, 5, "float32", "numpy", "slow", False),
    (6, 2, 2, "uint8", "tensor", "slow", False),
    (8, 1, 5, "float32", "tensor", "slow", False),
    (8, 2, 1, "uint8", "numpy", "slow", False),
    (8, 2, 10, "float32", "dict", "slow", False),
    (8, 4, 1, "float32", "tensor", "slow", False),
    (8, 4, 20, "uint8", "tensor", "slow", False),
    (2, 2, 5, "float32", "tensor", "slow", True),
    (4, 2, 20, "float32", "dict", "slow", True),
    (1, 1, 5, "float32", "tensor", "fast", False),
    (1, 4, 20, "float32", "numpy", "fast", False),
    (2, 2, 1, "uint8", "tensor", "fast", False),
    (2, 4, 20, "float32", "tensor", "fast", False),
    (4, 2, 5, "float32", "dict", "fast", False),
    (4, 2, 18.375, "float32", "tensor", "fast", False),
    (8, 2, 5, "uint8", "numpy", "fast", False),
    (8, 4, 1, "float32", "dict", "fast", False),
)


def config_dict(row: tuple[int, int, float, str, str, str, bool]) -> dict[str, Any]:
    """One grid row as a named mapping (what the jsonl stores)."""
    nw, pf, mib, dtype, returns, consumer, drop = row
    return {
        "workers": nw,
        "prefetch": pf,
        "batch_mib": mib,
        "dtype": dtype,
        "returns": returns,
        "consumer": consumer,
        "del_batch": drop,
    }


def loader_argv(cfg: dict[str, Any]) -> list[str]:
    """The grid loader's command line for ``cfg``."""
    argv = [sys.executable, "-m", "shmguard.examples.grid_loader"]
    argv += ["--workers", str(cfg["workers"]), "--prefetch", str(cfg["prefetch"])]
    argv += ["--batch-mib", str(cfg["batch_mib"]), "--dtype", cfg["dtype"]]
    argv += ["--returns", cfg["returns"], "--consumer", cfg["consumer"]]
    return argv + (["--del-batch"] if cfg["del_batch"] else [])


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run ``shmguard measure --json`` on the grid loader; the parsed JSON."""
    cmd = [sys.executable, "-m", "shmguard", "measure", "--json", "--timeout", "300"]
    done = subprocess.run(
        [*cmd, "--", *loader_argv(cfg)], capture_output=True, text=True, check=False
    )
    if not done.stdout.strip():
        raise RuntimeError(f"measure printed nothing (exit {done.returncode}): {done.stderr}")
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def plateau(timeline: list[list[float]], hold: float) -> int:
    """The highest level held for at least ``hold`` seconds in one stretch: the largest, over
    every window of ``hold`` seconds, of the lowest level within it. ``timeline`` is measure's
    ``[[t, used], ...]`` change points (each level lasts until the next point)."""
    best = 0
    for i, (t0, _) in enumerate(timeline):
        low = None
        for t, used in timeline[i:]:
            if t >= t0 + hold:
                break
            low = used if low is None else min(low, used)
        if low is not None and t0 + hold <= timeline[-1][0]:
            best = max(best, int(low))
    return best


def evaluate(cfg: dict[str, Any], data: dict[str, Any], hold: float) -> dict[str, Any]:
    """Measured steady and peak next to the model's, with ratios (predicted / measured)."""
    b = padded_bytes(batch_storages(cfg["batch_mib"], cfg["dtype"], cfg["returns"]))
    spec = LoaderSpec(
        b,
        cfg["workers"],
        cfg["prefetch"],
        drops_batch=cfg["del_batch"],
        consumer=cfg["consumer"],
    )
    pred = predict(spec)
    base = int(data["baseline"])
    steady = plateau(data["timeline"], hold) - base
    peak = int(data["peak"]) - base
    return {
        "batch_pages": b,
        "q": cfg["workers"] * cfg["prefetch"],
        "ok": data["exit_status"] == 0,
        "steady": steady,
        "peak": peak,
        "pred_steady": pred.steady,
        "pred_peak": pred.peak,
        "fast_low": pred.fast_low,
        "steady_ratio": pred.steady / steady if steady else float("inf"),
        "peak_ratio": pred.peak / peak if peak else float("inf"),
        "thinned": data["sampling"]["samples"] > len(data["timeline"]) > 2000,
    }


def label(cfg: dict[str, Any]) -> str:
    """A short name: ``nw4 pf2 5MiB f32 dict slow+del``."""
    dt = "f32" if cfg["dtype"] == "float32" else "u8"
    tail = "+del" if cfg["del_batch"] else ""
    return (
        f"nw{cfg['workers']} pf{cfg['prefetch']} {cfg['batch_mib']:g}MiB {dt} "
        f"{cfg['returns']} {cfg['consumer']}{tail}"
    )


def report(rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Print the per-configuration tables and the done-when summary."""
    head = (
        f"{'configuration':<36} {'q':>3} {'steady MiB':>10} {'pred':>9} {'ratio':>6} "
        f"{'peak MiB':>9} {'pred':>9} {'ratio':>6}"
    )
    for consumer in ("slow", "fast"):
        print(f"\n{consumer} consumers" + ("" if consumer == "slow" else " (bound: pred peak)"))
        print(head + ("" if consumer == "slow" else f" {'low MiB':>8}"))
        for cfg, ev in rows:
            if cfg["consumer"] != consumer:
                continue
            line = (
                f"{label(cfg):<36} {ev['q']:>3} {ev['steady'] / MiB:>10.3f} "
                f"{ev['pred_steady'] / MiB:>9.3f} {ev['steady_ratio']:>6.3f} "
                f"{ev['peak'] / MiB:>9.3f} {ev['pred_peak'] / MiB:>9.3f} {ev['peak_ratio']:>6.3f}"
            )
            if consumer == "fast":
                line += f" {ev['fast_low'] / MiB:>8.3f}"
            if not ev["ok"]:
                line += "  (run failed)"
            print(line)
    slow = [ev for cfg, ev in rows if cfg["consumer"] == "slow"]
    fast = [ev for cfg, ev in rows if cfg["consumer"] == "fast"]
    big = [ev for ev in slow if ev["q"] >= 4]
    below = [label(c) for c, ev in rows if ev["pred_peak"] < ev["peak"]]
    print(
        f"\nruns: {len(rows)} ({len(slow)} slow, {len(fast)} fast); failed: "
        f"{sum(not ev['ok'] for _, ev in rows)}; timeline thinned: "
        f"{sum(ev['thinned'] for _, ev in rows)}"
    )
    print(f"predicted peak below measured: {len(below)} {below}")
    if slow:
        print(
            "slow, steady ratio: min {:.4f} max {:.4f}; peak ratio: min {:.4f} max {:.4f}".format(
                min(ev["steady_ratio"] for ev in slow),
                max(ev["steady_ratio"] for ev in slow),
                min(ev["peak_ratio"] for ev in slow),
                max(ev["peak_ratio"] for ev in slow),
            )
        )
    if big:
        within = sum(
            abs(ev["steady_ratio"] - 1) <= 0.15 and abs(ev["peak_ratio"] - 1) <= 0.15 for ev in big
        )
        print(f"slow with q >= 4: steady and peak both within 15%: {within}/{len(big)}")
        out = [
            f"{label(c)} (peak {ev['peak_ratio']:.3f})"
            for c, ev in rows
            if c["consumer"] == "slow" and ev["q"] >= 4 and abs(ev["peak_ratio"] - 1) > 0.15
        ]
        print(f"slow with q >= 4 outside 15%: {out}")
    if fast:
        inside = sum(ev["fast_low"] <= ev["peak"] <= ev["pred_peak"] for ev in fast)
        print(
            f"fast: measured peak between the model's low and its bound: {inside}/{len(fast)}; "
            f"peak ratio min {min(ev['peak_ratio'] for ev in fast):.4f} "
            f"max {max(ev['peak_ratio'] for ev in fast):.4f}"
        )


def markdown(rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """The same tables in Markdown (docs/model.md), sizes in bytes and MiB."""
    for consumer in ("slow", "fast"):
        low = " | model low MiB" if consumer == "fast" else ""
        print(
            f"\n| configuration | nw x pf | B' bytes | measured steady MiB | predicted steady MiB "
            f"| ratio | measured peak MiB | predicted peak MiB | ratio{low} |"
        )
        print("|---" * (10 if consumer == "fast" else 9) + "|")
        for cfg, ev in rows:
            if cfg["consumer"] != consumer:
                continue
            line = (
                f"| {label(cfg)} | {ev['q']} | {ev['batch_pages']:,} | {ev['steady'] / MiB:.3f} "
                f"| {ev['pred_steady'] / MiB:.3f} | {ev['steady_ratio']:.3f} "
                f"| {ev['peak'] / MiB:.3f} | {ev['pred_peak'] / MiB:.3f} | {ev['peak_ratio']:.3f}"
            )
            if consumer == "fast":
                line += f" | {ev['fast_low'] / MiB:.3f}"
            print(line + " |")


def probe_seed() -> None:
    """Probe the seed configuration once and compare plan's recommendation with its minimum."""
    from shmguard.estimate.plan import PlanRequest, make_plan

    argv = [sys.executable, "-m", "shmguard.examples.seed_loader", "--quiet"]
    argv += ["--batches", "20", "--step-time", "0.1"]
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", "probe", "--json", "--", *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    data = json.loads(done.stdout)
    PROBE_JSON.write_text(json.dumps(data, indent=1) + "\n")
    plan = make_plan(
        PlanRequest(batch_size=32, sample_shape=(3, 224, 224), dtype="float32", num_workers=4)
    )
    minimum = data["minimum"]
    print(
        f"\nprobe of the seed configuration ({time.monotonic() - t0:.0f} s, "
        f"{data['runs']} runs): minimum {minimum} B ({minimum / MiB:.2f} MiB)"
    )
    print(
        f"plan: steady {plan.prediction.steady} B, peak {plan.prediction.peak} B, "
        f"recommended {plan.shm.bytes} B ({plan.shm.bytes / MiB:.0f} MiB) = "
        f"{plan.shm.bytes / minimum:.3f}x the probed minimum"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1, help="runs per configuration")
    ap.add_argument("--only", type=int, nargs="+", help="grid row numbers (0-based) to run")
    ap.add_argument("--hold", type=float, default=0.05, help="plateau hold time in seconds")
    ap.add_argument("--from", dest="source", type=Path, help="reprint from a saved jsonl")
    ap.add_argument("--out", type=Path, default=JSONL, help=f"jsonl to write (default {JSONL})")
    ap.add_argument("--probe", action="store_true", help="also probe the seed configuration")
    ap.add_argument("--markdown", action="store_true", help="also print Markdown tables")
    args = ap.parse_args()
    rows: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if args.source:
        for line in args.source.read_text().splitlines():
            rec = json.loads(line)
            rows.append((rec["config"], evaluate(rec["config"], rec["measure"], args.hold)))
    else:
        picked = [GRID[i] for i in args.only] if args.only else list(GRID)
        t0 = time.monotonic()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w") as out:
            for n, row in enumerate(picked * args.repeats):
                cfg = config_dict(row)
                data = measure(cfg)
                out.write(json.dumps({"config": cfg, "measure": data}) + "\n")
                out.flush()
                rows.append((cfg, evaluate(cfg, data, args.hold)))
                print(f"[{n + 1}/{len(picked) * args.repeats}] {label(cfg)}", file=sys.stderr)
        print(f"grid: {len(rows)} runs in {time.monotonic() - t0:.0f} s (2 shared cores)")
    report(rows)
    if args.markdown:
        markdown(rows)
    if args.probe:
        probe_seed()


if __name__ == "__main__":
    main()
