"""Private gradient boosting against its plaintext counterpart and the private forests.

Part ``curves``: test accuracy (stratified k-fold) over ε of
:class:`~cipherforest.privacy.boosting.PrivateGradientBoostingSimulator` (the server boosting
on randomized-response labels, the client refitting the leaves from the true labels), with
the server's gradients noise-corrected (``unbiased``) and as they are (``none``), beside our
plaintext :class:`~cipherforest.ensemble.GradientBoostingClassifier`, the label-blind private
forest and the default private forest (``split_selection="rr"`` at the same ε), 100 trees
each (100 rounds for the boosting).

    python benchmarks/label_privacy_boosting.py curves --markdown out.md

``--protocol-epsilons 2`` adds :class:`~cipherforest.privacy.PrivateGradientBoostingClassifier`
(the same boosting through the protocol and an embedded server, a fresh privacy ledger per
data set) at those ε.

Part ``time``: fit time of the private boosting (GIPE encryption, randomized response, the
server's rounds and the client's refit), in the simulator and end to end through the
embedded server (setup and train messages encoded and decoded, the server's boosting, the
training leaf ids, the client's refit), against the plaintext boosting's on the same rows
(shuttle, subsampled).

    python benchmarks/label_privacy_boosting.py time --rows 12000

Part ``settings``: test accuracy at one ε (2) of the simulator under each of ``SETTINGS``
(features per node, rounds, depth, leaf size, shrinkage, noise correction), beside the
plaintext boosting and the label-blind forest: what closes the gap to the blind forest
without spending more ε.

    python benchmarks/label_privacy_boosting.py settings

Part ``regression``: test R² (k-fold) of
:class:`~cipherforest.privacy.PrivateGradientBoostingRegressor` (through the protocol and an
embedded server, a fresh privacy ledger; targets by each of ``--mechanisms``, RR-on-bins by
default; each ``--refits`` as ``leaf_refit``) at ``--epsilons`` beside our
plaintext :class:`~cipherforest.ensemble.GradientBoostingRegressor`, both 100 rounds of
depth-3 trees, on the data sets of ``benchmarks/label_privacy_regression.py`` (its loader).

    python benchmarks/label_privacy_boosting.py regression --epsilons 2

Part ``attacks``: what a curious server of the boosting models learns of the true labels and
targets: the classifier's attacks (the proximity of rows in the server's trees, forced refits,
selective failure) run against :class:`~cipherforest.privacy.PrivateGradientBoostingClassifier`
and the regressor's target attacks against
:class:`~cipherforest.privacy.PrivateGradientBoostingRegressor` (one real fit per ε through an
embedded server wrapped in ``attacks.RecordingServer``; the first ``--rows`` rows of each set),
beside the positive control: our plaintext boosting grown on the same ciphers and the true
labels or targets (ỹ = y).

    python benchmarks/label_privacy_boosting.py attacks

diffprivlib has no model to compare: it does not import with this scikit-learn (its trees
import ``DOUBLE`` from ``sklearn.tree._tree``, which scikit-learn no longer has); the script
says so when it fails.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, StratifiedKFold

from cipherforest.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from cipherforest.experiments.datasets import load_bundled
from cipherforest.privacy import (
    PrivateForestServer,
    PrivateGradientBoostingClassifier,
    PrivateGradientBoostingRegressor,
    attacks,
)
from cipherforest.privacy.boosting import PrivateGradientBoostingSimulator
from cipherforest.privacy.simulation import (
    PrivateForestRegressorSimulator,
    PrivateForestSimulator,
)

DATASETS = ("breast_cancer", "wine", "digits", "phishing", "segment")
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)


def diffprivlib_status() -> str:
    try:
        import diffprivlib  # noqa: F401
    except Exception as error:  # noqa: BLE001 - any failure to import is the finding
        return f"diffprivlib does not import: {type(error).__name__}: {error}"
    return "diffprivlib imports"


def cv_accuracy(make, X, y, folds, seed=0) -> float:
    scores = []
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y):
        scores.append(make().fit(X[train], y[train]).score(X[test], y[test]))
    return float(np.mean(scores))


def curves(args) -> str:
    lines = [f"{diffprivlib_status()}.", "",
             f"Test accuracy, {args.folds}-fold stratified CV, {args.trees} trees/rounds; "
             f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs.", ""]
    features = None if args.max_features == "none" else args.max_features
    rate = {} if args.learning_rate is None else {"learning_rate": args.learning_rate}
    for name in args.datasets:
        data = load_bundled(name)
        X, y = data.X, data.y
        print(f"{name}: {X.shape}, {data.n_classes} classes", file=sys.stderr, flush=True)
        plain = cv_accuracy(lambda: GradientBoostingClassifier(
            n_estimators=args.trees, random_state=0), X, y, args.folds)
        blind = cv_accuracy(lambda: PrivateForestSimulator(
            args.trees, split_selection="blind", random_state=0), X, y, args.folds)
        rows = {f"private GB, correction {c}": [] for c in args.corrections}
        if not args.without_forest:
            rows["private forest rr"] = []
        protocol = {}
        with tempfile.TemporaryDirectory() as ledger:
            for eps in args.protocol_epsilons:
                protocol[eps] = cv_accuracy(
                    lambda e=eps: PrivateGradientBoostingClassifier(
                        args.trees, label_epsilon=e, random_state=0, privacy_ledger=ledger,
                        max_features=features, **rate),
                    X, y, args.folds)
                print(f"  protocol ε={eps}: {protocol[eps]:.4f}", file=sys.stderr, flush=True)
        for eps in args.epsilons:
            for correction in args.corrections:
                rows[f"private GB, correction {correction}"].append(cv_accuracy(
                    lambda c=correction, e=eps: PrivateGradientBoostingSimulator(
                        args.trees, noise_correction=c, label_epsilon=e, random_state=0,
                        max_features=features, **rate),
                    X, y, args.folds))
            if not args.without_forest:
                rows["private forest rr"].append(cv_accuracy(
                    lambda e=eps: PrivateForestSimulator(args.trees, label_epsilon=e,
                                                         random_state=0), X, y, args.folds))
            print(f"  ε={eps}: " + ", ".join(f"{k} {v[-1]:.4f}" for k, v in rows.items()),
                  file=sys.stderr, flush=True)
        lines += [f"### {name} ({X.shape[0]} rows, {X.shape[1]} features, "
                  f"{data.n_classes} classes)", "",
                  "| model | " + " | ".join(f"ε = {e:g}" for e in args.epsilons) + " |",
                  "|---|" + "---:|" * len(args.epsilons)]
        for label, values in rows.items():
            lines.append(f"| {label} | " + " | ".join(f"{v:.4f}" for v in values) + " |")
        if protocol:
            lines.append("| PrivateGradientBoostingClassifier (protocol, correction none) | "
                         + " | ".join(f"{protocol[e]:.4f}" if e in protocol else "–"
                                      for e in args.epsilons) + " |")
        lines.append(f"| plaintext GradientBoostingClassifier | {plain:.4f} (every ε) |"
                     + " |" * (len(args.epsilons) - 1))
        lines.append(f"| label-blind private forest (ε = 0) | {blind:.4f} (every ε) |"
                     + " |" * (len(args.epsilons) - 1))
        lines.append("")
    return "\n".join(lines)


#: The server's settings compared by part ``settings`` (PrivateGradientBoostingSimulator's
#: parameters; the defaults were ``max_features=None`` and ``learning_rate=0.1`` before
#: "sqrt" and 0.2, and are the plaintext boosting's).
SETTINGS = {
    "all features, 100 rounds": {"max_features": None, "learning_rate": 0.1},
    "sqrt, 100 rounds": {"max_features": "sqrt", "learning_rate": 0.1},
    "all features, 300 rounds": {"max_features": None, "n_estimators": 300,
                                 "learning_rate": 0.1},
    "sqrt, 300 rounds": {"max_features": "sqrt", "n_estimators": 300, "learning_rate": 0.1},
    "depth 5": {"max_features": None, "max_depth": 5, "learning_rate": 0.1},
    "depth 2": {"max_features": None, "max_depth": 2, "learning_rate": 0.1},
    "min_samples_leaf 10": {"max_features": None, "min_samples_leaf": 10,
                            "learning_rate": 0.1},
    "learning rate 0.2": {"max_features": None, "learning_rate": 0.2},
    "sqrt, learning rate 0.2": {"max_features": "sqrt", "learning_rate": 0.2},
    "unbiased correction": {"max_features": None, "noise_correction": "unbiased",
                            "learning_rate": 0.1},
}


def settings(args) -> str:
    """Accuracy at one ε of the private boosting under each of ``SETTINGS``, beside the
    plaintext boosting (100 rounds) and the label-blind forest (100 trees). Every setting
    of a draw boosts on the same ỹ (one privacy ledger per draw and data set), so the
    settings are compared on equal noise; the cells are means over ``--draws`` draws."""
    names = args.settings or list(SETTINGS)
    columns = ["plaintext GB", "label-blind forest", *names]
    lines = [f"Test accuracy, {args.folds}-fold stratified CV, ε = {args.epsilon:g}, mean "
             f"over {args.draws} draw(s) of ỹ shared by the settings; "
             f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs.", "",
             "| data set | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for name in args.datasets:
        data = load_bundled(name)
        X, y = data.X, data.y
        cells = [cv_accuracy(lambda: GradientBoostingClassifier(
                     n_estimators=args.trees, random_state=0), X, y, args.folds),
                 cv_accuracy(lambda: PrivateForestSimulator(
                     args.trees, split_selection="blind", random_state=0), X, y, args.folds)]
        private = np.zeros((args.draws, len(names)))
        for draw in range(args.draws):
            with tempfile.TemporaryDirectory() as ledger:
                for j, setting in enumerate(names):
                    params = {"n_estimators": args.trees, **SETTINGS[setting]}
                    private[draw, j] = cv_accuracy(
                        lambda p=params: PrivateGradientBoostingSimulator(
                            label_epsilon=args.epsilon, random_state=0,
                            privacy_ledger=ledger, **p), X, y, args.folds)
        cells += list(private.mean(axis=0))
        print(f"{name}: " + ", ".join(f"{c} {v:.4f}" for c, v in zip(columns, cells,
                                                                      strict=True)),
              file=sys.stderr, flush=True)
        lines.append(f"| {name} | " + " | ".join(f"{v:.4f}" for v in cells) + " |")
    return "\n".join(lines)


def timing(args) -> str:
    with tempfile.TemporaryDirectory() as ledger:
        return _timing(args, ledger)


def _timing(args, ledger: str) -> str:
    data = load_bundled("shuttle")
    rows = np.random.default_rng(0).choice(data.X.shape[0], args.rows, replace=False)
    X, y = data.X[rows], data.y[rows]
    # First fits compile the kernels; the timed ones below reuse them.
    GradientBoostingClassifier(n_estimators=2).fit(X[:500], y[:500])
    PrivateGradientBoostingSimulator(2).fit(X[:500], y[:500])
    PrivateGradientBoostingClassifier(2, privacy_ledger=ledger).fit(X[:500], y[:500])
    lines = [f"shuttle, {args.rows} rows, {X.shape[1]} features, {args.trees} rounds; "
             f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs.", "",
             "| model | fit seconds | ratio |", "|---|---:|---:|"]
    base = None
    for label, make in (
            ("plaintext GradientBoostingClassifier", lambda: GradientBoostingClassifier(
                n_estimators=args.trees, random_state=0)),
            ("private GB simulator (ε = 2)", lambda: PrivateGradientBoostingSimulator(
                args.trees, random_state=0)),
            ("PrivateGradientBoostingClassifier, embedded server (ε = 2)",
             lambda: PrivateGradientBoostingClassifier(args.trees, random_state=0,
                                                       privacy_ledger=ledger))):
        best = np.inf
        for _ in range(args.repeats):
            start = time.perf_counter()
            make().fit(X, y)
            best = min(best, time.perf_counter() - start)
        base = best if base is None else base
        lines.append(f"| {label} | {best:.2f} | {best / base:.2f}x |")
    return "\n".join(lines)


def regression(args) -> str:
    from label_privacy_regression import DATASETS as REGRESSION_SETS  # this folder's script
    from label_privacy_regression import load

    names = args.datasets or list(REGRESSION_SETS)
    private = [(kind, refit, e) for kind in args.mechanisms for refit in args.refits
               for e in args.epsilons]
    columns = ["plaintext GradientBoostingRegressor",
               *(f"private {kind}{'' if refit == 'mean' else '+' + refit} ε = {e:g}"
                 for kind, refit, e in private)]
    lines = [f"Test R², {args.folds}-fold CV, {args.trees} rounds of depth-3 trees; "
             f"PrivateGradientBoostingRegressor with each target_mechanism; "
             f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs.", "",
             "| data set | " + " | ".join(columns) + " | private − plaintext at "
             f"{columns[1][len('private '):]} |",
             "|---|" + "---:|" * (len(columns) + 1)]
    with tempfile.TemporaryDirectory() as ledger:
        for name in names:
            X, y = load(name, args.max_rows)
            scores = {c: [] for c in columns}
            for fold, (train, test) in enumerate(
                    KFold(args.folds, shuffle=True, random_state=0).split(X)):
                makers = [lambda s=fold: GradientBoostingRegressor(
                    n_estimators=args.trees, max_depth=3, random_state=s)]
                makers += [lambda kind=kind, e=e, s=fold, refit=refit:
                           PrivateGradientBoostingRegressor(
                               args.trees, max_depth=3, label_epsilon=e,
                               target_mechanism=kind, random_state=s, privacy_ledger=ledger,
                               leaf_refit=refit)
                           for kind, refit, e in private]
                for column, make in zip(columns, makers, strict=True):
                    model = make().fit(X[train], y[train])
                    scores[column].append(r2_score(y[test], model.predict(X[test])))
            means = [float(np.mean(scores[c])) for c in columns]
            print(f"{name}: " + ", ".join(f"{c} {m:.3f}" for c, m in zip(columns, means,
                                                                          strict=True)),
                  file=sys.stderr, flush=True)
            lines.append(f"| {name} | " + " | ".join(f"{m:.3f}" for m in means)
                         + f" | {means[1] - means[0]:+.3f} |")
    return "\n".join(lines)


KNOWN_DRAWS = 5
KNOWN_SHARE = 0.1


def boosted_trees(model) -> list[dict[str, np.ndarray]]:
    """A fitted plaintext boosting's trees in the server's format, round by round."""
    return attacks.forest_trees(SimpleNamespace(
        estimators_=[tree for trees in model.estimators_ for tree in trees]))


def label_attack_cells(trees, X_cipher, y) -> list[float]:
    """Success of the nearest-row guesses over the trees' proximity: one known row per class
    (mean over ``KNOWN_DRAWS`` draws) and ``KNOWN_SHARE`` of the rows known."""
    proximity = attacks.proximity_matrix(trees, X_cipher)
    one = [attacks.score_labels("", attacks.proximity_nearest_labels(
        proximity, rows, labels), y, rows).success
        for rows, labels in (attacks.one_known_per_class(y, d) for d in range(KNOWN_DRAWS))]
    known = np.random.default_rng(0).choice(y.shape[0], int(KNOWN_SHARE * y.shape[0]),
                                            replace=False)
    share = attacks.score_labels("", attacks.proximity_nearest_labels(
        proximity, known, y[known]), y, known).success
    return [float(np.mean(one)), share]


def _recorded_boosting(X, y, trees: int, eps: float, ledger: str):
    """A boosting classifier's fit through a recording embedded server: its transcript."""
    recorder = attacks.RecordingServer(PrivateForestServer())
    PrivateGradientBoostingClassifier(trees, label_epsilon=eps, random_state=0,
                                      privacy_ledger=ledger, server=recorder).fit(X, y)
    return recorder.transcript


def _nearest_one_known(transcript, y) -> np.ndarray:
    rows, labels = attacks.one_known_per_class(y, 0)
    return attacks.proximity_nearest_labels(
        attacks.proximity_matrix(transcript.trees, transcript.X_cipher), rows, labels)


def classifier_attacks(names, trees: int, n_rows: int, epsilons) -> list[str]:
    from label_privacy import dp_bound  # this folder's script

    lines = ["| data set | ε | majority | ỹ | nearest, one known per class | nearest, "
             f"{KNOWN_SHARE:.0%} known | refits: majority of 7 (draws) | fresh draws: "
             "majority of 7 | selective failure: probed / refusals | audit: with own labels | "
             "audit: labels withheld | ε-DP bound |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        data = load_bundled(name)
        X, y = data.X[:n_rows], data.y[:n_rows]
        majority = attacks.majority_baseline(y)
        known_rows, _ = attacks.one_known_per_class(y, 0)
        others = np.setdiff1d(np.arange(y.shape[0]), known_rows)
        audited = np.random.default_rng(0).choice(others, others.shape[0] // 5, replace=False)
        withheld = y.copy()
        withheld[audited] = np.random.default_rng(1).integers(0, y.max() + 1, audited.shape[0])
        for eps in epsilons:
            with tempfile.TemporaryDirectory() as ledger:
                transcript = _recorded_boosting(X, y, trees, eps, ledger)
                X_cipher = transcript.X_cipher
                noisy = transcript.first("setup").arrays["y_rr"]
                cells = label_attack_cells(transcript.trees, X_cipher, y)
                refits = attacks.forced_refit_attack(PrivateGradientBoostingClassifier(
                    trees, label_epsilon=eps, privacy_ledger=ledger), X, y)
                failure = attacks.selective_failure_attack(PrivateGradientBoostingClassifier(
                    trees, label_epsilon=eps, privacy_ledger=ledger), X, y, n_targets=10,
                    max_fits=3)
                with_own = float(np.mean(_nearest_one_known(transcript, y)[audited]
                                         == y[audited]))
            with tempfile.TemporaryDirectory() as ledger:
                without = float(np.mean(_nearest_one_known(_recorded_boosting(
                    X, withheld, trees, eps, ledger), y)[audited] == y[audited]))
            with tempfile.TemporaryDirectory() as ledger, attacks.fresh_randomized_labels():
                fresh = attacks.forced_refit_attack(PrivateGradientBoostingClassifier(
                    trees, label_epsilon=eps, privacy_ledger=ledger), X, y)
            lines.append(f"| {name} | {eps:g} | {majority:.3f} | {np.mean(noisy == y):.3f} | "
                         + " | ".join(f"{c:.3f}" for c in cells)
                         + f" | {refits.majority:.3f} ({refits.distinct_draws}) | "
                         f"{fresh.majority:.3f} | {failure.n_probed} / {failure.refusals} | "
                         f"{with_own:.3f} | {without:.3f} | {dp_bound(eps, without):.3f} |")
        blind = PrivateForestSimulator(trees, split_selection="blind", random_state=0).fit(X, y)
        cells = label_attack_cells(blind.trees_, blind.encryptor_.transform(X).astype(float), y)
        lines.append(f"| {name} | blind forest (0) | {majority:.3f} | | "
                     + " | ".join(f"{c:.3f}" for c in cells) + " | | | | | | |")
        plain = GradientBoostingClassifier(n_estimators=trees, random_state=0).fit(X_cipher, y)
        cells = label_attack_cells(boosted_trees(plain), X_cipher, y)
        lines.append(f"| {name} | plaintext (control) | {majority:.3f} | 1.000 | "
                     + " | ".join(f"{c:.3f}" for c in cells) + " | | | | | | |")
    return lines


def regressor_attacks(names, trees: int, n_rows: int, epsilons) -> list[str]:
    from label_privacy_regression import attack_cells, attack_data, cell  # this folder's

    lines = ["| data set | ε | mean's MAE | ỹ | leaf neighbours | blend | nearest known | "
             "refits: mean of 7 (draws) | fresh draws: mean of 7 |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        X, y, known = attack_data(name, n_rows)
        for eps in epsilons:
            with tempfile.TemporaryDirectory() as ledger:
                recorder = attacks.RecordingServer(PrivateForestServer())
                PrivateGradientBoostingRegressor(trees, label_epsilon=eps, random_state=0,
                                                 privacy_ledger=ledger,
                                                 server=recorder).fit(X, y)
                transcript = recorder.transcript
                X_cipher = transcript.X_cipher
                cells = attack_cells(X_cipher, transcript.trees,
                                     transcript.first("setup").arrays["y_rr"], y, known)
                refits = attacks.forced_refit_targets(PrivateGradientBoostingRegressor(
                    trees, label_epsilon=eps, privacy_ledger=ledger), X, y)
            with tempfile.TemporaryDirectory() as ledger, attacks.fresh_randomized_labels():
                fresh = attacks.forced_refit_targets(PrivateGradientBoostingRegressor(
                    trees, label_epsilon=eps, privacy_ledger=ledger), X, y)
            lines.append(f"| {name} | {eps:g} | {cells[0].baseline_mae:.3g} | "
                         + " | ".join(cell(r) for r in cells)
                         + f" | {cell(refits.averaged)} ({refits.distinct_draws}) | "
                         f"{cell(fresh.averaged)} |")
        with tempfile.TemporaryDirectory() as ledger:
            blind = PrivateForestRegressorSimulator(trees, split_selection="blind",
                                                    random_state=0, leaf_refit="mean",
                                                    privacy_ledger=ledger).fit(X, y)
        nearest = attacks.score_targets("nearest", attacks.proximity_nearest_targets(
            attacks.proximity_matrix(blind.trees_, blind.encryptor_.transform(X).astype(float)),
            known, y[known], 5), y, known)
        lines.append(f"| {name} | blind forest (0) | {nearest.baseline_mae:.3g} | | | | "
                     f"{cell(nearest)} | | |")
        plain = GradientBoostingRegressor(n_estimators=trees, random_state=0).fit(X_cipher, y)
        cells = attack_cells(X_cipher, boosted_trees(plain), y, y, known)
        lines.append(f"| {name} | plaintext (control) | {cells[0].baseline_mae:.3g} | "
                     + " | ".join(cell(r) for r in cells) + " | | |")
    return lines


def attack_tables(args) -> str:
    lines = ["Labels: success of the server's guesses over the training rows (known rows not "
             "scored); \"draws\": distinct ỹ among the 7 refits; selective failure: targets "
             "probed and fits refused.", "",
             *classifier_attacks(args.datasets, args.trees, args.rows, args.epsilons), "",
             "Targets: R² / MAE of the server's guesses (R² = 0 is guessing the mean; nearest "
             f"known: {KNOWN_SHARE:.0%} of the targets known, 5 nearest).", "",
             *regressor_attacks(args.regression_datasets, args.trees, args.rows,
                                args.epsilons), "",
             f"{args.trees} rounds; {platform.machine()}, {os.cpu_count()} cores shared with "
             "other jobs."]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    c = sub.add_parser("curves")
    c.add_argument("--datasets", nargs="+", default=list(DATASETS))
    c.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    c.add_argument("--trees", type=int, default=100)
    c.add_argument("--folds", type=int, default=3)
    c.add_argument("--corrections", nargs="+", default=["none", "unbiased"],
                   choices=["none", "unbiased"])
    c.add_argument("--protocol-epsilons", nargs="*", type=float, default=[])
    c.add_argument("--max-features", default="sqrt", choices=["sqrt", "log2", "none"],
                   help="the private boosting's max_features (none: every feature)")
    c.add_argument("--learning-rate", type=float, default=None,
                   help="the private boosting's learning_rate (default: the estimators')")
    c.add_argument("--without-forest", action="store_true",
                   help="leave out the private forest rr (its simulator is the slowest)")
    c.add_argument("--markdown")
    t = sub.add_parser("time")
    t.add_argument("--rows", type=int, default=12_000)
    t.add_argument("--trees", type=int, default=100)
    t.add_argument("--repeats", type=int, default=2)
    t.add_argument("--markdown")
    g = sub.add_parser("settings")
    g.add_argument("--datasets", nargs="+", default=list(DATASETS))
    g.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=None)
    g.add_argument("--epsilon", type=float, default=2.0)
    g.add_argument("--draws", type=int, default=2, help="draws of ỹ (privacy ledgers)")
    g.add_argument("--trees", type=int, default=100)
    g.add_argument("--folds", type=int, default=3)
    g.add_argument("--markdown")
    r = sub.add_parser("regression")
    r.add_argument("--datasets", nargs="+", default=None)
    r.add_argument("--epsilons", nargs="+", type=float, default=[2.0])
    r.add_argument("--trees", type=int, default=100)
    r.add_argument("--folds", type=int, default=3)
    r.add_argument("--max-rows", type=int, default=2000)
    r.add_argument("--mechanisms", nargs="+", default=["bins"],
                   choices=["bins", "laplace", "duchi", "piecewise"])
    r.add_argument("--refits", nargs="+", default=["mean"], choices=["mean", "ridge"],
                   help="the private model's leaf_refit (each a column per ε)")
    r.add_argument("--markdown")
    a = sub.add_parser("attacks")
    a.add_argument("--datasets", nargs="+", default=["breast_cancer", "wine"])
    a.add_argument("--regression-datasets", nargs="+", default=["diabetes", "friedman1"])
    a.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 2.0, 8.0])
    a.add_argument("--trees", type=int, default=100)
    a.add_argument("--rows", type=int, default=500)
    a.add_argument("--markdown")
    args = parser.parse_args(argv)
    text = {"curves": curves, "time": timing, "regression": regression,
            "settings": settings, "attacks": attack_tables}[args.part](args)
    print(text)
    if args.markdown:
        title = {"curves": "# Private gradient boosting against ε",
                 "time": "# Private gradient boosting: fit time",
                 "settings": "# Private gradient boosting: the server's settings",
                 "regression": "# Private gradient boosting regression: R²",
                 "attacks": "# Private gradient boosting: attacks"}[args.part]
        command = " ".join(["python", "benchmarks/label_privacy_boosting.py", *sys.argv[1:]])
        with open(args.markdown, "w", encoding="utf-8") as file:
            file.write(f"{title}\n\n`{command}`\n\n{text}\n")


if __name__ == "__main__":
    main()
