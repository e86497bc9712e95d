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
informative, noise 10). California housing is not used: it needs a download. diffprivlib
gives no baseline: it does not import with this scikit-learn (the output says why);
"laplace" is the label-DP-by-Laplace-noise baseline.

``--refits mean ridge ridge_to_means`` measures each private forest with each of those
``leaf_refit`` values (the columns "bins", "bins+ridge", "bins+ridge_to_means"; each fit
of a fold and ε draws the same ỹ from the run's ledger, with the same seed) and, with
"ridge", adds "plaintext+ridge": the plaintext forest with its leaf values refitted as
``leaf_refit="ridge"`` refits them (:class:`RidgeRefitForest`). Without it every private
forest is ``leaf_refit="mean"``.

    python benchmarks/label_privacy_regression.py --trees 100 --folds 3 --max-rows 1000 \\
        --epsilons 1 2 4 8 --mechanisms bins piecewise --refits mean ridge

``--paper`` adds the column "paper": ``split_selection="paper"``, the exact variance rule on
the true targets (no guarantee; leaf means), computed by
:class:`~cipherforest.privacy.PrivateForestRegressorSimulator` (the estimator's forest
without the homomorphic rounds, which a hundred fully grown trees on these sets would take
hours of); with ``--attacks``, a "paper" row per set: the nearest-known-rows guess over the
trees that mode shows the server (it sees no target value, so the ỹ-based guesses do not
apply).

    python benchmarks/label_privacy_regression.py --trees 100 --folds 3 --max-rows 1000 \
        --epsilons 2 --mechanisms bins --paper

``--simulated-attacks`` prints the tree attacks on the simulator's forests of ``"rr"`` at ε = 2,
``"paper"`` and ``"blind"`` beside the plaintext control (``--trees`` trees, the first
``--attack-rows`` rows; no forced refits):

    python benchmarks/label_privacy_regression.py --simulated-attacks --trees 20 \
        --attack-rows 300 --datasets diabetes friedman1

``--attacks`` prints instead what a curious server learns of the true targets
(``cipherforest.privacy.attacks.target_recovery``) at ε ∈ {1, 2, 8} (``--attack-epsilons``):
one real fit per ε (embedded server wrapped in ``attacks.RecordingServer``, ``--trees``
trees, the first ``--attack-rows`` rows), scored over every training row by R² and MAE
beside guessing the mean (R² = 0). Guesses: ỹ itself; the leaf-neighbour mean of ỹ over the
server's trees; ỹ blended half and half with it; the mean true target of the 5 most
proximate of 10 % known rows; and forced refits (7 fits answered "busy", mean of the recorded
ỹ; distinct draws); the "blind" row's nearest known rows use label-blind trees (what the
features alone give). Positive controls: the "plaintext" row (trees grown on the ciphers and
the true targets, ỹ = y) and "fresh" (each refit draws its randomized response afresh).

    python benchmarks/label_privacy_regression.py --attacks --datasets diabetes friedman1
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
from cipherforest.privacy import (
    PrivateForestRegressor,
    PrivateForestRegressorSimulator,
    PrivateForestServer,
    attacks,
    ridge_leaf_values,
)
from label_privacy_boosting import diffprivlib_status  # this folder's script

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DATASETS = ("diabetes", "friedman1", "friedman2", "friedman3", "make_regression")
#: The target mechanisms measured by default (``--mechanisms``); the first is the estimator's.
MECHANISMS = ("bins", "laplace")
#: The leaf refits measured by default (``--refits``); "mean" is the estimator's.
REFITS = ("mean",)


class RidgeRefitForest:
    """Our plaintext RandomForestRegressor with its leaf values refitted as the private
    regressor's ``leaf_refit="ridge"`` refits them (the reference column of that refit)."""

    def __init__(self, **params):
        self.forest = RandomForestRegressor(**params)

    def _rows(self, X):
        """Every tree's leaf of each row, numbered across the trees' nodes."""
        return self.forest.apply(X) + self.offsets[:-1]

    def fit(self, X, y):
        self.forest.fit(X, y)
        self.offsets = np.concatenate([[0], np.cumsum(
            [tree.tree_.node_count for tree in self.forest.estimators_])])
        self.values = ridge_leaf_values(self._rows(X), int(self.offsets[-1]), y)
        return self

    def predict(self, X):
        return self.values[self._rows(X)].mean(axis=1)


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


def column(kind: str, refit: str, eps: float) -> str:
    """The column of a mechanism and leaf refit at ε ("bins ε=2", "bins+ridge ε=2")."""
    return f"{kind}{'' if refit == 'mean' else '+' + refit} ε={eps:g}"


def methods(trees: int, seed: int, ledger: str, n_jobs: int | None, outputs=(),
            epsilons=EPSILONS, mechanisms=MECHANISMS, refits=REFITS, paper=False):
    """(name, estimator factory) of every column (``outputs``: RR-on-bins with that many
    output values too; ``refits``: each private forest with these ``leaf_refit``, and the
    plaintext forest with the same refit beside it; ``paper``: the exact variance rule,
    simulated)."""
    common = dict(n_estimators=trees, random_state=seed)
    private = dict(common, privacy_ledger=ledger, n_jobs=n_jobs)
    out = [("plaintext", lambda: RandomForestRegressor(**common, n_jobs=n_jobs))]
    if "ridge" in refits:
        out.append(("plaintext+ridge", lambda: RidgeRefitForest(**common, n_jobs=n_jobs)))
    out.append(("blind", lambda: PrivateForestRegressor(**private, split_selection="blind",
                                                        leaf_refit="mean")))
    for kind in mechanisms:
        for refit in refits:
            for eps in epsilons:
                out.append((column(kind, refit, eps),
                            lambda kind=kind, eps=eps, refit=refit: PrivateForestRegressor(
                                **private, target_mechanism=kind, label_epsilon=eps,
                                leaf_refit=refit)))
    for k in outputs:
        for eps in epsilons:
            out.append((f"bins k={k} ε={eps:g}", lambda k=k, eps=eps: PrivateForestRegressor(
                **private, target_outputs=k, label_epsilon=eps)))
    if paper:
        out.append(("paper", lambda: PrivateForestRegressorSimulator(
            **private, split_selection="paper", leaf_refit="mean")))
    return out


def run(names, trees: int, folds: int, n_rows: int, n_jobs: int | None, outputs=(),
        epsilons=EPSILONS, mechanisms=MECHANISMS, refits=REFITS, paper=False):
    results: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as ledger:
        for name in names:
            X, y = load(name, n_rows)
            scores: dict[str, list[float]] = {}
            started = time.perf_counter()
            for fold, (train, test) in enumerate(
                    KFold(folds, shuffle=True, random_state=0).split(X)):
                for label, make in methods(trees, fold, ledger, n_jobs, outputs, epsilons,
                                             mechanisms, refits, paper):
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


def target_lines(results, mechanisms=MECHANISMS, refits=REFITS) -> str:
    """Per mechanism and refit, the gap to the plaintext forest (our RandomForestRegressor,
    leaf means) at ε = 2 on each set and how many sets are within the issue's 0.03."""
    lines = ["", "Target: at ε = 2 within 0.03 R² of the plaintext forest "
             "(plaintext − private per set).", ""]
    for kind in mechanisms:
        for refit in refits:
            gaps = {name: np.mean(scores["plaintext"])
                    - np.mean(scores[column(kind, refit, 2.0)])
                    for name, scores in results.items()}
            met = sum(gap <= 0.03 for gap in gaps.values())
            lines.append(f"- {column(kind, refit, 2.0)[:-4]}: "
                         + ", ".join(f"{name} {gap:+.3f}" for name, gap in gaps.items())
                         + f"; met on {met} of {len(gaps)}")
    if all("paper" in scores for scores in results.values()):
        lines.append("- paper (no guarantee): " + ", ".join(
            f"{name} {np.mean(scores['plaintext']) - np.mean(scores['paper']):+.3f}"
            for name, scores in results.items()))
    return "\n".join(lines)


KNOWN_SHARE = 0.1
KNOWN_NEIGHBOURS = 5


def attack_cells(X_cipher, trees, y_private, y, known) -> list[attacks.TargetAttackResult]:
    """The tree attacks' scores: ỹ, leaf neighbours, the blend, nearest known rows."""
    neighbours = attacks.leaf_neighbour_targets(trees, X_cipher, y_private)
    proximity = attacks.proximity_matrix(trees, X_cipher)
    nearest = attacks.proximity_nearest_targets(proximity, known, y[known], KNOWN_NEIGHBOURS)
    return [attacks.score_targets("ỹ", y_private, y),
            attacks.score_targets("neighbours", neighbours, y),
            attacks.score_targets("blend", attacks.denoised_targets(y_private, neighbours, 0.5),
                                  y),
            attacks.score_targets("nearest", nearest, y, known)]


def cell(result: attacks.TargetAttackResult) -> str:
    """A table cell: R² / MAE."""
    return f"{result.r2:.2f} / {result.mae:.3g}"


def attack_data(name: str, n_rows: int):
    """The first ``n_rows`` rows of a set and the rows whose targets the attacker knows."""
    X, y = load(name, n_rows)
    X, y = X[:n_rows], y[:n_rows]
    known = np.random.default_rng(0).choice(y.shape[0], int(KNOWN_SHARE * y.shape[0]),
                                            replace=False)
    return X, y, known


def attack_table(names, trees: int, n_rows: int, epsilons, paper: bool = False) -> str:
    lines = ["| data set | ε | mean's MAE | ỹ | leaf neighbours | blend | nearest known | "
             "refits: one fit | refits: mean of 7 (draws) | fresh draws: mean of 7 |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        X, y, known = attack_data(name, n_rows)
        X_cipher = None
        for eps in epsilons:
            with tempfile.TemporaryDirectory() as ledger:
                recorder = attacks.RecordingServer(PrivateForestServer())
                PrivateForestRegressor(trees, random_state=0, label_epsilon=eps,
                                       privacy_ledger=ledger, server=recorder).fit(X, y)
                transcript = recorder.transcript
                X_cipher = transcript.X_cipher
                cells = attack_cells(X_cipher, transcript.trees,
                                     transcript.first("setup").arrays["y_rr"], y, known)
                refits = attacks.forced_refit_targets(
                    PrivateForestRegressor(trees, label_epsilon=eps, privacy_ledger=ledger),
                    X, y)
            with tempfile.TemporaryDirectory() as ledger, attacks.fresh_randomized_labels():
                fresh = attacks.forced_refit_targets(
                    PrivateForestRegressor(trees, label_epsilon=eps, privacy_ledger=ledger),
                    X, y)
            lines.append(f"| {name} | {eps:g} | {cells[0].baseline_mae:.3g} | "
                         + " | ".join(cell(r) for r in cells)
                         + f" | {cell(refits.single_fit)} | {cell(refits.averaged)} "
                         f"({refits.distinct_draws}) | {cell(fresh.averaged)} |")
        with tempfile.TemporaryDirectory() as ledger:
            recorder = attacks.RecordingServer(PrivateForestServer())
            PrivateForestRegressor(trees, random_state=0, split_selection="blind",
                                   privacy_ledger=ledger, server=recorder).fit(X, y)
            proximity = attacks.proximity_matrix(recorder.transcript.trees, X_cipher)
        blind = attacks.score_targets("nearest", attacks.proximity_nearest_targets(
            proximity, known, y[known], KNOWN_NEIGHBOURS), y, known)
        lines.append(f"| {name} | blind (0) | {blind.baseline_mae:.3g} | | | | {cell(blind)} "
                     "| | | |")
        if paper:  # the server's trees of the exact variance rule (its simulated forest)
            with tempfile.TemporaryDirectory() as ledger:
                exact = PrivateForestRegressorSimulator(
                    trees, random_state=0, split_selection="paper", leaf_refit="mean",
                    privacy_ledger=ledger).fit(X, y)
            nearest = attacks.score_targets("nearest", attacks.proximity_nearest_targets(
                attacks.proximity_matrix(exact.trees_, exact.encryptor_.transform(X)),
                known, y[known], KNOWN_NEIGHBOURS), y, known)
            lines.append(f"| {name} | paper (∞) | {nearest.baseline_mae:.3g} | | | | "
                         f"{cell(nearest)} | | | |")
        plain = RandomForestRegressor(trees, random_state=0).fit(X_cipher, y)
        cells = attack_cells(X_cipher, attacks.forest_trees(plain), y, y, known)
        lines.append(f"| {name} | plaintext | {cells[0].baseline_mae:.3g} | "
                     + " | ".join(cell(r) for r in cells) + " | | | |")
    lines += ["", f"R² / MAE of the server's guess of the true targets over the training rows "
              f"({trees} trees; nearest known: {KNOWN_SHARE:.0%} of the rows known, scored on "
              "the others). R² = 0 is guessing the mean."]
    return "\n".join(lines)


def simulated_attack_table(names, trees: int, n_rows: int) -> str:
    """The tree attacks on the server's view of ``"rr"`` at ε = 2, ``"paper"`` and
    ``"blind"``, each forest by :class:`PrivateForestRegressorSimulator` (the estimator's
    trees and ỹ without the rounds), beside the plaintext control."""
    lines = ["| data set | mode | ỹ | leaf neighbours | blend | nearest known |",
             "|---|---|---:|---:|---:|---:|"]
    for name in names:
        X, y, known = attack_data(name, n_rows)
        fitted = {}
        for mode in ("rr", "paper", "blind"):
            with tempfile.TemporaryDirectory() as ledger:
                fitted[mode] = PrivateForestRegressorSimulator(
                    trees, random_state=0, split_selection=mode, leaf_refit="mean",
                    privacy_ledger=ledger).fit(X, y)
        X_cipher = fitted["rr"].encryptor_.transform(X).astype(float)
        rr = attack_cells(X_cipher, fitted["rr"].trees_, fitted["rr"].privatised_targets_,
                          y, known)
        lines.append(f"| {name} | rr ε=2 | " + " | ".join(cell(r) for r in rr) + " |")
        for mode, label in (("paper", "paper (∞)"), ("blind", "blind (0)")):
            model = fitted[mode]
            nearest = attacks.score_targets("nearest", attacks.proximity_nearest_targets(
                attacks.proximity_matrix(model.trees_, model.encryptor_.transform(X)),
                known, y[known], KNOWN_NEIGHBOURS), y, known)
            lines.append(f"| {name} | {label} | | | | {cell(nearest)} |")
        X_cipher = fitted["paper"].encryptor_.transform(X).astype(float)
        plain = RandomForestRegressor(trees, random_state=0).fit(X_cipher, y)
        control = attack_cells(X_cipher, attacks.forest_trees(plain), y, y, known)
        lines.append(f"| {name} | plaintext (control) | "
                     + " | ".join(cell(r) for r in control) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--max-rows", type=int, default=2000,
                        help="rows of the generated data sets")
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS),
                        choices=("bins", "laplace", "duchi", "piecewise"),
                        help="the target mechanisms measured")
    parser.add_argument("--refits", nargs="+", default=list(REFITS),
                        choices=("mean", "ridge", "ridge_to_means"),
                        help="the private forests' leaf_refit measured (ridge: also the "
                             "plaintext forest with that refit)")
    parser.add_argument("--outputs", type=int, nargs="*", default=[],
                        help="also RR-on-bins with this many output values (target_outputs)")
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS),
                        help="the private forests' ε (2 is needed for the target lines)")
    parser.add_argument("--markdown", help="also write the tables to this file")
    parser.add_argument("--attacks", action="store_true",
                        help="print the attacks on the targets instead of the R² curves")
    parser.add_argument("--attack-epsilons", type=float, nargs="+", default=[1.0, 2.0, 8.0])
    parser.add_argument("--attack-rows", type=int, default=500)
    parser.add_argument("--simulated-attacks", action="store_true",
                        help="print the tree attacks on 'rr' (ε = 2), 'paper' and 'blind' "
                             "forests of the simulator beside the plaintext control")
    parser.add_argument("--paper", action="store_true",
                        help="also the exact variance rule (split_selection='paper', "
                             "simulated): a column of R², a row of the attacks")
    args = parser.parse_args(argv)
    if args.simulated_attacks:
        started = time.perf_counter()
        print(simulated_attack_table(args.datasets, args.trees, args.attack_rows))
        print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
              f"{platform.python_version()}; {time.perf_counter() - started:.0f} s")
        return
    if args.attacks:
        started = time.perf_counter()
        print(attack_table(args.datasets, args.trees, args.attack_rows, args.attack_epsilons,
                           args.paper))
        print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
              f"{platform.python_version()}; {time.perf_counter() - started:.0f} s")
        return
    if 2.0 not in args.epsilons:
        parser.error("--epsilons must include 2 (the target's ε)")
    results, seconds = run(args.datasets, args.trees, args.folds, args.max_rows, args.n_jobs,
                           args.outputs, args.epsilons, args.mechanisms, args.refits,
                           args.paper)
    text = (table(results, args.trees, args.folds) + "\n"
            + target_lines(results, args.mechanisms, args.refits)
            + f"\n\nNo diffprivlib baseline: {diffprivlib_status()}.")
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
