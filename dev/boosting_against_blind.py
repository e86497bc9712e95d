"""The private boosting classifier against the label-blind forest, over draws and splits.

Is a gap between ``PrivateGradientBoostingSimulator`` at ε = 2 and the label-blind private
forest beyond the noise of one draw? Each draw uses a new privacy ledger (a new ỹ, shared by
every boosting setting of the draw), new GIPE keys and its own shuffle of the stratified
folds (seed = the draw's number), so the spread over draws covers all three sources. Prints
per data set and column the mean test accuracy over the draws, and per setting the mean and
standard error of (setting − blind forest) over the draws, in points.

    PYTHONPATH=src python dev/boosting_against_blind.py --draws 4 --out blind.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from cipherforest.ensemble import GradientBoostingClassifier  # noqa: E402
from cipherforest.experiments.datasets import load_bundled  # noqa: E402
from cipherforest.privacy.boosting import PrivateGradientBoostingSimulator  # noqa: E402
from cipherforest.privacy.simulation import PrivateForestSimulator  # noqa: E402
from label_privacy_boosting import DATASETS, cv_accuracy  # noqa: E402

#: Boosting settings compared (the simulator's parameters beside its defaults).
SETTINGS = {
    "default": {},
    "depth 4": {"max_depth": 4},
    "learning rate 0.3": {"learning_rate": 0.3},
}


def summary(path) -> str:
    records = [json.loads(line) for line in open(path, encoding="utf-8")]
    names = list(dict.fromkeys(r["data"] for r in records))
    columns = [k for k in records[0] if k not in ("data", "draw")]
    lines = ["| data set | draws | " + " | ".join(columns) + " | "
             + " | ".join(f"{c} − blind (points)" for c in columns[2:]) + " |",
             "|---|---:|" + "---:|" * (len(columns) + len(columns) - 2)]
    for name in names:
        rows = [r for r in records if r["data"] == name]
        cells = [f"{np.mean([r[c] for r in rows]):.4f}" for c in columns]
        for c in columns[2:]:
            gaps = 100 * np.array([r[c] - r["blind forest"] for r in rows])
            error = gaps.std(ddof=1) / np.sqrt(len(gaps)) if len(gaps) > 1 else float("nan")
            cells.append(f"{gaps.mean():+.2f} ± {error:.2f}")
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--first-draw", type=int, default=0)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--out", default="boosting_against_blind.jsonl")
    parser.add_argument("--summary", help="print the table of this JSON-lines file and stop")
    args = parser.parse_args()
    if args.summary:
        print(summary(args.summary))
        return
    with open(args.out, "a", encoding="utf-8") as out:
        for name in args.datasets:
            data = load_bundled(name)
            X, y = data.X, data.y
            for draw in range(args.first_draw, args.first_draw + args.draws):
                record = {"data": name, "draw": draw,
                          "plaintext GB": cv_accuracy(lambda: GradientBoostingClassifier(
                              n_estimators=100, random_state=0), X, y, args.folds, draw),
                          "blind forest": cv_accuracy(lambda: PrivateForestSimulator(
                              100, split_selection="blind", random_state=0), X, y, args.folds,
                              draw)}
                with tempfile.TemporaryDirectory() as ledger:
                    for setting in args.settings:
                        record[setting] = cv_accuracy(
                            lambda s=setting: PrivateGradientBoostingSimulator(
                                100, label_epsilon=args.epsilon, random_state=0,
                                privacy_ledger=ledger, **SETTINGS[s]),
                            X, y, args.folds, draw)
                out.write(json.dumps(record) + "\n")
                out.flush()
                print(f"{name} draw {draw}: " + ", ".join(
                    f"{k} {v:.4f}" for k, v in record.items() if k not in ("data", "draw")),
                    file=sys.stderr, flush=True)
    print(summary(args.out))


if __name__ == "__main__":
    main()
