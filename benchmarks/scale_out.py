"""The encrypted forest on Dask: the scale-out runs side by side and a scaling model.

Reads the work directories of ``benchmarks/private_forest_service.py`` runs made with
``--dask-workers N`` (``cipherforest serve --dask-workers N``: the label work on N Dask worker
processes of this machine) and prints, per run: training rows, workers, upload bytes per row,
train seconds, rounds, the mean seconds of the *full* levels (those whose nodes still hold
every training row: the first levels, before nodes fall below ``min_samples_split``; told
apart by the workers' CPU seconds per level), the
bytes the driver and the workers exchanged per level (the server's log), peak memory (PSS
of every process) and whether the encrypted predictions equal the GIPE forest's. Then the
speed-up of N workers over one on the same data, level by level over the levels both
runs reached (a run stopped with ``--stop-after`` counts), and a *model* — labelled as such —
of the time and memory of 1M and 10M rows on N workers, from the measured cost per (row,
tree, worker) of a full level of the largest finished Gini run, the levels' count growing by
one per doubling of the rows, the label rotations' exact bytes per row, and an upper bound
for all processes' memory; and the model made from each smaller finished run checked
against the largest one.

Usage (the runs first, each resumable; then this script)::

    python benchmarks/private_forest_service.py --work RUNS/synthetic30000_w2 \\
        --dataset synthetic30000 --dask-workers 2
    python benchmarks/private_forest_service.py --work RUNS/synthetic30000_w1 \\
        --dataset synthetic30000 --dask-workers 1
    python benchmarks/private_forest_service.py --work RUNS/synthetic100000_w2 \\
        --dataset synthetic100000 --dask-workers 2
    python benchmarks/scale_out.py RUNS/synthetic30000_w1 RUNS/synthetic30000_w2 \\
        RUNS/synthetic100000_w2
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

LEVEL_LINE = re.compile(r"level: (\d+) shards, ([\d.]+) MB of tasks out, ([\d.]+) MB of "
                        r"partial sums back, ([\d.]+) s(?:, ([\d.]+) CPU s)?")
# Held on the workers per training row: one 256 KiB BFV label rotation per two rows
# (two 60-bit primes, N = 8192, two rotation parts; label_layout.py measures it).
LABEL_BYTES_PER_ROW = 131_072


def read_run(work: Path) -> dict:
    log = json.loads((work / "run.json").read_text())
    params, segments = log["params"], log["segments"]
    rounds = [r for s in segments for r in s["rounds"]]
    levels = []
    server_log = work / "server.log"
    if server_log.exists():
        for line in server_log.read_text().splitlines():
            match = LEVEL_LINE.search(line)
            if match:
                shards, out, back, seconds, cpu = match.groups()
                levels.append({"shards": int(shards), "out_mb": float(out),
                               "back_mb": float(back), "seconds": float(seconds),
                               "cpu": None if cpu is None else float(cpu)})
    steps: dict[str, float] = {}
    for s in segments:
        for step in s["steps"]:
            steps[step["step"]] = steps.get(step["step"], 0.0) + step["seconds"]
    train_csv = work / "train.csv"
    train_rows = (sum(1 for _ in train_csv.open()) - 1) if train_csv.exists() else None
    package = work / "model" / "package"
    upload = sum(f.stat().st_size for f in package.glob("*.msg")) if package.exists() else 0
    result = log.get("result")
    return {"work": work, "params": params, "rounds": rounds, "levels": levels, "steps": steps,
            "upload": upload, "result": result, "train_rows": train_rows,
            "finished": result is not None,
            "peak_gb": max((s.get("peak_pss_gb", 0.0) for s in segments), default=0.0),
            "machine": segments[-1]["machine"] if segments else ""}


def full_levels(run: dict) -> list[dict]:
    """The levels whose open nodes still hold (nearly) every row: the first ones, until a
    level's cost falls below 90 % of the first level's. The cost is the workers' CPU seconds
    where the log has them for every level (a busy machine stretches wall seconds, not CPU
    seconds), else wall seconds."""
    levels = run["levels"]
    if not levels:
        return []
    key = "cpu" if all(level["cpu"] is not None for level in levels) else "seconds"
    first = levels[0][key]
    out = []
    for level in levels:
        if level[key] < 0.9 * first and out:
            break
        out.append(level)
    return out


def summary(run: dict) -> dict:
    params, result = run["params"], run["result"]
    train_rows = run["train_rows"]
    full = full_levels(run)
    level_s = sum(level["seconds"] for level in full) / len(full) if full else math.nan
    cpus = [level["cpu"] for level in full if level["cpu"] is not None]
    level_cpu = sum(cpus) / len(cpus) if cpus else math.nan
    all_cpu = [level["cpu"] for level in run["levels"] if level["cpu"] is not None]
    moved = (sum(level["out_mb"] + level["back_mb"] for level in run["levels"])
             / len(run["levels"])) if run["levels"] else math.nan
    return {"dataset": params["dataset"], "workers": params.get("dask_workers"),
            "selection": params["split_selection"],
            "finished": run["finished"], "level_seconds": [lv["seconds"] for lv in run["levels"]],
            "trees": params["trees"], "train_rows": train_rows,
            "upload_per_row": run["upload"] / train_rows if train_rows else math.nan,
            "train_s": run["steps"].get("train", math.nan), "levels": len(run["levels"]),
            "full_level_s": level_s, "n_full": len(full), "moved_mb": moved,
            "full_level_cpu": level_cpu,
            "levels_cpu": sum(all_cpu) if len(all_cpu) == len(run["levels"]) else math.nan,
            "max_moved_mb": max((lv["out_mb"] + lv["back_mb"] for lv in run["levels"]),
                                default=math.nan),
            "peak_gb": run["peak_gb"],
            "equal": None if not result else result["agreement"],
            "accuracy": None if not result else result["encrypted"],
            "gipe": None if not result else result["gipe"]}


def model_rows(base: dict, rows: int, workers: int) -> dict:
    """Time and memory of ``rows`` training rows on ``workers`` workers, from ``base`` (a
    finished run): full levels cost in proportion to rows × trees / workers; the number of
    levels grows by one per doubling of the rows (nodes halve per level until they fall
    below min_samples_split); the levels after the full ones cost what they cost in the
    base run, scaled alike. Memory: the label rotations (exact bytes per row, split over the
    workers) and an upper bound for all processes, the base run's peak beyond its label
    rotations scaled with the rows (part of it — interpreters, libraries, the client — is
    fixed, so the bound overstates)."""
    extra_levels = max(0.0, math.log2(rows / base["train_rows"]))
    if base["levels_cpu"] == base["levels_cpu"]:  # CPU seconds measured: a core per worker
        scale = rows / base["train_rows"] / workers
        full, total = base["full_level_cpu"], base["levels_cpu"]
    else:  # wall seconds of the run's own workers
        scale = rows / base["train_rows"] * base["workers"] / workers
        full, total = base["full_level_s"], base["train_s"]
    tail = total - base["n_full"] * full  # the narrowing levels
    seconds = (base["n_full"] + extra_levels) * full * scale + tail * scale
    rest_per_row = max(0.0, base["peak_gb"] * 1e9 / base["train_rows"] - LABEL_BYTES_PER_ROW)
    return {"rows": rows, "workers": workers, "hours": seconds / 3600,
            "per_worker_gb": rows * LABEL_BYTES_PER_ROW / workers / 1e9,
            "total_gb": rows * (LABEL_BYTES_PER_ROW + rest_per_row) / 1e9}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("works", nargs="+", type=Path, help="run work directories")
    args = parser.parse_args(argv)
    read = [read_run(work) for work in args.works]
    runs = [summary(run) for run in read]
    print(read[0]["machine"])
    print()
    print("| data set | selection | training rows | Dask workers | upload B/row | train s | "
          "levels | full levels: mean s (CPU s) | MB moved per level: mean / max | peak GB (PSS) | "
          "accuracy (GIPE forest) | equal to the GIPE forest |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in runs:
        equal = "—" if r["equal"] is None else f"{100 * r['equal']:.2f} %"
        acc = "—" if r["accuracy"] is None else f"{r['accuracy']:.4f} ({r['gipe']:.4f})"
        rows = "—" if r["train_rows"] is None else f"{r['train_rows']:,}"
        print(f"| {r['dataset']} | {r['selection']} | {rows} | {r['workers']} | "
              f"{r['upload_per_row']:,.0f} | {r['train_s']:,.0f} | {r['levels']} | {r['n_full']}: "
              f"{r['full_level_s']:.0f} ({r['full_level_cpu']:.0f}) | "
              f"{r['moved_mb']:.1f} / {r['max_moved_mb']:.1f} | "
              f"{r['peak_gb']:.2f} | {acc} | {equal} |")
    by_data: dict[tuple[str, str], dict[int, dict]] = {}  # (data set, selection) -> runs
    for r in runs:
        by_data.setdefault((r["dataset"], r["selection"]), {})[r["workers"]] = r
    for (dataset, selection), by_workers in by_data.items():
        if 1 in by_workers and len(by_workers) > 1:
            one = by_workers[1]
            for n, r in sorted(by_workers.items()):
                if n > 1:
                    pairs = list(zip(one["level_seconds"], r["level_seconds"], strict=False))
                    ratios = ", ".join(f"{a / b:.2f}×" for a, b in pairs)
                    line = (f"\n{dataset} ({selection}): {n} workers vs 1, level by level "
                            f"over the {len(pairs)} levels both ran: {ratios} faster")
                    if one["finished"] and r["finished"]:
                        line += f"; training {one['train_s'] / r['train_s']:.2f}× faster"
                    print(line)
    # The model is of the Gini selection's levels (rr and blind grow without rounds).
    gini = [r for r in runs if r["selection"] == "gini"]
    finished = [r for r in gini if r["finished"] and r["full_level_s"] == r["full_level_s"]]
    if not finished:
        return 0
    base = max(finished, key=lambda r: (r["train_rows"], r["workers"]))
    wall = base["full_level_s"] * base["workers"] / (base["train_rows"] * base["trees"])
    cpu = base["full_level_cpu"] / (base["train_rows"] * base["trees"])
    print(f"\nMeasured ({base['dataset']}, {base['workers']} workers): a full level costs "
          f"{cpu * 1e6:.1f} µs of worker CPU per (training row, tree) ({wall * 1e6:.1f} µs "
          f"of wall time × workers on the shared machine); {base['moved_mb']:.1f} MB move "
          "between the driver and the workers per level (mean; tasks out, partial sums "
          "back).")
    print("\nModel (from those measurements, not a run: one core of this machine per "
          f"worker, {base['trees']} trees, the same data shape, the network not counted):\n")
    print("| training rows | workers | hours | label rotations per worker GB | "
          "all processes GB (upper bound) |")
    print("|---:|---:|---:|---:|---:|")
    for rows in (750_000, 7_500_000):
        for workers in (2, 8, 32):
            m = model_rows(base, rows, workers)
            print(f"| {rows:,} | {workers} | {m['hours']:.1f} | {m['per_worker_gb']:.1f} | "
                  f"{m['total_gb']:.0f} |")
    # The model checked against a run: made from each smaller finished run, for the base's rows.
    for small in finished:
        if small["train_rows"] < base["train_rows"] and small["levels_cpu"] == small["levels_cpu"]:
            m = model_rows(small, base["train_rows"], base["workers"])
            measured_h = base["levels_cpu"] / base["workers"] / 3600
            print(f"\nCheck: the model made from {small['dataset']} "
                  f"({small['train_rows']:,} rows) "
                  f"predicts {m['hours']:.2f} h of CPU per worker and at most "
                  f"{m['total_gb']:.1f} GB for {base['dataset']} ({base['train_rows']:,} rows, "
                  f"{base['workers']} workers); measured {measured_h:.2f} h "
                  f"({base['levels_cpu']:,.0f} CPU s) and {base['peak_gb']:.2f} GB.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
