"""GIPE modes side by side: accuracy, bitwise leakage and attack success (issue #9, item 2).

For every dataset and cipher mode (plaintext, ``paper``, ``order``, ``quantile`` at several
``n_bins``):

* **accuracy**: stratified 5-fold CV (shuffled, seed 0) of ``RandomForestClassifier``
  (100 trees, ``max_features="sqrt"``, ``min_samples_split=10``, as in
  ``benchmarks/gipe_accuracy.py``) fitted on the training fold's ciphers and scored on the
  test fold's ``transform`` (unseen values, no labels);
* **bitwise leakage** (the paper's appendix E, ``privacy/leakage.py``): per feature, the
  values scaled to 7-bit integers, 200 rows drawn, encrypted by the mode (fitted on those
  rows), and the leakage matrix of that column; reported as the mean probability of guessing
  a bit right over the 3 most significant bits and over all 7 (0.5 = hidden, 1 = known),
  averaged over features (at most 16, evenly spaced);
* **attacks** (``cipherforest.privacy.attacks``) on the whole dataset encrypted by the mode
  (pendigits: a stratified subsample of 2,000 rows, to keep the n² proximity matrix small):
  alternation (binary data only; class counts known), shared-cipher label spreading and
  RF proximity (spectral clustering named by class counts; nearest by proximity) with one
  known label per class (mean over 3 draws of the known rows), the proximity attack on a
  30-tree ``RandomForestClassifier`` grown on the mode's ciphers (the server's trees);
  value recovery: rows split in halves, the attacker maps the ciphers of one half (encrypted
  alone) to quantiles of the other half's plaintext; fraction of values within 5 % of the
  feature's range, and Spearman correlation (mean over features).

The plaintext row's attacks use the plaintext matrix as "ciphers" (what an attacker seeing
X would get).

A second table runs the real protocol (``PrivateForestClient`` with CKKS, embedded server
wrapped in ``attacks.RecordingServer``) on a stratified subsample of breast cancer, wine and
digits (``--protocol-rows``, 150; ``--protocol-trees``, 10; ``max_bins=16`` to keep the
rounds small) for the paper's configuration (``split_selection="gini"``,
``decide_from="server"``, ``gipe_mode="paper"``, ``reveal_leaves=True``) and the defaults
(randomized response), and reports from the recorded transcript: client-declared leaves, the leaf
union, alternation and shared-cipher attacks on the received cipher matrix, proximity
(nearest) on the server's trees, and whether the client refused the pair oracle.

``--reactions`` prints only a third table, the attacks on the client's reactions (issue
#47): selective failure in training (a server swapping a known-label row for a target row in
one node's sums per round, reading a refusal as "different labels"; Gini and dp selection,
the paper's flow as positive control and the default client), selective failure at
prediction (a leaf doctored with two training rows' label ciphertexts before each predict
call; the paper's replies as positive control, leaf ids by default) and forced refits (a server
that reads the randomized labels of each ``setup`` and answers "busy"; majority over 7
failed fits, fresh draws per fit as positive control and permanent randomized response).

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/privacy_attacks.py [--markdown PATH]
        [--datasets breast_cancer wine] [--n-bins 8 16 32 64] [--reactions]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedKFold, train_test_split

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import PrivateForestClient, PrivateForestServer, attacks
from cipherforest.privacy.gipe import GiniPreservingEncryptor
from cipherforest.privacy.leakage import (
    bitwise_leakage_matrix,
    empirical_distribution,
    scale_to_bits,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gipe_accuracy  # noqa: E402
from gipe import machine_line, temporary_privacy_ledger  # noqa: E402
from gipe_accuracy import DATASETS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA_DIRS = (REPO.parent / "shared" / "data", REPO.parents[1] / "shared" / "data")

DEFAULT_DATASETS = ("breast_cancer", "wine", "digits", "breastw.csv", "pendigits.csv")
ATTACK_ROWS = 2_000
LEAKAGE_ROWS = 200
LEAKAGE_BITS = 7
PROXIMITY_TREES = 30
KNOWN_DRAWS = 3


def encryptor(mode: str, n_bins: int | None, seed: int) -> GiniPreservingEncryptor | None:
    if mode == "plaintext":
        return None
    return GiniPreservingEncryptor(mode=mode, n_bins=n_bins or 32, random_state=seed)


def encrypt(mode: str, n_bins: int | None, X, y, seed: int = 0) -> np.ndarray:
    enc = encryptor(mode, n_bins, seed)
    return X.astype(np.float64) if enc is None else enc.fit_transform(X, y).astype(np.float64)


def cv_accuracy(X, y, mode: str, n_bins: int | None, n_jobs: int) -> float:
    scores = []
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    for k, (train, test) in enumerate(folds.split(X, y)):
        enc = encryptor(mode, n_bins, 1000 + k)
        if enc is None:
            X_train, X_test = X[train], X[test]
        else:
            X_train = enc.fit_transform(X[train], y[train]).astype(np.float64)
            X_test = enc.transform(X[test]).astype(np.float64)
        forest = RandomForestClassifier(n_estimators=100, max_features="sqrt",
                                        min_samples_split=10, random_state=0, n_jobs=n_jobs)
        scores.append(np.mean(forest.fit(X_train, y[train]).predict(X_test) == y[test]))
    return float(np.mean(scores))


def leakage(X, y, mode: str, n_bins: int | None) -> tuple[float, float]:
    if mode == "plaintext":
        return 1.0, 1.0
    rng = np.random.default_rng(0)
    rows = rng.choice(X.shape[0], size=min(LEAKAGE_ROWS, X.shape[0]), replace=False)
    features = np.unique(np.linspace(0, X.shape[1] - 1, min(16, X.shape[1])).astype(int))
    top, every = [], []
    for j in features:
        ints = scale_to_bits(X[:, j], LEAKAGE_BITS)
        if np.ptp(ints) == 0:
            continue
        ciphers = encrypt(mode, n_bins, ints[rows, None].astype(np.float64), y[rows], seed=j)
        matrix = bitwise_leakage_matrix(ciphers[:, 0], empirical_distribution(ints,
                                                                              LEAKAGE_BITS))
        top.append(matrix[:, :3].mean())
        every.append(matrix.mean())
    return float(np.mean(top)), float(np.mean(every))


def attack_row(X, y, mode: str, n_bins: int | None, n_jobs: int) -> dict:
    counts = np.bincount(y)
    C = encrypt(mode, n_bins, X, y)
    out = {"majority": attacks.majority_baseline(y)}
    if counts.shape[0] == 2:
        out["alternation"] = attacks.score_labels(
            "alternation", attacks.alternation_labels(C, counts), y).success
    forest = RandomForestClassifier(n_estimators=PROXIMITY_TREES, random_state=0,
                                    n_jobs=n_jobs).fit(C, y)
    proximity = attacks.proximity_matrix(attacks.forest_trees(forest), C)
    out["cluster"] = attacks.score_labels(
        "cluster", attacks.proximity_cluster_labels(proximity, counts, random_state=0),
        y).success
    out["shared"], out["nearest"] = attacks.known_label_success(C, proximity, y, KNOWN_DRAWS)
    aux, target, _, y_target = train_test_split(X, y, test_size=0.5, random_state=0,
                                                stratify=y)
    values = attacks.score_value_recovery(encrypt(mode, n_bins, target, y_target), target,
                                          aux)
    out["within"], out["within_base"] = values.within, values.baseline_within
    out["rho"] = values.rank_correlation
    return out


# The paper's configuration names its selection and flow: the defaults are neither (rr).
PROTOCOL_CONFIGS = (("paper (gini, decide_from='server', gipe_mode='paper', reveal_leaves=True)",
                     {"split_selection": "gini", "decide_from": "server", "gipe_mode": "paper",
                      "reveal_leaves": True}),
                    ("defaults", {}))


def protocol_row(X, y, params: dict, n_trees: int) -> dict:
    counts = np.bincount(y)
    recorder = attacks.RecordingServer(PrivateForestServer())
    client = PrivateForestClient(n_estimators=n_trees, max_bins=16, random_state=0,
                                 server=recorder, **params)
    client.fit(X, y)
    transcript = recorder.transcript
    C = transcript.X_cipher
    leaves = attacks.declared_leaves(transcript)
    bootstrap = attacks.server_bootstrap_counts(transcript.first("setup"))
    proximity = attacks.proximity_matrix(transcript.trees, C)
    out = {"leaves": len(leaves), "rounds": client.fit_stats_.rounds}
    if counts.shape[0] == 2:
        out["alternation"] = attacks.score_labels(
            "", attacks.alternation_labels(C, counts), y).success
    union, shared, nearest = [], [], []
    for draw in range(KNOWN_DRAWS):
        rows, labels = attacks.one_known_per_class(y, draw)
        union.append(attacks.score_labels("", attacks.leaf_union_labels(
            C, transcript.trees, leaves, bootstrap, rows, labels, counts), y, rows).success)
        shared.append(attacks.score_labels("", attacks.shared_cipher_labels(
            C, rows, labels, counts), y, rows).success)
        nearest.append(attacks.score_labels("", attacks.proximity_nearest_labels(
            proximity, rows, labels), y, rows).success)
    out["union"], out["shared"] = float(np.mean(union)), float(np.mean(shared))
    out["nearest"] = float(np.mean(nearest))
    oracle = attacks.pair_oracle_attack(
        PrivateForestClient(n_estimators=1, max_bins=16, random_state=0, **params), X, y)
    out["oracle"] = "refused" if oracle.refused else f"{100 * oracle.success:.1f} %"
    return out


def protocol_table(names, n_rows: int, n_trees: int) -> list[str]:
    header = ("| data | client | declared leaves | leaf union | alternation | shared cipher | "
              "proximity nearest | pair oracle |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for name in names:
        X, y = DATASETS[name]()
        y = np.unique(y, return_inverse=True)[1].astype(np.int64)
        X, _, y, _ = train_test_split(X, y, train_size=n_rows, random_state=0, stratify=y)
        for label, params in PROTOCOL_CONFIGS:
            t0 = time.perf_counter()
            row = protocol_row(X, y, params, n_trees)
            line = (f"| {name} ({n_rows} rows, majority "
                    f"{pct(attacks.majority_baseline(y))} %) | {label} | {row['leaves']} | "
                    f"{pct(row['union'])} | {pct(row.get('alternation'))} | "
                    f"{pct(row['shared'])} | {pct(row['nearest'])} | {row['oracle']} |")
            lines.append(line)
            print(line, f"  [{time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    return lines


REACTION_FAMILIES = ("training", "prediction", "refits")
REACTION_CONFIGS = (("gini", {"split_selection": "gini"}),
                    ("dp (ε = 1 per choice)", {"split_selection": "dp", "label_epsilon": 1.0}))


def reactions_table(names, n_rows: int, n_trees: int, n_targets: int,
                    families=REACTION_FAMILIES, flows=("server", "own")) -> list[str]:
    """The attacks on the client's reactions (issue #47): selective failure in training
    (the paper's flow as positive control, then the default client), selective failure at
    prediction (the paper's replies, then leaf ids) and forced refits (fresh randomized
    labels per fit as positive control, then permanent ones); ``families`` picks which, and
    ``flows`` which training clients (``decide_from``)."""
    header = ("| data | attack | client | bits read right | baseline (constant guess) | "
              "fits | refused fits | fits reported to the user |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for name in names:
        X, y = DATASETS[name]()
        y = np.unique(y, return_inverse=True)[1].astype(np.int64)
        X_small, _, y_small, _ = train_test_split(X, y, train_size=n_rows, random_state=0,
                                                  stratify=y)
        for selection, params in REACTION_CONFIGS if "training" in families else ():
            for flow in flows:
                t0 = time.perf_counter()
                client = PrivateForestClient(n_estimators=n_trees, max_bins=16,
                                             random_state=0, decide_from=flow, **params)
                result = attacks.selective_failure_attack(client, X_small, y_small,
                                                          n_targets=n_targets,
                                                          max_fits=3 * n_targets)
                who = ("paper's flow (`decide_from=\"server\"`)" if flow == "server"
                       else "default (`decide_from=\"own\"`)")
                read = (f"{result.accuracy * result.n_probed:.0f} of {result.n_probed}"
                        if result.n_probed else "none probed (no count to forge)")
                baseline = f"{pct(result.baseline)} %" if result.n_probed else "–"
                line = (f"| {name} ({n_rows} rows) | selective failure, {selection} | {who} | "
                        f"{read} | {baseline} | {result.n_fits} | {result.refusals} | "
                        f"{result.reported} |")
                lines.append(line)
                print(line, f"  [{time.perf_counter() - t0:.0f} s]", file=sys.stderr,
                      flush=True)
        for reply, who in (("leaves", "paper's reply (`prediction_reply=\"leaves\"`)"),
                           ("sums", "paper's reply (`prediction_reply=\"sums\"`)"),
                           ("ids", "default (`prediction_reply=\"ids\"`)")
                           ) if "prediction" in families else ():
            t0 = time.perf_counter()
            client = PrivateForestClient(n_estimators=n_trees, random_state=0,
                                         prediction_reply=reply)
            result = attacks.prediction_oracle_attack(client, X_small, y_small, X[:10],
                                                      n_pairs=n_targets)
            line = (f"| {name} ({n_rows} rows) | selective failure at prediction, rr | {who} | "
                    f"{result.accuracy * result.n_probed:.0f} of {result.n_probed} | "
                    f"{pct(result.baseline)} % | 1 | – | {result.failures} failed predict "
                    "calls |")
            lines.append(line)
            print(line, f"  [{time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
        for label, fresh in (("fresh draw per fit (before the ledger)", True),
                             ("default (permanent randomized response)", False)
                             ) if "refits" in families else ():
            t0 = time.perf_counter()
            client = PrivateForestClient(n_estimators=n_trees, random_state=0)
            with attacks.fresh_randomized_labels() if fresh else contextlib.nullcontext():
                result = attacks.forced_refit_attack(client, X, y, n_fits=7)
            line = (f"| {name} ({X.shape[0]} rows) | forced refits, rr ε = 2, majority over "
                    f"{result.n_fits} failed fits | {label} | {pct(result.majority)} % of "
                    f"labels ({result.distinct_draws} distinct draws) | one fit: "
                    f"{pct(result.single_fit)} % | {result.n_fits} | {result.n_fits} | – |")
            lines.append(line)
            print(line, f"  [{time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    return lines


def pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DEFAULT_DATASETS))
    parser.add_argument("--n-bins", nargs="+", type=int, default=[8, 16, 32, 64])
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--protocol-rows", type=int, default=150)
    parser.add_argument("--protocol-trees", type=int, default=10)
    parser.add_argument("--skip-modes", action="store_true",
                        help="only the protocol table")
    parser.add_argument("--reactions", action="store_true",
                        help="only the table of attacks on the client's reactions "
                             "(selective failure, forced refits)")
    parser.add_argument("--reaction-targets", type=int, default=10,
                        help="rows probed by each selective-failure run")
    parser.add_argument("--reaction-attacks", nargs="+", choices=REACTION_FAMILIES,
                        default=list(REACTION_FAMILIES),
                        help="which rows of the reactions table: selective failure in "
                             "training, at prediction, forced refits")
    parser.add_argument("--reaction-flows", nargs="+", choices=("server", "own"),
                        default=["server", "own"],
                        help="which clients of the training rows: the paper's flow "
                             "(decide_from='server'), the default ('own')")
    parser.add_argument("--data-dir", type=Path,
                        default=next((d for d in DATA_DIRS if d.is_dir()), DATA_DIRS[0]),
                        help="folder of the CSV datasets (default: ../shared/data)")
    args = parser.parse_args()
    temporary_privacy_ledger("privacy_attacks")
    gipe_accuracy.DATA_DIR = args.data_dir  # where its CSV loaders look
    if args.reactions:
        started = time.perf_counter()
        names = [n for n in ("breast_cancer", "wine") if n in args.datasets]
        table = "\n".join(reactions_table(names, args.protocol_rows, args.protocol_trees,
                                          args.reaction_targets, args.reaction_attacks,
                                          args.reaction_flows))
        footer = (f"\nSelective failure: {args.protocol_trees} trees, CKKS, max_bins=16, one "
                  f"target probed per forged round; forced refits: the whole data set; "
                  f"{machine_line()}; total {time.perf_counter() - started:.0f} s.")
        print(table + "\n" + footer)
        if args.markdown:
            args.markdown.write_text(table + "\n" + footer + "\n")
        return
    modes = [("plaintext", None), ("paper", None), ("order", None)] + [
        ("quantile", k) for k in args.n_bins]
    header = ("| data | mode | CV accuracy | Δ vs plain (points) | leakage top 3 bits | "
              "leakage all bits | alternation | shared cipher | proximity clusters | "
              "proximity nearest | values within 5 % (median guess) | rank corr. |")
    lines = [] if args.skip_modes else [header, "|" + "---|" * (header.count("|") - 1)]
    started = time.perf_counter()
    for name in [] if args.skip_modes else args.datasets:
        try:
            X, y = DATASETS[name]()
        except (FileNotFoundError, OSError) as exc:
            print(f"skipping {name}: {exc}", file=sys.stderr)
            continue
        y = np.unique(y, return_inverse=True)[1].astype(np.int64)
        X_attack, y_attack = X, y
        if X.shape[0] > ATTACK_ROWS:
            X_attack, _, y_attack, _ = train_test_split(X, y, train_size=ATTACK_ROWS,
                                                        random_state=0, stratify=y)
        plain = None
        for mode, n_bins in modes:
            t0 = time.perf_counter()
            accuracy = cv_accuracy(X, y, mode, n_bins, args.n_jobs)
            plain = accuracy if mode == "plaintext" else plain
            top, every = leakage(X, y, mode, n_bins)
            row = attack_row(X_attack, y_attack, mode, n_bins, args.n_jobs)
            label = mode if n_bins is None else f"quantile, {n_bins} bins"
            attacked = "" if X_attack is X else f"{X_attack.shape[0]} rows attacked, "
            data = f"{name} ({attacked}majority {pct(row['majority'])} %)"
            line = (f"| {data} | {label} | {accuracy:.4f} | {100 * (accuracy - plain):+.2f} | "
                    f"{top:.3f} | {every:.3f} | {pct(row.get('alternation'))} | "
                    f"{pct(row['shared'])} | {pct(row['cluster'])} | {pct(row['nearest'])} | "
                    f"{pct(row['within'])} ({pct(row['within_base'])}) | {row['rho']:.3f} |")
            lines.append(line)
            print(line, f"  [{time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    protocol = [n for n in ("breast_cancer", "wine", "digits") if n in args.datasets]
    lines += ["", f"Protocol transcripts ({args.protocol_trees} trees, CKKS, max_bins=16; "
              "attack success in %):", ""]
    lines += protocol_table(protocol, args.protocol_rows, args.protocol_trees)
    table = "\n".join(lines)
    footer = (f"\nAttack success in % of rows (rows with a given label excluded); "
              f"{machine_line()}; total {time.perf_counter() - started:.0f} s.")
    print(table + "\n" + footer)
    if args.markdown:
        args.markdown.write_text(table + "\n" + footer + "\n")


if __name__ == "__main__":
    main()
