"""The label-private default (``split_selection="rr"``) against the plaintext forest, by size.

For each row count: synthetic data (``make_classification``, 20 features, 10 informative, 25 %
held out), the default private forest fitted end to end through an embedded server (client,
server and the in-process transport; ``n_jobs=-1``) with its time split by step, then our
``RandomForestClassifier(n_trees, max_bins=32, n_jobs=-1)`` on the same plaintext rows, and
both forests' prediction and accuracy. Steps of a fit:

* client: GIPE fit and encryption, keys, the setup message (until the server gets it);
* labels: encrypting the label packs (client) and the server expanding them into their lane
  rotations (the ``labels`` messages);
* growth: the server growing every tree on ỹ (compiled grower);
* leaves: the server reading each leaf's rows off the trees and summing their label
  ciphertexts into the leaf store;
* the rest of the client's time (the ``trained`` reply).

Prediction is timed for the reply the client was fitted for (``--reply``): ``ids`` (the
default: the server answers with the leaf each row reaches, the client reads its own leaf
counts; no label ciphertext is sent, so the labels and leaves steps are empty), or the
paper's ``sums`` / ``leaves`` (label ciphertexts uploaded, leaf sums on the server; both of
these replies are then timed), given per (row, tree). ``--planner`` also times the Python
planner growing the same trees on the same ciphers and ỹ (the growth before the compiled
grower), for comparison.

``--no-he`` times only the steps of a fit and a prediction that involve no label
ciphertext, at sizes the homomorphic leaf sums would make too long: the client's offline
stage without the label packs (GIPE fit and encryption, randomized response, keys, the setup
message), the server's compiled growth, reading each leaf's rows off the trees (what the
leaf sums start from), and routing the encrypted test rows through every tree
(what a prediction answered by leaf ids costs the server), beside the plaintext forest.

    python benchmarks/rr_time.py --rows 20000,100000
    python benchmarks/rr_time.py --rows 2000,6000 --reply sums --planner
    python benchmarks/rr_time.py --rows 20000,100000 --no-he
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import PrivateForestClient, PrivateForestServer
from cipherforest.privacy.protocol import decode_message
from cipherforest.privacy.protocol.decisions import grow_on_labels
from cipherforest.privacy.protocol.params import ForestSpec
from cipherforest.privacy.protocol.planner import ForestGrowth
from cipherforest.privacy.protocol.server.growth import grow_rr_forest, leaf_rows
from cipherforest.privacy.protocol.server.routing import pack_forest, route_rows

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import machine_line, temporary_privacy_ledger  # noqa: E402


class TimedServer:
    """A transport to an embedded server that notes when each request arrived and how long
    the server took, by the kind of its reply."""

    def __init__(self, server: PrivateForestServer):
        self.server = server
        self.calls: list[tuple[str, float, float]] = []  # (reply kind, arrived, seconds)

    def handle(self, data: bytes) -> bytes:
        arrived = time.perf_counter()
        out = self.server.handle(data)
        seconds = time.perf_counter() - arrived
        self.calls.append((decode_message(out).kind, arrived, seconds))
        return out

    def seconds(self, kind: str) -> float:
        return sum(s for k, _, s in self.calls if k == kind)


def fit_private(X, y, X_test, y_test, trees: int, test_rows: int, reply: str) -> dict:
    transport = TimedServer(PrivateForestServer(n_jobs=-1))
    client = PrivateForestClient(trees, random_state=0, n_jobs=-1, server=transport,
                                 prediction_reply=reply)
    started = time.perf_counter()
    client.fit(X, y)
    total = time.perf_counter() - started
    stats = transport.server.session_stats(client.session_)
    setup_at = transport.calls[0][1]
    labels_end = max(a + s for k, a, s in transport.calls if k in ("session", "ack"))
    # without label ciphertexts the setup's reply ends the upload
    out = {"fit": total, "client": setup_at - started,
           "labels": labels_end - setup_at - transport.seconds("session"),
           "growth": stats.growth_seconds, "leaves": stats.leaf_seconds,
           "accuracy": float(np.mean(client.predict(X_test) == y_test))}
    out["rest"] = total - out["client"] - out["labels"] - out["growth"] - out["leaves"]
    rows = X_test[:test_rows]
    for asked in (("ids",) if reply == "ids" else ("sums", "leaves")):
        client.set_params(prediction_reply=asked)
        started = time.perf_counter()
        client.predict(rows)
        out[f"predict_{asked}"] = (time.perf_counter() - started) / (rows.shape[0] * trees)
    sent = transport.server.session(client.session_)
    out["spec"], out["y_rr"] = sent.spec, sent.randomized_labels
    out["C"] = sent.X
    return out


def planner_growth(C: np.ndarray, spec: ForestSpec, y_rr: np.ndarray) -> float:
    started = time.perf_counter()
    grow_on_labels(ForestGrowth(C, spec), np.eye(int(y_rr.max()) + 1)[y_rr])
    return time.perf_counter() - started


def steps_without_he(X, y, X_test, trees: int) -> dict:
    """Seconds of the client's offline stage (label packs left unencrypted), the server's
    growth, and µs per (row, tree) of routing and of encrypting the test rows."""
    client = PrivateForestClient(trees, random_state=0, n_jobs=-1)
    started = time.perf_counter()
    setup, _ = client.encrypt(X, y)  # the label packs are encrypted as they are taken
    encrypted = time.perf_counter()
    C = setup.array("X", "float64", 2)
    growth = ForestGrowth(C, ForestSpec.from_meta(setup.meta, *C.shape))
    grow_rr_forest(growth, setup.array("y_rr", "int64", 1), n_jobs=-1)
    grown = time.perf_counter()
    leaf_rows(growth, n_jobs=-1)
    leaves = time.perf_counter()
    C_test = np.asarray(client.encryptor_.transform(X_test), dtype=np.float64)
    test_encrypted = time.perf_counter()
    route_rows(pack_forest(growth.trees), C_test, n_jobs=-1)
    routed = time.perf_counter()
    per_pair = 1e6 / (X_test.shape[0] * trees)
    return {"client": encrypted - started, "growth": grown - encrypted,
            "leaf_rows": leaves - grown, "encrypt_test": (test_encrypted - leaves) * per_pair,
            "route": (routed - test_encrypted) * per_pair}


def warm_up(trees: int) -> None:
    """Compile (or load) every kernel the timed runs use, outside the timings."""
    X, y = make_classification(n_samples=300, n_features=20, random_state=1)
    RandomForestClassifier(2, max_bins=32, n_jobs=-1).fit(X, y).predict(X)
    steps_without_he(X, y, X, 2)
    client = PrivateForestClient(2, random_state=0, n_jobs=-1).fit(X, y)
    client.predict(X[:10])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="2000,6000",
                        help="comma-separated row counts (training rows are 75 %%)")
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--test-rows", type=int, default=1000,
                        help="test rows whose prediction is timed")
    parser.add_argument("--planner", action="store_true",
                        help="also time the Python planner's growth of the same trees")
    parser.add_argument("--reply", choices=("ids", "sums"), default="ids",
                        help="the prediction reply the client is fitted for (sums: the "
                             "paper's, with label ciphertexts and leaf sums)")
    parser.add_argument("--no-he", action="store_true",
                        help="time only the steps without label ciphertexts")
    args = parser.parse_args(argv)
    temporary_privacy_ledger("rr_time")
    warm_up(args.trees)
    if args.no_he:
        return main_without_he(args)
    print(machine_line() + f"; {args.trees} trees, CKKS, embedded server, n_jobs=-1, "
          f"prediction_reply={args.reply!r}")
    predicted = ["ids"] if args.reply == "ids" else ["sums", "leaves"]
    header = ("| rows (train) | client s | labels s | growth s | leaves s | rest s | fit s "
              "| RF fit s | fit / RF | "
              + "".join(f"predict {r} µs | " for r in predicted) + "RF predict µs "
              "| accuracy | RF accuracy |" + (" planner growth s |" if args.planner else ""))
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for n in (int(v) for v in args.rows.split(",")):
        X, y = make_classification(n_samples=n, n_features=20, n_informative=10,
                                   random_state=0)
        X, X_test, y, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
        private = fit_private(X, y, X_test, y_test, args.trees, args.test_rows, args.reply)
        started = time.perf_counter()
        rf = RandomForestClassifier(args.trees, max_bins=32, n_jobs=-1, random_state=0).fit(X, y)
        rf_fit = time.perf_counter() - started
        rows = X_test[:args.test_rows]
        started = time.perf_counter()
        rf.predict(rows)
        rf_predict = (time.perf_counter() - started) / (rows.shape[0] * args.trees)
        rf_accuracy = float(np.mean(rf.predict(X_test) == y_test))
        line = (f"| {X.shape[0]:,} | {private['client']:.1f} | {private['labels']:.1f} "
                f"| {private['growth']:.1f} | {private['leaves']:.1f} | {private['rest']:.1f} "
                f"| {private['fit']:.1f} | {rf_fit:.2f} | {private['fit'] / rf_fit:.1f}x | "
                + "".join(f"{private['predict_' + r] * 1e6:.2f} | " for r in predicted)
                + f"{rf_predict * 1e6:.2f} | {private['accuracy']:.4f} | {rf_accuracy:.4f} |")
        if args.planner:
            line += f" {planner_growth(private['C'], private['spec'], private['y_rr']):.1f} |"
        print(line, flush=True)


def main_without_he(args) -> None:
    print(machine_line() + f"; {args.trees} trees, n_jobs=-1; steps without label ciphertexts")
    header = ("| rows (train) | client s (no label packs) | growth s | client + growth s "
              "| RF fit s | (client + growth) / RF | growth / RF | leaf rows s "
              "| encrypt test rows µs | route µs | RF predict µs |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for n in (int(v) for v in args.rows.split(",")):
        X, y = make_classification(n_samples=n, n_features=20, n_informative=10,
                                   random_state=0)
        X, X_test, y, _ = train_test_split(X, y, test_size=0.25, random_state=0)
        steps = steps_without_he(X, y, X_test, args.trees)
        started = time.perf_counter()
        rf = RandomForestClassifier(args.trees, max_bins=32, n_jobs=-1, random_state=0).fit(X, y)
        rf_fit = time.perf_counter() - started
        started = time.perf_counter()
        rf.predict(X_test)
        rf_predict = (time.perf_counter() - started) * 1e6 / (X_test.shape[0] * args.trees)
        both = steps["client"] + steps["growth"]
        print(f"| {X.shape[0]:,} | {steps['client']:.1f} | {steps['growth']:.1f} | {both:.1f} "
              f"| {rf_fit:.2f} | {both / rf_fit:.1f}x | {steps['growth'] / rf_fit:.1f}x "
              f"| {steps['leaf_rows']:.1f} | {steps['encrypt_test']:.2f} "
              f"| {steps['route']:.2f} | {rf_predict:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
