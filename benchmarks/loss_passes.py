"""Nanoseconds per row of gradient boosting's fused gradient-and-loss passes
(``ensemble/_gb_losses.py``), one thread, for one or more source trees side by side.

Each source tree runs in its own subprocess (its numba cache, its kernels); the runs of the
trees are interleaved ``--runs`` times and each cell is the median. Raw scores are normal
with scale ``--scale`` (2: an early model; 8: a confident one, whose binomial terms mostly
take ``_add_log1p``'s series), labels uniform, unit weights unless ``--weighted``::

    python benchmarks/loss_passes.py                                  # this checkout
    python benchmarks/loss_passes.py --src /tmp/main/src --src src     # before / after
    python benchmarks/loss_passes.py --scale 8 --weighted
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

KERNELS = ("binomial", "multinomial (10 classes)", "squared error")


def time_kernels(rows: int, scale: float, weighted: bool, repeats: int) -> dict:
    """Median ns per row of each kernel on one thread, in this process's cipherforest."""
    from cipherforest.ensemble import _gb_losses as losses

    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 2.0, size=rows) if weighted else np.ones(rows)
    cases = {
        "binomial": (losses._binomial_gradient_loss, rng.integers(0, 2, rows).astype(float),
                     rng.normal(scale=scale, size=rows), np.empty(rows)),
        "multinomial (10 classes)": (
            losses._multinomial_gradient_loss, rng.integers(0, 10, rows).astype(np.int8),
            np.asfortranarray(rng.normal(scale=scale, size=(rows, 10))),
            np.empty((rows, 10), order="F")),
        "squared error": (losses._squared_error_gradient_loss, rng.normal(size=rows),
                          rng.normal(scale=scale, size=rows), np.empty(rows)),
    }
    result = {}
    for name, (kernel, y, raw, out) in cases.items():
        kernel(y, raw, w, out, 0, rows)  # compile or load
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            kernel(y, raw, w, out, 0, rows)
            times.append(time.perf_counter() - start)
        result[name] = float(np.median(times)) / rows * 1e9
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", action="append", type=Path, default=None,
                        help="a cipherforest source tree (repeatable; default: the installed "
                             "one)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--scale", type=float, default=2.0)
    parser.add_argument("--weighted", action="store_true",
                        help="weights uniform in [0.5, 2] instead of 1")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20, help="passes timed per run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if args.worker:
        print(json.dumps(time_kernels(args.rows, args.scale, args.weighted, args.repeats)))
        return 0
    sources = args.src or [None]
    cells: dict[str, list[dict]] = {}
    for _ in range(args.runs):
        for src in sources:
            env = dict(os.environ)
            if src is not None:
                if not (src / "cipherforest").is_dir():
                    parser.error(f"--src {src}: no cipherforest package in it")
                env["PYTHONPATH"] = str(src.resolve())
            command = [sys.executable, __file__, "--worker", "--rows", str(args.rows),
                       "--scale", str(args.scale), "--repeats", str(args.repeats)]
            proc = subprocess.run(command + (["--weighted"] if args.weighted else []),
                                  env=env, capture_output=True, text=True, check=True)
            label = str(src) if src is not None else "installed"
            cells.setdefault(label, []).append(json.loads(proc.stdout.splitlines()[-1]))
    print(f"{platform.processor() or platform.machine()}, one core; {args.rows} rows, raw "
          f"scale {args.scale}, {'weighted' if args.weighted else 'unit weights'}; ns per "
          f"row, median of {args.runs} runs x {args.repeats} passes\n")
    print("| sources | " + " | ".join(KERNELS) + " |")
    print("|---|" + "---:|" * len(KERNELS))
    for label, runs in cells.items():
        medians = [float(np.median([run[name] for run in runs])) for name in KERNELS]
        print(f"| {label} | " + " | ".join(f"{m:.1f}" for m in medians) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
