"""A client-side global refit of the private boosting classifier's leaves, measured.

The client holds the leaf every training row reaches in every tree of every round; it may
refit the leaf values from its true labels in any way without the server learning more
(post-processing of ỹ). Here: one multinomial logistic regression of the true labels on the
one-hot leaf indicators of all trees of all rounds (L2 penalty ``1/C``, ``C`` chosen by the
client's 3-fold cross-validation on its training rows), instead of the tree-by-tree Newton
refit. ``PrivateGradientBoostingSimulator`` at its defaults and ε = 2; each draw a new
privacy ledger and its own shuffle of the 3 stratified folds (seed = the draw, the folds of
``dev/boosting_against_blind.py``'s draw of the same number). Prints test accuracy per draw.

    PYTHONPATH=src python dev/boosting_global_refit.py --datasets digits --draws 2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from cipherforest.experiments.datasets import load_bundled
from cipherforest.privacy.boosting import PrivateGradientBoostingSimulator

PENALTIES = (0.03, 0.3, 3.0)


def indicators(model, X) -> sp.csr_matrix:
    """One-hot leaf indicators of every tree of every round for the rows ``X``."""
    cipher = model.encryptor_.transform(X).astype(np.float64)
    trees = [tree for rnd in model.trees_ for tree in rnd]
    sizes = np.array([tree.tree_.node_count for tree in trees])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cols = np.column_stack([tree.tree_.apply(cipher) for tree in trees]) + offsets
    rows = np.repeat(np.arange(X.shape[0]), len(trees))
    return sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols.ravel())),
                         shape=(X.shape[0], int(sizes.sum())))


def logistic(C):
    return LogisticRegression(C=C, max_iter=300, tol=1e-4)


def global_refit(Phi, y) -> tuple[LogisticRegression, float]:
    scores = np.zeros(len(PENALTIES))
    for train, test in StratifiedKFold(3, shuffle=True, random_state=0).split(Phi, y):
        for j, C in enumerate(PENALTIES):
            scores[j] += logistic(C).fit(Phi[train], y[train]).score(Phi[test], y[test])
    C = PENALTIES[int(np.argmax(scores))]
    return logistic(C).fit(Phi, y), C


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["digits"])
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--epsilon", type=float, default=2.0)
    args = parser.parse_args()
    print("| data set | draw | default (Newton, tree by tree) | global logistic refit | C | "
          "refit seconds per fold |")
    print("|---|---:|---:|---:|---|---:|")
    for name in args.datasets:
        data = load_bundled(name)
        X, y = data.X, data.y
        for draw in range(args.draws):
            default, refit, chosen, seconds = [], [], [], []
            with tempfile.TemporaryDirectory() as ledger:
                for train, test in StratifiedKFold(3, shuffle=True,
                                                   random_state=draw).split(X, y):
                    model = PrivateGradientBoostingSimulator(
                        100, label_epsilon=args.epsilon, random_state=0,
                        privacy_ledger=ledger).fit(X[train], y[train])
                    default.append(model.score(X[test], y[test]))
                    started = time.process_time()
                    fitted, C = global_refit(indicators(model, X[train]), y[train])
                    seconds.append(time.process_time() - started)
                    refit.append(fitted.score(indicators(model, X[test]), y[test]))
                    chosen.append(C)
            print(f"| {name} | {draw} | {np.mean(default):.4f} | {np.mean(refit):.4f} | "
                  f"{', '.join(f'{c:g}' for c in chosen)} | {np.mean(seconds):.1f} |",
                  flush=True)
            print(f"{name} draw {draw} done", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
