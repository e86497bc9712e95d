"""Nanoseconds per row of gradient boosting's fused gradient-and-loss passes
(``ensemble/_gb_losses.py``), one thread, for one or more source trees side by side.

Each source tree runs in its own subprocess (its numba cache, its kernels); the runs of the
trees are interleaved ``--runs`` times and each cell is the median. Raw scores are normal
with scale ``--scale`` (2: an early model; 8: a confident one, whose binomial terms mostly
take ``_add_log1p``'s series), labels uniform, unit weights unless ``--weighted``::

    python dev/loss_passes.py                                  # this checkout
    python dev/loss_passes.py --src /tmp/main/src --src src     # before / after
    python dev/loss_passes.py --scale 8 --weighted
    python dev/loss_passes.py --threads 2                       # sharing a pass

``--threads N`` instead times whole passes (``chunked_gradient_and_loss``) in this process at
pendigits', 100k and 1M rows: on the calling thread alone, shared with a pool of N threads,
and as the fit runs them (shared only when the loss's ``row_ns`` estimate times the rows
reaches ``POOL_MIN_PASS_NS``); ms per pass, median of ``--repeats`` alternated passes.
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


THREAD_ROWS = (8_244, 100_000, 1_000_000)


def time_sharing(n_threads: int, scale: float, repeats: int) -> None:
    """Print ms per whole pass: one thread, shared with ``n_threads`` pool threads, and as
    the fit decides (``POOL_MIN_PASS_NS``)."""
    from concurrent.futures import ThreadPoolExecutor

    from cipherforest.ensemble import _gb_losses as losses
    from cipherforest.tree._weights import unit_weight_view

    rng = np.random.default_rng(0)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; pool of "
          f"{n_threads} threads; unit weights, raw scale {scale}; ms per pass, median of "
          f"{repeats} alternated passes; 1-min load average {os.getloadavg()[0]:.1f}\n")
    print("| pass | rows | one thread | shared | as fitted | fit shares | est. one-thread ms |")
    print("|---|---:|---:|---:|---:|---|---:|")
    with ThreadPoolExecutor(n_threads) as pool:
        for rows in THREAD_ROWS:
            w = unit_weight_view(rows)
            cases = {
                "binomial": (losses._binomial_gradient_loss, losses.BINOMIAL_ROW_NS,
                             rng.integers(0, 2, rows).astype(np.int8),
                             rng.normal(scale=scale, size=rows), np.empty(rows)),
                "multinomial (10 classes)": (
                    losses._multinomial_gradient_loss, 10 * losses.MULTINOMIAL_CLASS_ROW_NS,
                    rng.integers(0, 10, rows).astype(np.int8),
                    np.asfortranarray(rng.normal(scale=scale, size=(rows, 10))),
                    np.empty((rows, 10), order="F")),
                "squared error": (losses._squared_error_gradient_loss,
                                  losses.SQUARED_ERROR_ROW_NS, rng.normal(size=rows),
                                  rng.normal(scale=scale, size=rows), np.empty(rows)),
            }
            for name, (kernel, row_ns, y, raw, out) in cases.items():
                variants = {"one thread": (None, row_ns), "shared": (pool, float("inf")),
                            "as fitted": (pool, row_ns)}
                times = {label: [] for label in variants}
                for _ in range(repeats + 1):  # the first round compiles / warms, not kept
                    for label, (use_pool, cost) in variants.items():
                        start = time.perf_counter()
                        losses.chunked_gradient_and_loss(kernel, y, raw, w, out, use_pool, cost)
                        times[label].append(time.perf_counter() - start)
                ms = {label: 1e3 * float(np.median(t[1:])) for label, t in times.items()}
                shares = rows * row_ns >= losses.POOL_MIN_PASS_NS
                print(f"| {name} | {rows:,} | {ms['one thread']:.3f} | {ms['shared']:.3f} | "
                      f"{ms['as fitted']:.3f} | {'yes' if shares else 'no'} | "
                      f"{rows * row_ns / 1e6:.3f} |")


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
    parser.add_argument("--threads", type=int, default=None,
                        help="time whole passes shared with a pool of this many threads")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads is not None:
        time_sharing(args.threads, args.scale, args.repeats)
        return 0
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
