"""The private regression forest's leaf refits compared on the same trees.

For each data set, fold and ε, one private forest is grown as PrivateForestRegressor grows
it (the regressor's release of ỹ from a privacy ledger, the server's learner, 100 trees,
the estimator's other defaults), and the client's leaf values are set in several ways from
the same leaves and the true targets, so the columns differ only by the refit:

- ``mean``: each leaf's bootstrap-weighted mean target (``leaf_refit="mean"``);
- ``ridge``: ``leaf_refit="ridge"`` (ridge toward 0, penalty by 5-fold cross-validation
  through every tree);
- ``ridge_to_means``: ``leaf_refit="ridge_to_means"`` (ridge toward the leaves' target
  means over all their rows, cross-validated through the held-out row's out-of-bag trees);
- the variants measured beside them and not shipped: ``to_means_every_tree`` (the same
  shrinkage, cross-validated through every tree), ``to_bootstrap_means`` (toward the
  bootstrap-weighted means, out-of-bag), ``blend`` (a cross-validated mix of ``ridge`` and
  ``mean`` predictions, out-of-bag).

Prints the plaintext forest's R² minus each refit's, per ε, and writes one JSON line per
fit (``--out``); ``--summary FILE`` prints the table of such a file.

    PYTHONPATH=src python dev/leaf_refits.py --out refits.jsonl
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.sparse.linalg import lsqr
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from cipherforest.ensemble import RandomForestRegressor  # noqa: E402
from cipherforest.privacy.leaf_refit import (  # noqa: E402
    MEANS_PENALTIES,
    N_FOLDS,
    leaf_indicators,
    ridge_leaf_values,
)
from cipherforest.privacy.protocol.leaf_table import LeafTable  # noqa: E402
from cipherforest.privacy.protocol.params import ForestSpec  # noqa: E402
from cipherforest.privacy.protocol.planner import ForestGrowth, leaves_reached  # noqa: E402
from cipherforest.privacy.protocol.server.learners import SERVER_LEARNERS  # noqa: E402
from cipherforest.privacy.regressor import RegressionSession  # noqa: E402
from cipherforest.privacy.simulation import PrivateForestRegressorSimulator  # noqa: E402
from label_privacy_regression import DATASETS, EPSILONS, load  # noqa: E402

_TOLERANCE = 1e-10


def grow(X, y, X_test, epsilon, seed, ledger, trees, growth_params=None,
         true_targets=False):
    """Table rows of the training and test rows' leaves, the bootstrap draws and the
    number of leaves of one private forest (``growth_params``: the regressor's other
    parameters; ``true_targets``: the server's learner grows on ``y`` instead of ỹ, the
    partition without the release's noise and coarseness)."""
    params = PrivateForestRegressorSimulator(trees, random_state=seed, label_epsilon=epsilon,
                                             privacy_ledger=ledger,
                                             **(growth_params or {})).get_params()
    engine = RegressionSession(params)
    setup, _ = engine.encrypt(X, y, PrivateForestRegressorSimulator(**params).new_encryptor())
    X_cipher = setup.arrays["X"]
    growth = ForestGrowth(X_cipher, ForestSpec.from_meta(setup.meta, *X_cipher.shape))
    SERVER_LEARNERS["regressor"].grow(growth, np.asarray(y, dtype=np.float64) if true_targets
                                      else setup.arrays["y_rr"], 0, None)
    reached = leaves_reached(growth.trees, X_cipher)
    table = LeafTable.from_rows(reached, np.zeros(len(y), dtype=np.int64), growth.weights, 1)
    draws = np.column_stack([growth.weights(t) for t in range(len(growth.trees))])
    test_cipher = np.asarray(engine.encryptor.transform(X_test), dtype=np.float64)
    return (table.rows(reached), table.rows(leaves_reached(growth.trees, test_cipher)),
            draws.astype(np.float64), table.leaf_ids.shape[0])


def leaf_means(rows, weights, y, n_leaves, fallback):
    sums = np.bincount(rows.ravel(), (weights * y[:, None]).ravel(), n_leaves)
    counts = np.bincount(rows.ravel(), weights.ravel(), n_leaves)
    return np.where(counts > 0, sums / np.maximum(counts, 1e-300), fallback)


def fit_toward(rows, weights, y, n_leaves, penalty):
    """Ridge toward the ``weights``-weighted leaf means' weights: (b, w)."""
    b = y.mean()
    design = leaf_indicators(rows, n_leaves)
    prior = (leaf_means(rows, weights, y, n_leaves, b) - b) / rows.shape[1]
    residual = y - b - design @ prior
    return b, prior + lsqr(design, residual, damp=float(np.sqrt(penalty)), atol=_TOLERANCE,
                           btol=_TOLERANCE, iter_lim=2000)[0]


def _folds(n):
    fold = np.empty(n, dtype=np.int64)
    fold[np.random.default_rng(0).permutation(n)] = np.arange(n) % N_FOLDS
    return fold


def _through(values, out_of_bag):
    """Sum over a row's out-of-bag trees scaled to all of them (all if none)."""
    n_out = out_of_bag.sum(axis=1)
    scaled = values.shape[1] * (values * out_of_bag).sum(axis=1) / np.maximum(n_out, 1)
    return np.where(n_out > 0, scaled, values.sum(axis=1))


def cross_validated(rows, draws, y, n_leaves, penalties, prior_weights, out_of_bag):
    """Held-out predictions (penalties × rows) of :func:`fit_toward`."""
    fold = _folds(len(y))
    out = np.zeros((len(penalties), len(y)))
    for k in range(N_FOLDS):
        held, kept = fold == k, fold != k
        for j, penalty in enumerate(penalties):
            b, w = fit_toward(rows[kept], prior_weights[kept], y[kept], n_leaves, penalty)
            contribution = w[rows[held]]
            out[j, held] = b + (_through(contribution, draws[held] == 0) if out_of_bag
                                else contribution.sum(axis=1))
    return out


def refits(rows, rows_test, draws, y, n_leaves) -> dict:
    n_trees = rows.shape[1]
    b = y.mean()
    scores = {"mean": leaf_means(rows, draws, y, n_leaves, b)[rows_test].mean(axis=1)}
    with threadpool_limits(1, user_api="blas"):
        scores["ridge"] = ridge_leaf_values(rows, n_leaves, y)[rows_test].mean(axis=1)
        scores["ridge_to_means"] = ridge_leaf_values(
            rows, n_leaves, y, toward_means=True, in_bag=draws > 0)[rows_test].mean(axis=1)
        wide = [n_trees * p for p in MEANS_PENALTIES]
        chosen = {}
        for name, prior, out_of_bag in (("to_means_every_tree", np.ones_like(draws), False),
                                        ("to_bootstrap_means", draws, True)):
            cv = cross_validated(rows, draws, y, n_leaves, wide, prior, out_of_bag)
            j = int(np.argmin(((cv - y) ** 2).sum(axis=1)))
            b_fit, w = fit_toward(rows, prior, y, n_leaves, wide[j])
            scores[name] = b_fit + w[rows_test].sum(axis=1)
            chosen[name] = wide[j] / n_trees
        # blend: out-of-bag held-out predictions of the ridge (toward 0) and of the means
        fold = _folds(len(y))
        ridge_cv = cross_validated(rows, draws, y, n_leaves, wide, np.zeros_like(draws), True)
        ridge_cv = ridge_cv[int(np.argmin(((ridge_cv - y) ** 2).sum(axis=1)))]
        means_cv = np.zeros(len(y))
        for k in range(N_FOLDS):
            held, kept = fold == k, fold != k
            means = leaf_means(rows[kept], draws[kept], y[kept], n_leaves, y[kept].mean())
            means_cv[held] = _through(means[rows[held]], draws[held] == 0) / n_trees
        alphas = np.linspace(0, 1, 11)
        alpha = alphas[int(np.argmin([((a * ridge_cv + (1 - a) * means_cv - y) ** 2).sum()
                                      for a in alphas]))]
        scores["blend"] = alpha * scores["ridge"] + (1 - alpha) * scores["mean"]
    return scores, chosen


def summary(path) -> str:
    records = [json.loads(line) for line in open(path, encoding="utf-8")]
    plain = collections.defaultdict(list)
    private = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in records:
        if r["eps"] == 0:
            plain[r["data"]].append(r["plaintext"])
        else:
            for key, value in r.items():
                if key not in ("data", "fold", "eps") and not key.startswith("penalty"):
                    private[(r["data"], r["eps"])][key].append(value)
    names = [n for n in plain]
    columns = [k for k in next(iter(private.values()))]
    lines = []
    for eps in sorted({e for _, e in private}):
        done = [n for n in names if len(private[(n, eps)]["mean"]) == len(plain[n])]
        lines += ["", f"ε = {eps:g}: plaintext R² − private R²", "",
                  "| refit | " + " | ".join(done) + " | within 0.03 |",
                  "|---|" + "---:|" * (len(done) + 1)]
        for c in columns:
            gaps = [np.mean(plain[n]) - np.mean(private[(n, eps)][c]) for n in done]
            lines.append(f"| {c} | " + " | ".join(f"{g:+.3f}" for g in gaps)
                         + f" | {sum(g <= 0.03 for g in gaps)} of {len(gaps)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--max-rows", type=int, default=1000)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--out", default="leaf_refits.jsonl")
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
                plain = RandomForestRegressor(args.trees, random_state=fold).fit(X[train],
                                                                                 y[train])
                out.write(json.dumps({"data": name, "fold": fold, "eps": 0, "plaintext":
                                      r2_score(y[test], plain.predict(X[test]))}) + "\n")
                for eps in args.epsilons:
                    rows, rows_test, draws, n_leaves = grow(X[train], y[train], X[test], eps,
                                                            fold, ledger, args.trees)
                    predictions, chosen = refits(rows, rows_test, draws, y[train], n_leaves)
                    record = {"data": name, "fold": fold, "eps": eps,
                              **{k: r2_score(y[test], v) for k, v in predictions.items()},
                              **{f"penalty {k}": v for k, v in chosen.items()}}
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                print(f"{name} fold {fold} done", file=sys.stderr, flush=True)
    print(summary(args.out))


if __name__ == "__main__":
    main()
