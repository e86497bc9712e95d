"""What the server learns about the labels: attacks on each mode, and the label-privacy curves.

Part ``protocol`` runs the real encrypted protocol (PrivateForestClient, CKKS, embedded server
behind a recorder) in the paper's mode (``gipe_mode="paper", reveal_leaves=True``) and with
the defaults, and attacks what the server held: cipher1 (alternation, shared-cipher
propagation, value recovery), the transcript (leaf union), the trees (RF proximity) and a
malicious round (pair oracle).

Part ``curves`` uses :class:`~cipherforest.privacy.simulation.PrivateForestSimulator` (the
protocol's planner and decisions on clear labels: same forests, no homomorphic cost) to draw
accuracy (k-fold CV) and the proximity attack's success against ε of the label-DP split
choice, beside the Gini and label-blind selections.

    python benchmarks/label_privacy.py protocol --markdown docs/label_privacy_protocol.md
    python benchmarks/label_privacy.py curves --markdown docs/label_privacy_curves.md \\
        --figure docs/threat_model_curves.png

Part ``trees`` compares rr at one ε with the Gini selection as the forest grows (the
label-privacy target: rr at ε = 2 within 1 point of Gini): rr's trees are grown on noisy
labels, so they gain more from averaging than Gini's do.

    python benchmarks/label_privacy.py trees --forest-sizes 10 30 100 \\
        --markdown docs/label_privacy_trees.md

Datasets: scikit-learn's breast cancer, wine, digits; pendigits from ../shared/data when
present (subsampled); two noisy synthetic sets (make_classification, 3,000 rows: 100
features / 10 informative and 50 / 5).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine, make_classification
from sklearn.model_selection import StratifiedKFold

from cipherforest.privacy import PrivateForestClient, PrivateForestServer
from cipherforest.privacy import attacks as atk
from cipherforest.privacy.simulation import PrivateForestSimulator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import temporary_privacy_ledger  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


# ---------------------------------------------------------------------- data
def _subsample(X, y, n, seed=0):
    if n is None or X.shape[0] <= n:
        return X, y
    rows = np.random.default_rng(seed).choice(X.shape[0], n, replace=False)
    return X[rows], y[rows]


def load(name: str, max_rows: int | None = None):
    if name == "breast cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif name == "wine":
        X, y = load_wine(return_X_y=True)
    elif name == "digits":
        X, y = load_digits(return_X_y=True)
    elif name == "pendigits":
        path = DATA / "dataset_32_pendigits.csv"
        if not path.exists():
            return None
        raw = np.genfromtxt(path, delimiter=",", skip_header=1)
        X, y = raw[:, :-1], raw[:, -1].astype(int)
    elif name in ("breastw", "cancer"):
        files = {"breastw": "breastw.csv", "cancer": "cancer.csv"}
        path = DATA / files[name]
        if not path.exists():
            return None
        raw = np.genfromtxt(path, delimiter=",", skip_header=1, dtype=str)
        X = raw[:, :-1].astype(float)
        y = np.unique(raw[:, -1], return_inverse=True)[1]
        keep = np.isfinite(X).all(axis=1)
        X, y = X[keep], y[keep]
    elif name == "100 features, 10 informative":
        X, y = make_classification(3000, 100, n_informative=10, random_state=0)
    elif name == "50 features, 5 informative":
        X, y = make_classification(3000, 50, n_informative=5, random_state=0)
    else:
        raise ValueError(name)
    return _subsample(X, y, max_rows)


# ---------------------------------------------------------------------- part 1: protocol
PROTOCOL_MODES = {
    "paper (gipe_mode='paper', reveal_leaves=True, gini)": {
        "gipe_mode": "paper", "reveal_leaves": True, "split_selection": "gini"},
    "gini (quantile ciphers, hidden leaves)": {"split_selection": "gini"},
    "defaults (rr, ε = 2)": {},
}


def protocol_attacks(name, X, y, n_trees, n_jobs):
    rows = []
    counts = np.bincount(y)
    known_rows, known_labels = atk.one_known_per_class(y, random_state=0)
    baseline = atk.majority_baseline(y)
    for mode, params in PROTOCOL_MODES.items():
        recorder = atk.RecordingServer(PrivateForestServer(n_jobs=n_jobs))
        started = time.perf_counter()
        client = PrivateForestClient(n_estimators=n_trees, random_state=0, server=recorder,
                                     **params).fit(X, y)
        seconds = time.perf_counter() - started
        transcript = recorder.transcript
        C = transcript.X_cipher
        result = {"dataset": name, "mode": mode, "rows": X.shape[0],
                  "majority": baseline, "rounds": client.fit_stats_.rounds,
                  "fit s": seconds}
        if len(counts) == 2:
            result["alternation"] = atk.score_labels(
                "alternation", atk.alternation_labels(C, counts), y).success
        result["shared cipher"] = atk.score_labels(
            "shared", atk.shared_cipher_labels(C, known_rows, known_labels, counts), y,
            exclude=known_rows).success
        leaves = atk.declared_leaves(transcript)
        bootstrap = atk.server_bootstrap_counts(transcript.first("setup"))
        result["declared leaves"] = len(leaves)
        result["leaf union"] = atk.score_labels(
            "leaf union", atk.leaf_union_labels(C, transcript.trees, leaves, bootstrap,
                                                known_rows, known_labels, counts), y,
            exclude=known_rows).success
        proximity = atk.proximity_matrix(transcript.trees, C)
        result["proximity (nearest)"] = atk.score_labels(
            "nearest", atk.proximity_nearest_labels(proximity, known_rows, known_labels), y,
            exclude=known_rows).success
        result["proximity (clusters)"] = atk.score_labels(
            "clusters", atk.proximity_cluster_labels(proximity, counts, random_state=0),
            y).success
        oracle = atk.pair_oracle_attack(
            PrivateForestClient(n_estimators=2, random_state=0, **params), X, y)
        result["pair oracle"] = "refused" if oracle.refused else f"{oracle.success:.3f}"
        if params.get("split_selection") == "gini":  # the only mode here that decrypts counts
            forged = atk.content_substitution_attack(
                PrivateForestClient(n_estimators=2, random_state=0, scheme="bfv", **params),
                X, y)
            result["count forgery"] = (f"refused in round {forged.refused_round}"
                                       if forged.refused else f"{forged.success:.3f}")
        else:
            result["count forgery"] = "no round to forge"
        half = X.shape[0] // 2
        value = atk.score_value_recovery(C[:half], X[:half], X[half:])
        result["values within 5 % of range"] = value.within
        rows.append(result)
        print(f"  {name:15s} {mode[:8]:8s} {seconds:6.1f}s", file=sys.stderr)
    return rows


def run_protocol(args):
    datasets = [("breast cancer", None), ("wine", None), ("digits", args.digits_rows or 600)]
    results = []
    for name, cap in datasets:
        X, y = load(name, cap)
        results.extend(protocol_attacks(name, X, y, args.trees, args.jobs))
    columns = ["dataset", "mode", "rows", "majority", "alternation", "shared cipher",
               "declared leaves", "leaf union", "proximity (nearest)", "proximity (clusters)",
               "pair oracle", "count forgery", "values within 5 % of range", "rounds",
               "fit s"]
    return results, columns, (f"{args.trees} trees, CKKS, every row a training row (the "
                              "server's view); one known label per class where an attack "
                              "uses labels (scored on the other rows)")


# ---------------------------------------------------------------------- part 2: curves
# The paper's cancer.csv is breast cancer's rows (WDBC) with an id column and the label
# flipped: left out rather than counted twice.
CURVE_DATASETS = ["breast cancer", "wine", "digits", "breastw", "pendigits"]


def dp_bound(epsilon: float, prior: float) -> float:
    """What ε-label-DP allows an attack whose success without the row's own label is
    ``prior``: posterior odds are at most e^ε times prior odds, so accuracy ≤
    e^ε p / (e^ε p + 1 - p) (concave in p, so it also bounds the average over rows)."""
    if not np.isfinite(epsilon):
        return 1.0
    return float(np.exp(epsilon) * prior / (np.exp(epsilon) * prior + 1 - prior))


def _dp_per_choice(total: float, choices: int, delta: float) -> float:
    """The per-choice ε whose zCDP composition over ``choices`` is ``total`` at ``delta``."""
    from cipherforest.privacy.dp import LabelPrivacyAccountant

    low, high = 1e-6, total
    for _ in range(60):
        mid = (low + high) / 2
        accountant = LabelPrivacyAccountant("dp", mid, delta)
        accountant.spend(choices)
        low, high = (mid, high) if accountant.epsilon_spent < total else (low, mid)
    return low


def _fit_at_total(X, y, total, trees, delta=1e-6):
    """A dp simulator whose ε spent is the target total: the number of choices is known
    only after a fit, so fit once at a guess, calibrate, and fit again."""
    sim, per_choice = None, total / 10
    for _ in range(2):
        sim = PrivateForestSimulator(trees, random_state=0, split_selection="dp",
                                     label_epsilon=per_choice, label_delta=delta).fit(X, y)
        per_choice = _dp_per_choice(total, max(_choices(sim), 1), delta)
    return sim


def _choices(sim) -> int:
    """(tree, level) pairs with a choice: internal levels of each tree."""
    out = 0
    for tree in sim.trees_:
        left = tree["children_left"]
        depth = np.zeros(left.shape[0], dtype=int)
        for node in range(left.shape[0]):
            if left[node] >= 0:
                depth[left[node]] = depth[tree["children_right"][node]] = depth[node] + 1
        internal = left >= 0
        out += len(set(depth[internal].tolist()))
    return out


def _diffprivlib_accuracy(X_train, y_train, X_test, y_test, epsilon, trees):
    from cipherforest.experiments.methods.diffpriv import import_diffprivlib

    models = import_diffprivlib()
    bounds = (X_train.min(axis=0), X_train.max(axis=0))
    model = models.RandomForestClassifier(n_estimators=trees, epsilon=epsilon, bounds=bounds,
                                          classes=np.unique(y_train), random_state=0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X_train, y_train)
    return float((model.predict(X_test) == y_test).mean())


def _nearest(sim, X, known_rows, known_labels) -> np.ndarray:
    C = sim.encryptor_.transform(X).astype(float)
    return atk.proximity_nearest_labels(atk.proximity_matrix(sim.trees_, C), known_rows,
                                        known_labels)


def _attacks(fit, X, y, known_rows, known_labels, audited) -> dict:
    """The attacks on the trees grown on every row, and the DP audit: the proximity attack's
    success on the ``audited`` rows when their own labels took part, and when they were
    replaced by labels drawn uniformly at random (the same data otherwise: the prior the
    ε-DP bound is relative to)."""
    sim = fit(X, y)
    C = sim.encryptor_.transform(X).astype(float)
    proximity = atk.proximity_matrix(sim.trees_, C)
    guess = atk.proximity_nearest_labels(proximity, known_rows, known_labels)
    out = {"proximity nearest": atk.score_labels("nearest", guess, y,
                                                 exclude=known_rows).success,
           "proximity clusters": atk.score_labels(
               "clusters", atk.proximity_cluster_labels(proximity, np.bincount(y),
                                                        random_state=0), y).success,
           "shared cipher": atk.score_labels(
               "shared", atk.shared_cipher_labels(C, known_rows, known_labels,
                                                  np.bincount(y)), y,
               exclude=known_rows).success,
           "audited rows: with their labels": float((guess[audited] == y[audited]).mean())}
    withheld = y.copy()
    withheld[audited] = np.random.default_rng(1).integers(0, y.max() + 1, audited.shape[0])
    guess_without = _nearest(fit(X, withheld), X, known_rows, known_labels)
    out["audited rows: labels withheld"] = float((guess_without[audited]
                                                  == y[audited]).mean())
    if getattr(sim, "randomized_labels_", None) is not None:
        out["ỹ itself"] = float((sim.randomized_labels_ == y).mean())
    return out


def datasets(args):
    """``(name, X, y)`` of each of ``--datasets`` that is found (digits and pendigits capped
    at their ``--*-rows``), labels as 0..k-1."""
    caps = {"pendigits": args.pendigits_rows, "digits": args.digits_rows}
    for name in args.datasets:
        data = load(name, caps.get(name))
        if data is None:
            print(f"  {name}: not found, skipped", file=sys.stderr)
            continue
        X, y = data
        yield name, X, np.unique(y, return_inverse=True)[1]


def run_curves(args):
    results = []
    for name, X, y in datasets(args):
        known_rows, known_labels = atk.one_known_per_class(y, random_state=0)
        others = np.setdiff1d(np.arange(y.shape[0]), known_rows)
        audited = np.random.default_rng(0).choice(others, max(20, others.shape[0] // 5),
                                                  replace=False)
        folds = list(StratifiedKFold(args.folds, shuffle=True, random_state=0).split(X, y))
        settings = [("blind", None), ("gini", None)]
        settings += [(mode, eps) for eps in args.epsilons for mode in ("rr", "dp", "diffprivlib")]
        for mode, eps in settings:
            started = time.perf_counter()
            scores, spent = [], []
            for train, test in folds:
                if mode == "diffprivlib":
                    scores.append(_diffprivlib_accuracy(X[train], y[train], X[test], y[test],
                                                        eps, args.trees))
                    spent.append(eps)
                    continue
                sim = _simulator(mode, eps, args.trees, X[train], y[train])
                scores.append(float((sim.predict(X[test]) == y[test]).mean()))
                spent.append(sim.epsilon_spent_)
            row = {"dataset": name, "mode": mode, "ε (total)": eps, "rows": X.shape[0],
                   "accuracy": float(np.mean(scores)), "accuracy sd": float(np.std(scores)),
                   "ε spent": float(np.mean(spent)), "majority": atk.majority_baseline(y)}
            if mode != "diffprivlib":  # the attacks: the server's trees grown on every row
                def fit(X_fit, y_fit, mode=mode, eps=eps):
                    return _simulator(mode, eps, args.trees, X_fit, y_fit)

                row.update(_attacks(fit, X, y, known_rows, known_labels, audited))
                row["ε-DP bound"] = dp_bound(
                    np.inf if mode == "gini" else 0.0 if mode == "blind" else eps,
                    row["audited rows: labels withheld"])
            row["seconds"] = time.perf_counter() - started
            results.append(row)
            print(f"  {name:14s} {mode:11s} ε={eps} acc {row['accuracy']:.4f} "
                  f"nearest {row.get('proximity nearest', float('nan')):.3f} "
                  f"({row['seconds']:.0f} s)", file=sys.stderr, flush=True)
    columns = ["dataset", "mode", "ε (total)", "rows", "accuracy", "accuracy sd", "ε spent",
               "proximity nearest", "proximity clusters", "shared cipher", "ỹ itself",
               "audited rows: with their labels", "audited rows: labels withheld",
               "ε-DP bound", "majority", "seconds"]
    note = (f"{args.trees} trees, {args.folds}-fold CV accuracy (PrivateForestSimulator: the "
            "protocol's planner and decisions on clear labels); rr: randomized response at ε "
            "per row; dp: per-choice ε calibrated so that the zCDP total at δ = 1e-6 is ε; "
            "diffprivlib: its RandomForestClassifier at ε (full DP of features and labels, a "
            "stronger notion); attacks on the server's trees grown on every row, one known "
            "label per class; blind is the X-order floor (label-free trees); DP audit: the "
            "nearest-row attack on 20 % of the rows (audited) with their own labels in the "
            "fit, and with them replaced by random labels (the prior); ε-DP bound: the best "
            "success posterior odds ≤ e^ε × prior odds allow; rows capped: digits "
            f"{args.digits_rows}, pendigits {args.pendigits_rows}; the paper's cancer.csv is "
            "breast cancer's rows again (WDBC), so it is not a separate line")
    if args.figure:
        figure(results, args.figure)
    return results, columns, note


def _simulator(mode, eps, trees, X, y):
    if mode == "dp":
        return _fit_at_total(X, y, eps, trees)
    params = {"split_selection": mode}
    if mode == "rr":
        params["label_epsilon"] = eps
    return PrivateForestSimulator(trees, random_state=0, **params).fit(X, y)


# ---------------------------------------------------------------------- part 3: trees
def run_trees(args):
    """rr at ``--rr-epsilon`` against Gini at each forest size: k-fold CV accuracy, rr
    averaged over ``--rr-draws`` independent randomized-response draws per fold."""
    results = []
    for name, X, y in datasets(args):
        folds = list(StratifiedKFold(args.folds, shuffle=True, random_state=0).split(X, y))
        for trees in args.forest_sizes:
            started = time.perf_counter()
            scores = {"gini": [], "rr": []}
            for train, test in folds:
                for mode, draws in (("gini", 1), ("rr", args.rr_draws)):
                    for _ in range(draws):
                        sim = _simulator(mode, args.rr_epsilon, trees, X[train], y[train])
                        scores[mode].append(float((sim.predict(X[test]) == y[test]).mean()))
            gini, rr = float(np.mean(scores["gini"])), float(np.mean(scores["rr"]))
            row = {"dataset": name, "rows": X.shape[0], "trees": trees, "gini": gini,
                   "rr": rr, "rr sd": float(np.std(scores["rr"])),
                   "rr − gini (points)": 100 * (rr - gini)}
            if trees in args.client_sizes:  # the real protocol (CKKS), one draw per fold
                row["rr, PrivateForestClient"] = float(np.mean([
                    PrivateForestClient(trees, random_state=0, label_epsilon=args.rr_epsilon,
                                        n_jobs=args.jobs).fit(X[train], y[train])
                    .score(X[test], y[test]) for train, test in folds]))
            row["seconds"] = time.perf_counter() - started
            results.append(row)
            print(f"  {name:14s} {trees:4d} trees: gini {gini:.4f} rr {rr:.4f}",
                  file=sys.stderr, flush=True)
    columns = ["dataset", "rows", "trees", "gini", "rr", "rr sd", "rr − gini (points)",
               "rr, PrivateForestClient", "seconds"]
    note = (f"{args.folds}-fold CV accuracy of PrivateForestSimulator (the protocol's planner "
            f"and decisions on clear labels); rr at ε = {args.rr_epsilon:g} per row, "
            f"{args.rr_draws} randomized-response draws per fold (rr sd: over folds × draws); "
            "rr, PrivateForestClient: the real protocol (CKKS, embedded server, "
            f"n_jobs={args.jobs}), one draw per fold; "
            f"gini: the paper's selection, the same forest seed; rows capped: digits "
            f"{args.digits_rows}, pendigits {args.pendigits_rows}; load "
            f"{os.getloadavg()[0]:.1f} at the end")
    return results, columns, note


def figure(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in results))
    fig, axes = plt.subplots(2, len(datasets), figsize=(3.2 * len(datasets), 6.4),
                             squeeze=False)
    styles = {"rr": "o-", "dp": "s--", "diffprivlib": "^:"}
    for j, name in enumerate(datasets):
        rows = [r for r in results if r["dataset"] == name]
        for i, key in enumerate(("accuracy", "audited rows: with their labels")):
            ax = axes[i, j]
            for mode, style in styles.items():
                pts = [r for r in rows if r["mode"] == mode and r.get(key) is not None]
                if pts:
                    ax.plot([r["ε (total)"] for r in pts], [r[key] for r in pts], style,
                            label=mode, markersize=4)
            for mode, ls in (("gini", "-"), ("blind", ":")):
                ref = next((r for r in rows if r["mode"] == mode), None)
                if ref is not None:
                    ax.axhline(ref[key], color="grey", linestyle=ls, linewidth=1,
                               label=f"{mode} (no ε)" if mode == "gini" else "blind (ε = 0)")
            if i == 1:
                pts = [r for r in rows if r["mode"] == "rr"]
                ax.plot([r["ε (total)"] for r in pts], [r["ε-DP bound"] for r in pts], "k-",
                        linewidth=0.7, label="ε-DP bound (rr)")
            ax.set_xscale("log", base=2)
            what = "accuracy (CV)" if i == 0 else "proximity attack, audited rows"
            ax.set_title(f"{name}\n{what}",
                         fontsize=9)
            ax.set_xlabel("total ε per row")
            ax.grid(alpha=0.3)
    handles, labels = axes[1, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------------- output
TITLES = {"protocol": "Attacks on the server's view, by mode",
          "curves": "Accuracy and attack success against ε",
          "trees": "Randomized response against the Gini selection, by forest size"}


def markdown(results, columns, note, title, command):
    def cell(v):
        if isinstance(v, float):
            return f"{v:.4f}" if v < 10 else f"{v:.1f}"
        return "–" if v is None else str(v)

    lines = [f"# {title}", "", f"`{command}`", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
             f"{note}.", "", "| " + " | ".join(columns) + " |",
             "|" + "---|" * len(columns)]
    for r in results:
        lines.append("| " + " | ".join(cell(r.get(c)) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["protocol", "curves", "trees"])
    parser.add_argument("--trees", type=int, default=None,
                        help="trees per forest (protocol: 10, curves: 30)")
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--epsilons", type=float, nargs="+",
                        default=[0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
                        help="total ε per row of the curves")
    parser.add_argument("--datasets", nargs="+", default=CURVE_DATASETS,
                        help="datasets of the curves")
    parser.add_argument("--digits-rows", type=int, default=None)
    parser.add_argument("--pendigits-rows", type=int, default=2000)
    parser.add_argument("--synthetic-rows", type=int, default=3000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--forest-sizes", type=int, nargs="+", default=[10, 30, 100],
                        help="trees: the forest sizes compared")
    parser.add_argument("--rr-epsilon", type=float, default=2.0, help="trees: rr's ε")
    parser.add_argument("--rr-draws", type=int, default=2,
                        help="trees: randomized-response draws per fold")
    parser.add_argument("--client-sizes", type=int, nargs="*", default=[],
                        help="trees: forest sizes at which the real client runs rr too")
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--figure", type=Path)
    args = parser.parse_args(argv)
    temporary_privacy_ledger("label_privacy")
    if args.trees is None:
        args.trees = 10 if args.part == "protocol" else 30
    run = {"protocol": run_protocol, "curves": run_curves, "trees": run_trees}[args.part]
    results, columns, note = run(args)
    command = "python benchmarks/label_privacy.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    text = markdown(results, columns, note, TITLES[args.part], command)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
