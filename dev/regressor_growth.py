"""Where the private regression forest's gap comes from: the partition or the refit.

For each data set, fold and ε, private forests are grown as PrivateForestRegressor grows
them (the regressor's release of ỹ from one privacy ledger per run, so every setting of a
fold and ε grows on the same ỹ; the server's learner in-process) under several growth
settings, and each gets the default leaf refit (``ridge_to_means``) and the leaf means.
``true targets`` grows the default forest on the true targets instead of ỹ (no guarantee:
the partition the refit would get without the release), which separates the partition's
share of the gap from the refit's. Prints plaintext R² minus each setting's R² per ε.

    PYTHONPATH=src python dev/regressor_growth.py --out growth.jsonl
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from cipherforest.ensemble import RandomForestRegressor  # noqa: E402
from cipherforest.privacy.leaf_refit import ridge_leaf_values  # noqa: E402
from label_privacy_regression import load  # noqa: E402
from leaf_refits import grow, leaf_means  # noqa: E402

#: Growth settings: the regressor's parameters beside its defaults (100 trees, fully grown,
#: every feature per node).
SETTINGS = {
    "default": ({}, False),
    "true targets": ({}, True),
    "300 trees": ({"n_estimators": 300}, False),
    "max_features 0.5": ({"max_features": 0.5}, False),
    "max_features 0.33": ({"max_features": 0.33}, False),
    "min_samples_leaf 2": ({"min_samples_leaf": 2}, False),
    "min_samples_leaf 3": ({"min_samples_leaf": 3}, False),
    "min_samples_leaf 5": ({"min_samples_leaf": 5}, False),
    "min_samples_leaf 10": ({"min_samples_leaf": 10}, False),
    "min_samples_leaf 20": ({"min_samples_leaf": 20}, False),
}


def summary(path) -> str:
    records = [json.loads(line) for line in open(path, encoding="utf-8")]
    plain = collections.defaultdict(dict)
    private = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in records:
        if r["eps"] == 0:
            plain[r["data"]][r["fold"]] = r["plaintext"]
        else:
            private[(r["data"], r["eps"])][r["setting"]].append(r)
    lines = []
    for eps in sorted({e for _, e in private}):
        names = [n for n in plain if (n, eps) in private]
        settings = list(dict.fromkeys(s for n in names for s in private[(n, eps)]))
        lines += ["", f"ε = {eps:g}: plaintext R² − private R² (refit: ridge_to_means / "
                  "leaf means)", "",
                  "| setting | " + " | ".join(names) + " | within 0.03 (ridge_to_means) |",
                  "|---|" + "---:|" * (len(names) + 1)]
        for setting in settings:
            cells, met = [], 0
            for n in names:
                rows = private[(n, eps)].get(setting, [])
                if not rows:
                    cells.append("–")
                    continue
                gap = np.mean([plain[n][r["fold"]] - r["ridge_to_means"] for r in rows])
                gap_mean = np.mean([plain[n][r["fold"]] - r["mean"] for r in rows])
                met += gap <= 0.03
                cells.append(f"{gap:+.3f} / {gap_mean:+.3f} ({len(rows)})")
            lines.append(f"| {setting} | " + " | ".join(cells) + f" | {met} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+",
                        default=["friedman1", "friedman3", "make_regression"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 2.0])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--max-rows", type=int, default=1000)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--out", default="regressor_growth.jsonl")
    parser.add_argument("--summary", help="print the table of this JSON-lines file and stop")
    args = parser.parse_args()
    if args.summary:
        print(summary(args.summary))
        return
    with tempfile.TemporaryDirectory() as ledger, open(args.out, "a", encoding="utf-8") as out:
        for name in args.datasets:
            X, y = load(name, args.max_rows)
            for fold, (train, test) in enumerate(
                    KFold(args.folds, shuffle=True, random_state=0).split(X)):
                plain = RandomForestRegressor(100, random_state=fold).fit(X[train], y[train])
                out.write(json.dumps({"data": name, "fold": fold, "eps": 0, "plaintext":
                                      r2_score(y[test], plain.predict(X[test]))}) + "\n")
                for eps in args.epsilons:
                    for setting in args.settings:
                        params, true_targets = SETTINGS[setting]
                        params = {"n_estimators": 100, **params}
                        trees = params.pop("n_estimators")
                        rows, rows_test, draws, n_leaves = grow(
                            X[train], y[train], X[test], eps, fold, ledger, trees, params,
                            true_targets)
                        with threadpool_limits(1, user_api="blas"):
                            refit = ridge_leaf_values(rows, n_leaves, y[train],
                                                      toward_means=True, in_bag=draws > 0)
                        means = leaf_means(rows, draws, y[train], n_leaves, y[train].mean())
                        record = {"data": name, "fold": fold, "eps": eps, "setting": setting,
                                  "ridge_to_means": r2_score(
                                      y[test], refit[rows_test].mean(axis=1)),
                                  "mean": r2_score(y[test], means[rows_test].mean(axis=1))}
                        out.write(json.dumps(record) + "\n")
                        out.flush()
                        print(f"{name} fold {fold} ε={eps:g} {setting}: "
                              f"{record['ridge_to_means']:.3f}", file=sys.stderr, flush=True)
    print(summary(args.out))


if __name__ == "__main__":
    main()
