"""``cipherforest client encrypt | upload | train | predict | status | ledger``: the data owner's
side.

``encrypt`` encrypts a CSV file (GIPE features, CKKS/BFV labels) offline into a 0700 model
directory: the client's secrets plus the public messages to upload. ``upload`` opens a server
session and sends those messages with a progress bar, recording in the directory what the
server has committed, so a re-run after an interruption continues where it stopped.
``train --model DIR`` answers the rounds of the uploaded session and saves the fitted client;
``train --data CSV --target COL --server URL --model DIR`` does the three steps in one go.
``--learner boosting`` (encrypt, one-shot train) makes the model a
:class:`~cipherforest.privacy.PrivateGradientBoostingClassifier` instead of the private
forest, ``--learner regressor`` a :class:`~cipherforest.privacy.PrivateForestRegressor` and
``--learner boosting-regressor`` a
:class:`~cipherforest.privacy.PrivateGradientBoostingRegressor` (numeric target column);
the directory records which, and every later action loads that class.
``predict`` loads a trained directory and predicts another CSV file; ``status`` says where the
model and its server session stand; ``ledger show | reset`` reads or (with ``--yes``) resets
the client's privacy ledger. The access key comes from ``$CIPHERFOREST_SERVER_KEY``
or ``--server-key-file`` (never the command line, where other users could read it).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys

import numpy as np

from .._progress import ProgressBar
from ..privacy.dp import format_privacy_report
from ..privacy.protocol import ProtocolError, decode_message

__all__ = ["TransportProgress", "add_client_parser", "read_csv", "run_client"]


class TransportProgress:
    """``progress(what, done, total)`` of :class:`~cipherforest.privacy.protocol.HTTPTransport`
    drawn with the package's one-line bar: a new line per phase, uploads in MB, rounds
    counted."""

    def __init__(self, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.what: str | None = None
        self.bar: ProgressBar | None = None

    def __call__(self, what: str, done: int, total: int | None) -> None:
        if what != self.what:
            self.close()
            self.what = what
            self.bar = (ProgressBar(total, f"{what:<24}", self.stream, unit="MB", scale=1e6)
                        if total else ProgressBar(None, f"{what:<24}", self.stream))
        self.bar.update(done - self.bar.done)

    def close(self) -> None:
        """End the current phase's line."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


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


#: Defaults of the forest options (fixed by ``encrypt``; ``train --model DIR`` refuses others).
_FOREST_DEFAULTS = {"learner": "forest", "trees": 100, "max_depth": None, "max_bins": None,
                    "min_samples_split": 2, "scheme": "ckks", "random_state": None,
                    "split_selection": "rr", "decide_from": "own", "label_epsilon": None,
                    "label_pack_rows": None, "label_chunk": 2, "learning_rate": None}
#: The forest options a boosting model takes (the others must keep their defaults).
_BOOSTING_OPTIONS = ("learner", "trees", "max_depth", "max_bins", "min_samples_split",
                     "random_state", "label_epsilon", "learning_rate")
#: The forest options a regression forest takes.
_REGRESSOR_OPTIONS = ("learner", "trees", "max_depth", "max_bins", "min_samples_split",
                      "random_state", "split_selection", "label_epsilon")
#: Depth of a boosting model's trees without --max-depth (the boosting estimators').
_BOOSTING_DEPTH = 3
#: The learners whose target column is numeric.
_REGRESSION_LEARNERS = ("regressor", "boosting-regressor")
#: The estimators a model directory may hold, by the name it records.
_MODELS = ("PrivateForestClient", "PrivateGradientBoostingClassifier",
           "PrivateForestRegressor", "PrivateGradientBoostingRegressor")


def _add_forest_options(parser) -> None:
    defaults = _FOREST_DEFAULTS
    parser.add_argument("--learner", choices=("forest", "boosting", "regressor",
                                              "boosting-regressor"), default="forest",
                        help="what the server trains: forest (the private random forest, "
                        "default), boosting (gradient boosting on the randomized-response "
                        "labels, the leaf values refitted by the client; takes --trees as "
                        "rounds, --max-depth (default 3), --max-bins, --min-samples-split, "
                        "--random-state, --label-epsilon and --learning-rate), regressor "
                        "(a regression forest on privatised numeric targets, leaf values from "
                        "the true ones; takes --trees, --max-depth, --max-bins, "
                        "--min-samples-split, --random-state, --split-selection rr or blind "
                        "and --label-epsilon) or boosting-regressor (squared-error boosting "
                        "on privatised numeric targets; the options of boosting)")
    parser.add_argument("--trees", type=int, default=defaults["trees"],
                        help="trees of the forest, or boosting rounds (default 100)")
    parser.add_argument("--learning-rate", type=float, default=defaults["learning_rate"],
                        help="boosting: shrinkage of every tree (default 0.2; "
                             "boosting-regressor 0.1)")
    parser.add_argument("--max-depth", type=int, default=defaults["max_depth"],
                        help="deepest level of a tree (default: no limit; boosting 3)")
    parser.add_argument("--max-bins", type=int, default=defaults["max_bins"],
                        help="at most this many bins (2-255) of candidate thresholds per "
                        "feature (default: every midpoint)")
    parser.add_argument("--min-samples-split", type=int, default=defaults["min_samples_split"],
                        help="fewest training rows a node needs to be split (the paper's "
                        "alpha: 10 below 20,000 rows, 100 above; default 2)")
    parser.add_argument("--scheme", choices=("ckks", "bfv"), default=defaults["scheme"],
                        help="label encryption: ckks (approximate, the paper's) or bfv "
                        "(exact integers, needed beyond a few thousand rows) (default ckks)")
    parser.add_argument("--random-state", type=int, default=defaults["random_state"],
                        help="seed of the forest's bootstrap and feature draws (default: "
                        "from the OS; keys always come from the OS)")
    parser.add_argument("--split-selection", choices=("rr", "dp", "blind", "gini", "paper"),
                        default=defaults["split_selection"],
                        help="how the splits are chosen, and what that guarantees about the "
                        "labels (docs/threat_model.md): rr (default: splits by Gini on "
                        "randomized-response labels, epsilon-label-DP per row, no rounds), "
                        "dp (label-DP choices in rounds, with --label-epsilon), blind (no "
                        "labels used, no rounds), gini (the paper's best split: no finite "
                        "epsilon, the trees leak the labels), paper (a regression forest's "
                        "gini: the exact variance rule on CKKS target sums, in rounds)")
    parser.add_argument("--decide-from", choices=("own", "server"),
                        default=defaults["decide_from"],
                        help="gini/dp: decide from the client's own label counts in "
                        "plan-only rounds (own, default: no label ciphertext is uploaded) or "
                        "from the server's encrypted counts (server: the paper's flow)")
    parser.add_argument("--label-epsilon", type=float, default=defaults["label_epsilon"],
                        help="rr: epsilon of the randomized response (default 2); dp: epsilon "
                        "of each split choice (required)")
    parser.add_argument("--label-pack-rows", type=int, default=defaults["label_pack_rows"],
                        help="at most this many rows' labels per label ciphertext")
    parser.add_argument("--label-chunk", type=int, default=defaults["label_chunk"],
                        help="label ciphertexts per upload message (default 2)")


def _add_ledger_options(parser, fit: bool = True) -> None:
    parser.add_argument("--privacy-ledger", default=None, metavar="DIR",
                        help="directory of the client's privacy ledger: the secret that fixes "
                        "each row's randomized label and the label-privacy loss of every "
                        "release (default: $CIPHERFOREST_PRIVACY_LEDGER, else "
                        "~/.cipherforest/privacy-ledger)")
    if fit:
        parser.add_argument("--max-total-epsilon", type=float, default=None, metavar="E",
                            help="refuse, before anything is sent, a fit that would bring a "
                            "row's cumulative epsilon in the ledger above E (a repeat of a "
                            "recorded rr release adds nothing)")


def _add_server_options(parser, required: bool = False) -> None:
    parser.add_argument("--server", required=required, default=None,
                        help="http://host:port of the server")
    parser.add_argument("--server-key-file", help="file holding the server's access key "
                        "(default: $CIPHERFOREST_SERVER_KEY)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds to keep retrying an unreachable server (default 120)")


def add_client_parser(sub) -> None:
    """The ``client`` subcommand and its actions."""
    client = sub.add_parser("client", help="encrypt, upload, train, predict and check an "
                            "encrypted forest on a server")
    actions = client.add_subparsers(dest="action", required=True)
    encrypt = actions.add_parser("encrypt", help="encrypt a CSV file into a model directory "
                                 "(offline: nothing is sent)")
    encrypt.add_argument("--data", required=True, help="CSV file with a header row")
    encrypt.add_argument("--target", required=True, help="name of the label column")
    encrypt.add_argument("--model", required=True, help="new directory for the keys and the "
                         "package to upload")
    encrypt.add_argument("--force", action="store_true", help="replace the model files of an "
                         "existing directory")
    _add_forest_options(encrypt)
    _add_ledger_options(encrypt)
    upload = actions.add_parser("upload", help="upload an encrypted model directory to a "
                                "server session (a re-run continues an interrupted upload)")
    upload.add_argument("--model", required=True, help="the model directory made by encrypt")
    _add_server_options(upload)
    upload.add_argument("--new-session", action="store_true", help="delete the saved session "
                        "on the server and upload everything to a new one")
    train = actions.add_parser("train", help="train an uploaded model directory; or, with "
                               "--data, --target and --server, encrypt + upload + train")
    train.add_argument("--model", required=True, help="the model directory")
    train.add_argument("--data", default=None, help="CSV file with a header row (one-shot)")
    train.add_argument("--target", default=None, help="name of the label column (one-shot)")
    train.add_argument("--verbose", action="store_true", help="one line per round on standard "
                       "error: open nodes, query megabytes, seconds")
    train.add_argument("--force", action="store_true", help="one-shot: replace the model of "
                       "an existing --model directory")
    _add_server_options(train)
    _add_forest_options(train)
    _add_ledger_options(train)
    predict = actions.add_parser("predict", help="predict a CSV file with a saved model")
    predict.add_argument("--model", required=True, help="the trained model directory")
    predict.add_argument("--data", required=True, help="CSV file with a header row")
    predict.add_argument("--target", default=None, help="label column to leave out (and "
                         "score against), if the file has one")
    predict.add_argument("--out", default=None, help="CSV file for the predictions "
                         "(default: standard output)")
    predict.add_argument("--server", default=None, help="the server's URL if it moved")
    predict.add_argument("--exact", action="store_true", help="exact counts for a model "
                         "that predicts with the server's encrypted per-row sums (CKKS, the "
                         "paper's flow, e.g. models saved before the client kept its own leaf "
                         "counts): ask for the leaf-store ciphertexts instead; models that "
                         "read their own leaf counts are exact already")
    status = actions.add_parser("status", help="where the saved model's server session stands")
    status.add_argument("--model", required=True, help="the model directory")
    ledger = actions.add_parser("ledger", help="show or reset the client's privacy ledger")
    ledger_actions = ledger.add_subparsers(dest="ledger_action", required=True)
    show = ledger_actions.add_parser("show", help="the releases recorded and the cumulative "
                                     "epsilon of the most charged row (JSON)")
    _add_ledger_options(show, fit=False)
    reset = ledger_actions.add_parser("reset", help="forget every release and draw a new "
                                      "secret: the randomized labels change and the epsilon "
                                      "spent so far is no longer counted")
    _add_ledger_options(reset, fit=False)
    reset.add_argument("--yes", action="store_true", help="confirm the reset")


#: Exit status of a train whose server sent counts that are not the client's own (the model
#: is saved; the privacy report says where the server deviated).
_DEVIATION_EXIT = 3


def run_client(args, parser: argparse.ArgumentParser, out=None) -> int:
    """Run one ``cipherforest client`` action; returns the exit code."""
    out = sys.stdout if out is None else out
    from ..privacy.protocol import HTTPTransport, ServiceUnavailableError

    try:
        if args.action == "encrypt":
            _encrypt(args, parser, out)
        elif args.action == "upload":
            _upload(args, parser, out)
        elif args.action == "train" and args.data is None:
            if args.target is not None:
                parser.error("--target goes with --data (the one-shot train)")
            changed = [name for name, default in _FOREST_DEFAULTS.items()
                       if getattr(args, name) != default]
            if changed:
                parser.error(f"--{changed[0].replace('_', '-')}: the forest options of a "
                             "model directory were fixed by 'cipherforest client encrypt'")
            ledger = [name for name in ("privacy_ledger", "max_total_epsilon")
                      if getattr(args, name) is not None]
            if ledger:
                parser.error(f"--{ledger[0].replace('_', '-')}: the privacy ledger of a "
                             "model directory was opened and checked by 'cipherforest "
                             "client encrypt' (its rows are keyed under that ledger's "
                             "secret); give it there")
            client = _train_package(args, parser, out)
            if not client.privacy_report_["server_honest"]:
                return _DEVIATION_EXIT
        elif args.action == "train":
            if args.target is None or args.server is None:
                parser.error("the one-shot train (--data) needs --target and --server")
            if os.path.isdir(args.model) and os.listdir(args.model) and not args.force:
                raise ValueError(f"{args.model} exists and is not empty: give another "
                                 "--model, or --force to replace its model (new keys: a model "
                                 "trained with the old ones cannot be used any more)")
            X, y, _ = read_csv(args.data, args.target)
            y = _target(args, args.data, y)
            progress = TransportProgress()
            client = _forest_client(
                args, parser, timeout=args.timeout, verbose=int(args.verbose),
                server=HTTPTransport(args.server, _server_key(args), timeout=args.timeout,
                                     progress=progress))
            client.fit(X, y)
            progress.close()
            client.save(args.model)  # saved with the transport's URL and session
            stats = client.fit_stats_
            print(f"trained {args.trees} trees in {stats.rounds} rounds; uploaded "
                  f"{stats.bytes_sent / 1e6:.1f} MB; model saved to {args.model}", file=out)
            print(format_privacy_report(client.privacy_report_), file=out)
            if not client.privacy_report_["server_honest"]:
                return _DEVIATION_EXIT
        elif args.action == "predict":
            client = _model_class(args.model).load(args.model, server=args.server)
            if args.exact and getattr(client, "prediction_reply", "ids") == "sums":
                client.set_params(prediction_reply="leaves")
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
            from sklearn.base import is_regressor
            from sklearn.metrics import r2_score

            if y is not None and is_regressor(client):
                r2 = r2_score(_numeric_target(args.data, args.target, y), predictions)
                print(f"R² against {args.target!r}: {r2:.4f}", file=sys.stderr)
            elif y is not None:
                accuracy = float(np.mean(predictions.astype(str) == y))
                print(f"accuracy against {args.target!r}: {accuracy:.4f}", file=sys.stderr)
        elif args.action == "ledger":
            _ledger(args, parser, out)
        else:
            print(json.dumps(_status(args.model), indent=2), file=out)
    except (OSError, ValueError, ProtocolError, ServiceUnavailableError) as exc:
        print(f"cipherforest client {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0


def _ledger(args, parser, out) -> None:
    """``ledger show`` (JSON, never creates a ledger) and ``ledger reset --yes``."""
    from ..privacy.ledger import PrivacyLedger, default_ledger_path

    path = args.privacy_ledger or default_ledger_path()
    if args.ledger_action == "show":
        print(json.dumps(PrivacyLedger(path, create=False).summary(), indent=2), file=out)
        return
    if not args.yes:
        parser.error(f"ledger reset forgets every release recorded in {path} and draws a new "
                     "secret (the randomized labels change, the epsilon spent so far is no "
                     "longer counted): give --yes to confirm")
    PrivacyLedger.reset(path)
    print(f"reset the privacy ledger {path}: no release recorded, a new secret", file=out)


def _status(path: str) -> dict:
    """Where a model directory stands, in one shape at every stage: ``stage``, ``server``,
    ``session`` (the server's status of the session, or None), ``upload`` (messages
    committed; None once trained), ``privacy`` (the trained model's privacy report as the
    train printed it, one string a line; None before training and for models saved before
    reports were kept)."""
    from ..privacy.package import load_package, model_stage
    from ..privacy.protocol import HTTPTransport

    if model_stage(path) == "trained":
        client = _model_class(path).load(path)
        transport = client.server_ if isinstance(client.server_, HTTPTransport) else None
        report = getattr(client, "privacy_report_", None)
        return {"stage": "trained", "server": None if transport is None else transport.url,
                "session": None if transport is None else transport.status(),
                "upload": None,
                "privacy": None if report is None else format_privacy_report(report).split("\n")}
    _, meta = load_package(_model_class(path), path)
    info = meta["transport"] or {}
    return {"stage": meta["stage"], "server": info.get("url"),
            "session": HTTPTransport(info["url"], session=info).status()
            if info.get("id") else None,
            "upload": {"setup_committed": meta["setup_committed"],
                       "label_messages": meta["n_label_messages"],
                       "label_messages_committed": meta["label_messages_committed"]},
            "privacy": None}


def _model_class(path: str):
    """The estimator class of a model directory (the name it records)."""
    from .. import privacy
    from ..privacy.package import model_name

    name = model_name(path)
    if name not in _MODELS:
        raise ValueError(f"{path} holds a {name}, which the client commands do not handle")
    return getattr(privacy, name)


def _forest_client(args, parser, **params):
    from ..privacy import (
        PrivateForestClient,
        PrivateForestRegressor,
        PrivateGradientBoostingClassifier,
        PrivateGradientBoostingRegressor,
    )

    if args.trees < 1:
        parser.error("--trees must be at least 1")
    if args.learner == "forest":
        if args.learning_rate is not None:
            parser.error("--learning-rate is an option of --learner boosting")
        if args.split_selection == "paper":
            parser.error("--split-selection paper: the exact variance rule of --learner "
                         "regressor (a classification forest's is gini)")
        return PrivateForestClient(
            args.trees, max_depth=args.max_depth, max_bins=args.max_bins,
            min_samples_split=args.min_samples_split, scheme=args.scheme,
            random_state=args.random_state, split_selection=args.split_selection,
            decide_from=args.decide_from, label_epsilon=args.label_epsilon,
            label_pack_rows=args.label_pack_rows,
            label_chunk=args.label_chunk, privacy_ledger=args.privacy_ledger,
            max_total_epsilon=args.max_total_epsilon, **params)
    boosting = args.learner in ("boosting", "boosting-regressor")
    what = {"boosting": "a boosting model", "regressor": "a regression forest",
            "boosting-regressor": "a boosting regressor"}[args.learner]
    taken = _BOOSTING_OPTIONS if boosting else _REGRESSOR_OPTIONS
    changed = [name for name, default in _FOREST_DEFAULTS.items()
               if name not in taken and getattr(args, name) != default]
    if changed:
        on = ("randomized-response labels" if args.learner == "boosting"
              else "privatised targets")
        parser.error(f"--{changed[0].replace('_', '-')}: not an option of {what} (it trains "
                     f"on {on}, sends no label ciphertext and has no rounds)")
    shared = {"max_bins": args.max_bins, "min_samples_split": args.min_samples_split,
              "random_state": args.random_state, "label_epsilon": args.label_epsilon,
              "privacy_ledger": args.privacy_ledger,
              "max_total_epsilon": args.max_total_epsilon, **params}
    if args.learner == "regressor":
        if args.split_selection not in ("rr", "blind", "paper"):
            parser.error(f"--split-selection {args.split_selection}: a regression forest "
                         "takes rr (privatised targets), blind (no targets used) or paper "
                         "(the exact variance rule: no guarantee)")
        if args.split_selection != "rr" and args.label_epsilon is not None:
            parser.error(f"--label-epsilon: not an option of a {args.split_selection} "
                         "regression forest (it privatises no targets)")
        return PrivateForestRegressor(args.trees, max_depth=args.max_depth,
                                      split_selection=args.split_selection, **shared)
    boosting_class = (PrivateGradientBoostingClassifier if args.learner == "boosting"
                      else PrivateGradientBoostingRegressor)
    return boosting_class(
        args.trees, learning_rate=0.1 if args.learning_rate is None else args.learning_rate,
        max_depth=_BOOSTING_DEPTH if args.max_depth is None else args.max_depth, **shared)


def _target(args, path: str, y: np.ndarray) -> np.ndarray:
    """The target column as the learner reads it: a regression learner's as finite floats
    (a clear error naming the first bad row otherwise), a classifier's as read."""
    if args.learner not in _REGRESSION_LEARNERS:
        return y
    return _numeric_target(path, args.target, y)


def _numeric_target(path: str, name: str, y: np.ndarray) -> np.ndarray:
    values = np.empty(y.shape[0])
    for i, text in enumerate(y.tolist()):
        try:
            values[i] = float(text)
        except ValueError:
            raise ValueError(f"{path}: row {i + 2}: the target column {name!r} holds "
                             f"{text!r}, not a number (a regression model needs a numeric "
                             "target)") from None
        if not np.isfinite(values[i]):
            raise ValueError(f"{path}: row {i + 2}: the target column {name!r} holds "
                             f"{text!r} (a regression target must be a finite number)")
    return values


def _encrypt(args, parser, out) -> None:
    """``encrypt``: the client's keys and the package to upload, written offline."""
    from ..privacy.package import save_package

    X, y, _ = read_csv(args.data, args.target)
    client = _forest_client(args, parser)
    setup, labels = client.encrypt(X, _target(args, args.data, y))
    n_messages = save_package(client, args.model, setup, labels, force=args.force)
    size = _package_bytes(args.model, n_messages)
    print(f"encrypted {X.shape[0]} rows x {X.shape[1]} features into {args.model}: setup + "
          f"{n_messages} labels message{'s' if n_messages != 1 else ''}, {size / 1e6:.1f} MB "
          "to upload; nothing was sent", file=out)


def _package_bytes(path: str, n_messages: int) -> int:
    from ..privacy.package import label_message_path, setup_message_path

    return os.path.getsize(setup_message_path(path)) + sum(
        os.path.getsize(label_message_path(path, i)) for i in range(n_messages))


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _server_url(args, parser, meta: dict) -> str:
    url = args.server or (meta["transport"] or {}).get("url")
    if url is None:
        parser.error(f"{args.model} has no server session yet: give --server URL")
    return url


def _upload(args, parser, out) -> None:
    """``upload``: open (or continue) the session, send what the server has not committed;
    the directory records each committed message, so a re-run sends nothing twice."""
    from ..privacy import ProtocolStats
    from ..privacy.package import (
        label_message_path,
        load_package,
        setup_message_path,
        update_package,
    )
    from ..privacy.protocol import HTTPTransport, ServiceRequestError, ServiceUnavailableError
    from ..privacy.protocol.http import ACCESS_KEY_ENV

    client, meta = load_package(_model_class(args.model), args.model)
    url = _server_url(args, parser, meta)
    old = meta["transport"] or {}
    if meta["stage"] == "uploaded" and not args.new_session:
        print(f"{args.model} is uploaded (session {old.get('id')}); nothing to send: run "
              f"'cipherforest client train --model {args.model}'", file=out)
        return
    if (args.new_session or not old.get("id")) and not (
            _server_key(args) or os.environ.get(ACCESS_KEY_ENV)):
        raise ValueError(f"opening a session needs the server's access key: set "
                         f"{ACCESS_KEY_ENV} or give --server-key-file")
    if meta["stage"] == "training" and not args.new_session:
        raise ValueError(f"{args.model}: session {old.get('id')} has started training; run "
                         f"'cipherforest client train --model {args.model}' to continue it, "
                         "or upload --new-session to start over in a new session")
    if args.new_session:
        if old.get("id"):
            try:
                HTTPTransport(url, timeout=args.timeout, session=old).delete()
            except (ServiceRequestError, ServiceUnavailableError) as exc:
                print(f"note: the old session {old['id']} could not be deleted ({exc})",
                      file=sys.stderr)
        meta = update_package(args.model, stage="encrypted", transport=None, session=None,
                              setup_committed=False, label_messages_committed=0,
                              answers_recorded=0)
        client.__dict__.pop("session_", None)
        client.client_session_.session_id = None
    progress = TransportProgress()
    transport = HTTPTransport(url, _server_key(args), timeout=args.timeout, progress=progress,
                              session=meta["transport"])
    engine = client.client_session_
    engine.transport = transport
    sent = 0
    try:
        if transport.session_id is None:
            transport.open_session()
            meta = update_package(args.model, stage="uploading",
                                  transport=transport.session_info())
        if not meta["setup_committed"]:
            setup = _read_bytes(setup_message_path(args.model))
            reply = decode_message(transport.upload(setup, "setup", kind="setup"), "session")
            transport.protocol_id = reply.value("session", str)
            engine.accept_session(reply)
            client.session_ = engine.session_id
            sent += len(setup)
            meta = update_package(args.model, client, transport=transport.session_info(),
                                  setup_committed=True)
        stats = ProtocolStats()
        for index in range(meta["label_messages_committed"], meta["n_label_messages"]):
            message = decode_message(_read_bytes(label_message_path(args.model, index)),
                                     "labels")
            engine.exchange(engine.addressed(message), "ack", stats)
            meta = update_package(args.model, label_messages_committed=index + 1)
        sent += stats.bytes_sent
        meta = update_package(args.model, stage="uploaded")
    except ServiceRequestError as exc:
        if exc.status in (401, 404, 410) and meta["transport"] is not None:
            raise ServiceRequestError(exc.status, exc.code, f"{exc.detail} (if the server "
                                      "lost the session, re-run with --new-session)") from None
        raise
    finally:
        progress.close()
    print(f"committed {sent / 1e6:.1f} MB to session {transport.session_id} on {url}; next: "
          f"cipherforest client train --model {args.model}", file=out)


def _train_package(args, parser, out):
    """``train --model DIR``: answer the rounds of the uploaded session, save the client."""
    from ..privacy.package import (
        answer_path,
        load_package,
        record_answer,
        setup_message_path,
        update_package,
    )
    from ..privacy.protocol import HTTPTransport, encode_message

    client, meta = load_package(_model_class(args.model), args.model)
    if meta["stage"] in ("encrypted", "uploading"):
        raise ValueError(f"{args.model} is not uploaded yet (stage {meta['stage']!r}): run "
                         f"'cipherforest client upload --model {args.model} --server URL' "
                         "first")
    url = _server_url(args, parser, meta)
    progress = TransportProgress()
    transport = HTTPTransport(url, _server_key(args), timeout=args.timeout, progress=progress,
                              session=meta["transport"])
    client.set_params(server=url, timeout=args.timeout, verbose=int(args.verbose))
    client.server_ = transport
    setup = decode_message(_read_bytes(setup_message_path(args.model)), "setup")
    # A client that stopped during the rounds left its answers: replay them and continue.
    answered = [decode_message(_read_bytes(answer_path(args.model, i)), "answer")
                for i in range(1, meta["answers_recorded"] + 1)
                ] if meta["stage"] == "training" else []
    if meta["stage"] == "training":
        print(f"continuing the rounds of session {transport.session_id} after "
              f"{len(answered)} recorded answers", file=sys.stderr)
    else:
        update_package(args.model, stage="training", transport=transport.session_info(),
                       answers_recorded=0)

    def record(answer) -> None:
        answered.append(answer)
        record_answer(args.model, len(answered), encode_message(answer))

    resumed_after = len(answered)
    try:
        client.train(setup, transport, answered=list(answered), on_answer=record)
    finally:
        progress.close()
    client.save(args.model)  # stage "trained", with the server's URL and session
    # Every query was answered once: the session's rounds are the answers recorded.
    resumed = (f" ({len(answered) - resumed_after} in this run, after {resumed_after} "
               "recorded)" if resumed_after else "")
    print(f"trained {client.n_estimators} trees in {len(answered)} rounds{resumed}; model "
          f"saved to {args.model}", file=out)
    print(format_privacy_report(client.privacy_report_), file=out)
    return client

