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
    elif name == "100 features, 10 informative":
        X, y = make_classification(3000, 100, n_informative=10, random_state=0)
    elif name == "50 features, 5 informative":
        X, y = make_classification(3000, 50, n_informative=5, random_state=0)
    else:
        raise ValueError(name)
    return _subsample(X, y, max_rows)


# ---------------------------------------------------------------------- part 1: protocol
PROTOCOL_MODES = {
    "paper (gipe_mode='paper', reveal_leaves=True)": {"gipe_mode": "paper",
                                                       "reveal_leaves": True},
    "defaults": {},
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
        half = X.shape[0] // 2
        value = atk.score_value_recovery(C[:half], X[:half], X[half:])
        result["values within 5 % of range"] = value.within
        rows.append(result)
        print(f"  {name:15s} {mode[:8]:8s} {seconds:6.1f}s", file=sys.stderr)
    return rows


def run_protocol(args):
    datasets = [("breast cancer", None), ("wine", None), ("digits", args.digits_rows)]
    results = []
    for name, cap in datasets:
        X, y = load(name, cap)
        results.extend(protocol_attacks(name, X, y, args.trees, args.jobs))
    columns = ["dataset", "mode", "rows", "majority", "alternation", "shared cipher",
               "declared leaves", "leaf union", "proximity (nearest)", "proximity (clusters)",
               "pair oracle", "values within 5 % of range", "rounds", "fit s"]
    return results, columns, (f"{args.trees} trees, CKKS, every row a training row (the "
                              "server's view); one known label per class where an attack "
                              "uses labels (scored on the other rows)")


# ---------------------------------------------------------------------- part 2: curves
def curve_modes(epsilons):
    modes = [("gini", {"split_selection": "gini"})]
    modes += [(f"dp ε={eps:g}", {"split_selection": "dp", "label_epsilon": eps})
              for eps in epsilons]
    modes += [("blind", {"split_selection": "blind"})]
    return modes


def run_curves(args):
    names = ["breast cancer", "wine", "digits", "pendigits", "100 features, 10 informative",
             "50 features, 5 informative"]
    caps = {"pendigits": args.pendigits_rows, "digits": args.digits_rows,
            "100 features, 10 informative": args.synthetic_rows,
            "50 features, 5 informative": args.synthetic_rows}
    results = []
    for name in names:
        data = load(name, caps.get(name))
        if data is None:
            print(f"  {name}: not found, skipped", file=sys.stderr)
            continue
        X, y = data
        known_rows, known_labels = atk.one_known_per_class(y, random_state=0)
        folds = StratifiedKFold(args.folds, shuffle=True, random_state=0)
        for mode, params in curve_modes(args.epsilons):
            started = time.perf_counter()
            scores, spent = [], []
            for train, test in folds.split(X, y):
                sim = PrivateForestSimulator(n_estimators=args.trees, random_state=0,
                                             **params).fit(X[train], y[train])
                scores.append(float((sim.predict(X[test]) == y[test]).mean()))
                spent.append(sim.epsilon_spent_)
            # The attack: the server's trees grown on every row.
            sim = PrivateForestSimulator(n_estimators=args.trees, random_state=0,
                                         **params).fit(X, y)
            C = sim.encryptor_.transform(X).astype(float)
            proximity = atk.proximity_matrix(sim.trees_, C)
            nearest = atk.score_labels(
                "nearest", atk.proximity_nearest_labels(proximity, known_rows, known_labels),
                y, exclude=known_rows).success
            results.append({"dataset": name, "mode": mode, "rows": X.shape[0],
                            "accuracy": float(np.mean(scores)),
                            "accuracy sd": float(np.std(scores)),
                            "proximity attack": nearest,
                            "majority": atk.majority_baseline(y),
                            "ε spent per fit": float(np.mean(spent)),
                            "seconds": time.perf_counter() - started})
            print(f"  {name:30s} {mode:12s} acc {np.mean(scores):.4f} attack {nearest:.3f}",
                  file=sys.stderr)
    columns = ["dataset", "mode", "rows", "accuracy", "accuracy sd", "proximity attack",
               "majority", "ε spent per fit", "seconds"]
    note = (f"{args.trees} trees, {args.folds}-fold CV accuracy; proximity attack = nearest "
            "known row by root-path proximity on the server's trees grown on every row (one "
            f"known label per class); rows capped: digits {args.digits_rows}, pendigits "
            f"{args.pendigits_rows}, synthetic {args.synthetic_rows}; "
            "defaults otherwise (gipe_mode='quantile', 32 bins, hidden leaf decisions)")
    if args.figure:
        figure(results, args.figure)
    return results, columns, note


def figure(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in results))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for name in datasets:
        rows = [r for r in results if r["dataset"] == name and r["mode"].startswith("dp")]
        eps = [float(r["mode"].split("=")[1]) for r in rows]
        gini = next(r for r in results if r["dataset"] == name and r["mode"] == "gini")
        blind = next(r for r in results if r["dataset"] == name and r["mode"] == "blind")
        for ax, key in zip(axes, ("accuracy", "proximity attack"), strict=True):
            line, = ax.plot(eps, [r[key] for r in rows], marker="o", label=name)
            ax.axhline(gini[key], color=line.get_color(), linestyle="--", linewidth=0.8)
            ax.axhline(blind[key], color=line.get_color(), linestyle=":", linewidth=0.8)
    for ax, title in zip(axes, ("CV accuracy", "proximity attack success (1 label/class)"),
                         strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("ε per split choice (label-DP)")
        ax.set_title(title + "\n(dashed: Gini, dotted: label-blind)")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------------- output
def markdown(results, columns, note):
    def cell(v):
        if isinstance(v, float):
            return f"{v:.4f}" if v < 10 else f"{v:.1f}"
        return "–" if v is None else str(v)

    lines = [f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
             f"{note}.", "", "| " + " | ".join(columns) + " |",
             "|" + "---|" * len(columns)]
    for r in results:
        lines.append("| " + " | ".join(cell(r.get(c)) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["protocol", "curves"])
    parser.add_argument("--trees", type=int, default=None,
                        help="trees per forest (protocol: 10, curves: 30)")
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.01, 0.1, 1.0, 10.0])
    parser.add_argument("--digits-rows", type=int, default=600)
    parser.add_argument("--pendigits-rows", type=int, default=3000)
    parser.add_argument("--synthetic-rows", type=int, default=3000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--figure", type=Path)
    args = parser.parse_args(argv)
    if args.trees is None:
        args.trees = 10 if args.part == "protocol" else 30
    run = run_protocol if args.part == "protocol" else run_curves
    results, columns, note = run(args)
    text = markdown(results, columns, note)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
