"""``cipherforest client train | predict | status``: the data owner's side from a shell.

``train`` encrypts a CSV file (GIPE features, CKKS/BFV labels), uploads it to a server with
a progress bar, answers the rounds and saves the client (keys, GIPE state, session token) to
a 0700 model directory; ``predict`` loads that directory and predicts another CSV file;
``status`` asks the server where the model's session stands. The access key comes from
``$CIPHERFOREST_SERVER_KEY`` or ``--server-key-file`` (never the command line, where other
users could read it).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time

import numpy as np

__all__ = ["ProgressBar", "add_client_parser", "read_csv", "run_client"]


class ProgressBar:
    """A one-line text progress bar on a stream (uploads: bytes; rounds: a counter)."""

    def __init__(self, stream=None, width: int = 30):
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.last_what = None
        self.started = time.perf_counter()

    def __call__(self, what: str, done, total) -> None:
        if what != self.last_what and self.last_what is not None:
            self.stream.write("\n")
        self.last_what = what
        elapsed = time.perf_counter() - self.started
        if total:
            filled = int(self.width * done / total)
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r{what:<24} [{bar}] {done / 1e6:8.1f}/{total / 1e6:.1f} MB "
                              f"{elapsed:6.1f} s")
        else:
            self.stream.write(f"\r{what:<24} {done} done {elapsed:6.1f} s")
        self.stream.flush()

    def close(self) -> None:
        if self.last_what is not None:
            self.stream.write("\n")
            self.stream.flush()


def read_csv(path: str, target: str | None) -> tuple[np.ndarray, np.ndarray | None, list]:
    """Features (float64), target column (strings, or None) and feature names of a CSV file
    with a header row. ``target`` names the label column (None: no labels)."""
    with open(path, newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    if len(rows) < 2:
        raise ValueError(f"{path}: expected a header row and at least one data row")
    header, body = rows[0], rows[1:]
    if target is not None and target not in header:
        raise ValueError(f"{path}: no column named {target!r} (columns: {', '.join(header)})")
    t = header.index(target) if target is not None else None
    names = [name for j, name in enumerate(header) if j != t]
    X = np.empty((len(body), len(names)))
    y = []
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise ValueError(f"{path}: row {i + 2} has {len(row)} fields, the header "
                             f"{len(header)}")
        values = [v for j, v in enumerate(row) if j != t]
        try:
            X[i] = [float(v) for v in values]
        except ValueError:
            raise ValueError(f"{path}: row {i + 2} has a non-numeric feature value") from None
        if t is not None:
            y.append(row[t])
    return X, (np.asarray(y) if t is not None else None), names


def _server_key(args) -> str | None:
    if args.server_key_file:
        with open(args.server_key_file, encoding="ascii") as file:
            return file.read().strip()
    return None


def add_client_parser(sub) -> None:
    """The ``client`` subcommand and its actions."""
    client = sub.add_parser("client", help="train, predict and check an encrypted forest on a "
                            "server")
    actions = client.add_subparsers(dest="action", required=True)
    train = actions.add_parser("train", help="encrypt a CSV file, upload it, train, save the "
                               "model directory")
    train.add_argument("--server", required=True, help="http://host:port of the server")
    train.add_argument("--data", required=True, help="CSV file with a header row")
    train.add_argument("--target", required=True, help="name of the label column")
    train.add_argument("--model", required=True, help="directory to save the client to")
    train.add_argument("--server-key-file", help="file holding the server's access key "
                       "(default: $CIPHERFOREST_SERVER_KEY)")
    train.add_argument("--trees", type=int, default=100)
    train.add_argument("--max-depth", type=int, default=None)
    train.add_argument("--max-bins", type=int, default=None)
    train.add_argument("--scheme", choices=("ckks", "bfv"), default="ckks")
    train.add_argument("--random-state", type=int, default=None)
    train.add_argument("--timeout", type=float, default=120.0,
                       help="seconds to keep retrying an unreachable server (default 120)")
    predict = actions.add_parser("predict", help="predict a CSV file with a saved model")
    predict.add_argument("--model", required=True)
    predict.add_argument("--data", required=True, help="CSV file with a header row")
    predict.add_argument("--target", default=None, help="label column to leave out (and "
                         "score against), if the file has one")
    predict.add_argument("--out", default=None, help="CSV file for the predictions "
                         "(default: standard output)")
    predict.add_argument("--server", default=None, help="the server's URL if it moved")
    status = actions.add_parser("status", help="where the saved model's server session stands")
    status.add_argument("--model", required=True)


def run_client(args, parser: argparse.ArgumentParser, out=None) -> int:
    """Run one ``cipherforest client`` action; returns the exit code."""
    out = sys.stdout if out is None else out
    from ..privacy import PrivateForestClient
    from .transport import HTTPTransport, ServiceRequestError, ServiceUnavailableError

    try:
        if args.action == "train":
            if args.trees < 1:
                parser.error("--trees must be at least 1")
            X, y, _ = read_csv(args.data, args.target)
            progress = ProgressBar()
            client = PrivateForestClient(
                args.trees, max_depth=args.max_depth, max_bins=args.max_bins,
                scheme=args.scheme, random_state=args.random_state, timeout=args.timeout,
                server=HTTPTransport(args.server, _server_key(args), timeout=args.timeout,
                                     progress=progress))
            client.fit(X, y)
            progress.close()
            client.save(args.model)  # saved with the transport's URL and session
            stats = client.fit_stats_
            print(f"trained {args.trees} trees in {stats.rounds} rounds; uploaded "
                  f"{stats.bytes_sent / 1e6:.1f} MB; model saved to {args.model}", file=out)
        elif args.action == "predict":
            client = PrivateForestClient.load(args.model, server=args.server)
            X, y, _ = read_csv(args.data, args.target)
            predictions = client.predict(X)
            stream = open(args.out, "w", newline="", encoding="utf-8") if args.out else out
            try:
                writer = csv.writer(stream)
                writer.writerow(["prediction"])
                writer.writerows([[p] for p in predictions.tolist()])
            finally:
                if args.out:
                    stream.close()
            if y is not None:
                accuracy = float(np.mean(predictions.astype(str) == y))
                print(f"accuracy against {args.target!r}: {accuracy:.4f}", file=sys.stderr)
        else:
            client = PrivateForestClient.load(args.model)
            if not isinstance(client.server_, HTTPTransport):
                parser.error(f"{args.model} was trained with the embedded server; status "
                             "needs a server URL")
            print(json.dumps(client.server_.status(), indent=2), file=out)
    except (OSError, ValueError, ServiceRequestError, ServiceUnavailableError) as exc:
        print(f"cipherforest client {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0

