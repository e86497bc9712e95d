"""Random forests on GIPE ciphertexts vs. on plaintext: accuracy over 5 x 5-fold CV.

For every dataset and each of 5 trials of stratified 5-fold cross-validation (shuffled with
seed = trial), one fold split gives:

* plaintext: ``RandomForestClassifier`` fitted on the training fold, scored on the test fold;
* GIPE: a ``GiniPreservingEncryptor`` (``--mode``, default the paper's; ``random_state`` =
  1000 * trial + fold) fitted on the training fold only; the same forest (same parameters
  and ``random_state``) fitted on its ``fit_transform`` and scored on ``transform`` of the
  test fold (unseen values, no labels).

Forest parameters follow DESIGN.md §6 / the paper: 100 trees, ``max_features="sqrt"``,
``min_samples_split`` 10 (100 from 20,000 rows), bootstrap. The table reports mean ± std
accuracy over the 25 runs, the difference, the p-value of a paired t-test, the share of runs in
which every tree of the cipher forest grew exactly the plaintext tree's partition (same
feature and sample count at every node), and the share of test rows on which the two forests
predict the same class. The target is a mean within 1 point of plaintext on every dataset.

Datasets: scikit-learn's breast cancer, wine and digits, plus the CSVs in ``../shared/data``
(breastw, cancer, pendigits) when that folder exists.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/gipe_accuracy.py [--markdown PATH]
        [--trials 5] [--datasets wine digits] [--mode paper|order|quantile] [--n-bins 32]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import ttest_rel
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.model_selection import StratifiedKFold

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy.gipe import DEFAULT_N_BINS, MODES, GiniPreservingEncryptor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import machine_line  # noqa: E402

DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
TARGET_POINTS = 1.0


def _csv(name: str, header: bool, drop_first: bool) -> Callable[[], tuple]:
    def load():
        data = np.loadtxt(DATA_DIR / name, delimiter=",", skiprows=1 if header else 0)
        X, y = data[:, :-1], data[:, -1].astype(int)
        return (X[:, 1:] if drop_first else X), y
    return load


DATASETS: dict[str, Callable[[], tuple]] = {
    "breast_cancer": lambda: load_breast_cancer(return_X_y=True),
    "wine": lambda: load_wine(return_X_y=True),
    "digits": lambda: load_digits(return_X_y=True),
    "breastw.csv": _csv("breastw.csv", header=True, drop_first=False),
    "cancer.csv": _csv("cancer.csv", header=True, drop_first=True),
    "pendigits.csv": _csv("dataset_32_pendigits.csv", header=False, drop_first=False),
}


def same_partitions(a, b) -> bool:
    return all(np.array_equal(ta.tree_.feature, tb.tree_.feature)
               and np.array_equal(ta.tree_.n_node_samples, tb.tree_.n_node_samples)
               for ta, tb in zip(a.estimators_, b.estimators_, strict=True))


def evaluate(X, y, trials: int, n_jobs: int, mode: str = "paper", n_bins: int = 32) -> dict:
    params = {"n_estimators": 100, "max_features": "sqrt", "random_state": 0,
              "min_samples_split": 10 if len(y) < 20_000 else 100, "n_jobs": n_jobs}
    plain_acc, cipher_acc, same, agree = [], [], [], []
    for trial in range(trials):
        folds = StratifiedKFold(5, shuffle=True, random_state=trial)
        for fold, (train, test) in enumerate(folds.split(X, y)):
            plain = RandomForestClassifier(**params).fit(X[train], y[train])
            enc = GiniPreservingEncryptor(mode=mode, n_bins=n_bins,
                                          random_state=1000 * trial + fold)
            C_train = enc.fit_transform(X[train], y[train])
            C_test = enc.transform(X[test])
            cipher = RandomForestClassifier(**params).fit(C_train, y[train])
            p, c = plain.predict(X[test]), cipher.predict(C_test)
            plain_acc.append(np.mean(p == y[test]))
            cipher_acc.append(np.mean(c == y[test]))
            same.append(same_partitions(plain, cipher))
            agree.append(np.mean(p == c))
    plain_acc, cipher_acc = np.array(plain_acc), np.array(cipher_acc)
    diff = cipher_acc - plain_acc
    p_value = ttest_rel(cipher_acc, plain_acc).pvalue if np.any(diff) else 1.0
    return {"plain": plain_acc, "cipher": cipher_acc, "diff": 100 * diff.mean(),
            "p": p_value, "same": np.mean(same), "agree": np.mean(agree)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--mode", choices=MODES, default="paper")
    parser.add_argument("--n-bins", type=int, default=DEFAULT_N_BINS)
    args = parser.parse_args(argv)
    mode = args.mode + (f", n_bins={args.n_bins}" if args.mode == "quantile" else "")
    lines = [f"GIPE mode: {mode}", "",
             "| dataset | rows | features | classes | plaintext RF | RF on GIPE ciphers | "
             "difference (points) | paired t-test p | runs with identical trees | "
             "test predictions equal |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    worst = 0.0
    for name in args.datasets:
        if name.endswith(".csv") and not DATA_DIR.is_dir():
            print(f"{name}: {DATA_DIR} not found, skipped", file=sys.stderr)
            continue
        X, y = DATASETS[name]()
        start = time.perf_counter()
        r = evaluate(X, y, args.trials, args.n_jobs, args.mode, args.n_bins)
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        worst = max(worst, abs(r["diff"]))
        lines.append(
            f"| {name} | {len(y):,} | {X.shape[1]} | {len(np.unique(y))} | "
            f"{100 * r['plain'].mean():.2f} ± {100 * r['plain'].std():.2f} | "
            f"{100 * r['cipher'].mean():.2f} ± {100 * r['cipher'].std():.2f} | "
            f"{r['diff']:+.2f} | {r['p']:.2f} | {100 * r['same']:.0f} % | "
            f"{100 * r['agree']:.2f} % |")
    verdict = "PASS" if worst <= TARGET_POINTS else "FAIL"
    lines += ["", f"{verdict}: largest |difference| {worst:.2f} points (target <= "
                  f"{TARGET_POINTS:.0f}); {args.trials} x 5-fold CV, accuracy in %."]
    report = f"{machine_line()}\n\n" + "\n".join(lines) + "\n"
    print(report)
    if args.markdown:
        args.markdown.write_text(report)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
