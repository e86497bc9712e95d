"""R² of the private regression forest against ε, beside its baselines.

For each data set and fold: our plaintext RandomForestRegressor; PrivateForestRegressor (the
real protocol, embedded server) with targets by randomized response on bins (the default) and
by Laplace noise on the clipped targets, at each ε; and the label-blind forest (ε = 0). All
forests have the same size and parameters (RandomForestRegressor's defaults:
``max_features=1.0``, fully grown). The target bounds are each training fold's minimum and
maximum (the estimator's default, which the guarantee does not cover; a deployment gives
public bounds).

    python benchmarks/label_privacy_regression.py --trees 100 --folds 3 \\
        --markdown docs/results/label_privacy_regression.md

Data sets (all offline): scikit-learn's diabetes (442 rows) and four generated ones of
``--max-rows`` rows: Friedman #1 (10 features, 5 informative, noise 1), #2 and #3
(noise 0 and the scikit-learn defaults' scale), and make_regression (20 features, 5
informative, noise 10). California housing is not used: it needs a download.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time

import numpy as np
from sklearn.datasets import (
    load_diabetes,
    make_friedman1,
    make_friedman2,
    make_friedman3,
    make_regression,
)
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold

from cipherforest.ensemble import RandomForestRegressor
from cipherforest.privacy import PrivateForestRegressor

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DATASETS = ("diabetes", "friedman1", "friedman2", "friedman3", "make_regression")


def load(name: str, n_rows: int):
    if name == "diabetes":
        return load_diabetes(return_X_y=True)
    if name == "friedman1":
        return make_friedman1(n_rows, n_features=10, noise=1.0, random_state=0)
    if name == "friedman2":
        return make_friedman2(n_rows, noise=0.0, random_state=0)
    if name == "friedman3":
        return make_friedman3(n_rows, noise=0.0, random_state=0)
    if name == "make_regression":
        return make_regression(n_rows, n_features=20, n_informative=5, noise=10.0,
                               random_state=0)
    raise ValueError(f"unknown data set {name!r}")


def methods(trees: int, seed: int, ledger: str, n_jobs: int | None, outputs=()):
    """(name, estimator factory) of every column (``outputs``: RR-on-bins with that many
    output values too)."""
    common = dict(n_estimators=trees, random_state=seed)
    private = dict(common, privacy_ledger=ledger, n_jobs=n_jobs)
    out = [("plaintext", lambda: RandomForestRegressor(**common, n_jobs=n_jobs)),
           ("blind", lambda: PrivateForestRegressor(**private, split_selection="blind"))]
    for kind in ("bins", "laplace"):
        for eps in EPSILONS:
            out.append((f"{kind} ε={eps:g}", lambda kind=kind, eps=eps: PrivateForestRegressor(
                **private, target_mechanism=kind, label_epsilon=eps)))
    for k in outputs:
        for eps in EPSILONS:
            out.append((f"bins k={k} ε={eps:g}", lambda k=k, eps=eps: PrivateForestRegressor(
                **private, target_outputs=k, label_epsilon=eps)))
    return out


def run(names, trees: int, folds: int, n_rows: int, n_jobs: int | None, outputs=()):
    results: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as ledger:
        for name in names:
            X, y = load(name, n_rows)
            scores: dict[str, list[float]] = {}
            started = time.perf_counter()
            for fold, (train, test) in enumerate(
                    KFold(folds, shuffle=True, random_state=0).split(X)):
                for label, make in methods(trees, fold, ledger, n_jobs, outputs):
                    model = make().fit(X[train], y[train])
                    scores.setdefault(label, []).append(r2_score(y[test], model.predict(X[test])))
            results[name] = scores
            seconds[name] = time.perf_counter() - started
            print(f"{name}: {X.shape[0]} rows, {seconds[name]:.0f} s", file=sys.stderr,
                  flush=True)
    return results, seconds


def table(results, trees: int, folds: int) -> str:
    columns = list(next(iter(results.values())))
    lines = ["| data set | " + " | ".join(columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for name, scores in results.items():
        lines.append(f"| {name} | " + " | ".join(f"{np.mean(scores[c]):.3f}" for c in columns)
                     + " |")
    lines.append("")
    lines.append(f"Mean R² over {folds} folds, {trees} trees per forest.")
    return "\n".join(lines)


def target_lines(results) -> str:
    lines = ["", "Target: RR-on-bins at ε = 2 within 0.03 R² of the plaintext forest.", ""]
    met = 0
    for name, scores in results.items():
        gap = np.mean(scores["plaintext"]) - np.mean(scores["bins ε=2"])
        laplace = np.mean(scores["plaintext"]) - np.mean(scores["laplace ε=2"])
        met += gap <= 0.03
        lines.append(f"- {name}: plaintext − bins(ε=2) = {gap:+.3f} "
                     f"({'met' if gap <= 0.03 else 'MISSED'}); plaintext − laplace(ε=2) = "
                     f"{laplace:+.3f}")
    lines.append(f"- met on {met} of {len(results)} data sets")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--max-rows", type=int, default=2000,
                        help="rows of the generated data sets")
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--outputs", type=int, nargs="*", default=[],
                        help="also RR-on-bins with this many output values (target_outputs)")
    parser.add_argument("--markdown", help="also write the tables to this file")
    args = parser.parse_args(argv)
    results, seconds = run(args.datasets, args.trees, args.folds, args.max_rows, args.n_jobs,
                           args.outputs)
    text = table(results, args.trees, args.folds) + "\n" + target_lines(results)
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
               f"{platform.python_version()}; {sum(seconds.values()):.0f} s in all")
    print(text)
    print(machine)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as file:
            file.write("# Private regression forest: R² against ε\n\n"
                       "Produced by `python benchmarks/label_privacy_regression.py "
                       + " ".join(argv if argv is not None else sys.argv[1:])
                       + "`.\n\n" + text + "\n\nMachine: " + machine + "\n")


if __name__ == "__main__":
    main()
