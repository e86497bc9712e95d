"""A private forest client saved to a private directory: trained, or staged for upload.

The directory (created 0700) holds files written atomically with mode 0600 from their
creation, none of them a pickle::

    client.npz        parameters, classes, session ids and the server session's token;
                      in a package not yet trained, the training labels (the client
                      decides and counts from them); once trained, every leaf's class
                      counts from those labels (predictions read them); for a
                      regressor, the record of its target release (what it spent,
                      for the ledger and ``privacy_report_``); once trained, the fit's
                      ``privacy_report_``, which a loaded model has again
    he_keys.bin       homomorphic parameters and keys, including the SECRET key
    gipe.npz          the GIPE state (GiniPreservingEncryptor.save_state)
    server_setup.msg  (embedded server only) the session's setup message ...
    server_state.npz  ... and its trained forest, leaf-store ciphertexts included

A client fitted against a server URL reconnects to the same session on that server (the
server keeps it on disk; its access key is not saved, the session token suffices); a client
with the embedded server gets that server back with the trained forest.

An *encrypted package* (``cipherforest client encrypt``) is the same directory before
training: the secret files above plus the public messages to upload, ::

    package/setup.msg           GIPE ciphers, forest parameters, the PUBLIC HE context
    package/labels-00000.msg    label ciphertexts (one file per labels message) ...

and ``client.npz`` records its ``stage`` — ``encrypted``, ``uploading`` (a session is open;
how many messages it has committed), ``uploaded``, ``training`` (rounds started; each answer
is written to ``rounds/answer-00001.msg``, … before it is sent), ``trained`` — so that an
interrupted upload, or a client that stopped during the rounds, continues where it stopped.
The package files are protocol messages (``encode_message`` bytes) without the session id,
which the server assigns when ``setup`` is committed; nothing secret is in them.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any

import numpy as np

from ..io import atomic_write
from .gipe import GiniPreservingEncryptor
from .he import HEError, SecretContext
from .protocol import (
    ClientSession,
    InProcessTransport,
    Message,
    PrivateForestServer,
    encode_message,
)
from .protocol.http import HTTPTransport
from .protocol.server import state_from_arrays, state_to_arrays
from .state_file import StateFileError, read_state_file, write_state_file

__all__ = ["CLIENT_FORMAT", "CLIENT_VERSION", "PACKAGE_STAGES", "answer_path",
           "label_message_path", "load_client", "load_package", "model_name", "model_stage",
           "record_answer", "save_client", "save_package", "setup_message_path",
           "update_package"]

#: Stages of a model directory, in order (``trained``: a saved fitted client).
PACKAGE_STAGES = ("encrypted", "uploading", "uploaded", "training", "trained")
_PACKAGE_DIR = "package"
_HEADER_KEYS = ("format", "format_version", "library_version")

CLIENT_FORMAT = "cipherforest-private-forest-client"
_SERVER_FORMAT = "cipherforest-private-forest-server-session"
CLIENT_VERSION = 3  # 3: CKKS leaf store one leaf per lane (server state), giant-step key
_JSON_PARAMS = (type(None), bool, int, float, str)
#: The fitted attributes a loaded model takes from its saved privacy report, and the report's
#: key each one is (a model sets only those its class has).
_REPORT_ATTRIBUTES = {"epsilon_spent_": "epsilon", "delta_spent_": "delta"}


def _write_private(path: str, data: bytes) -> None:
    atomic_write(path, lambda file: file.write(data), mode=0o600)


def save_client(client, path: str | os.PathLike[str]) -> None:
    """Write a fitted client's secret material (and embedded server state) under ``path``."""
    path = os.fspath(path)
    params, server, transport = _params(client)
    engine = client.client_session_
    meta: dict[str, Any] = {
        **_client_meta(client, params), "stage": "trained",
        "transport": (transport.session_info() if isinstance(transport, HTTPTransport)
                      else None),
    }
    report = getattr(client, "privacy_report_", None)
    if report is not None:
        meta["privacy_report"] = _report_to_json(report)
        meta["report_attributes"] = [name for name in _REPORT_ATTRIBUTES
                                     if hasattr(client, name)]
    os.makedirs(path, mode=0o700, exist_ok=True)
    _write_secrets(client, path)
    if server is None:
        embedded = transport.server
        state = embedded.export_state(client.session_)
        if state.meta["state"] != "trained":
            raise ValueError("the embedded server's session is not trained; nothing to save")
        _write_private(os.path.join(path, "server_setup.msg"),
                       embedded.setup_message(client.session_, engine.he.public_bytes()))
        state_meta, state_arrays = state_to_arrays(state)
        write_state_file(os.path.join(path, "server_state.npz"), _SERVER_FORMAT, CLIENT_VERSION,
                         {"state": json.dumps(state_meta)}, state_arrays)
    # Written last: a directory with client.npz is complete.
    table = engine.leaf_table
    write_state_file(os.path.join(path, "client.npz"), CLIENT_FORMAT, CLIENT_VERSION, meta,
                     {"classes": _classes(client),
                      **({} if table is None else table.to_arrays())})


def _params(client) -> tuple[dict, Any, Any]:
    """The client's parameters (server as its URL or None), the server and its transport."""
    params = client.get_params()
    server = params.pop("server")
    engine = getattr(client, "client_session_", None)
    transport = None if engine is None else engine.transport
    if isinstance(server, HTTPTransport):  # saved as its URL and session
        transport, server = server, server.url
    if server is not None and not isinstance(server, str):
        raise TypeError("a client with a server object cannot be saved with it; give "
                        "server=None (embedded) or a URL, or pass the server to load()")
    for name, value in params.items():
        if isinstance(value, (tuple, list)) and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            params[name] = [float(v) for v in value]  # e.g. a regressor's target_bounds
        elif not isinstance(value, _JSON_PARAMS):
            raise TypeError(f"parameter {name}={value!r} cannot be saved (only None, bool, "
                            "int, float and str parameters and lists of numbers can)")
    params["server"] = server
    return params, server, transport


def _client_meta(client, params: dict) -> dict[str, Any]:
    engine = client.client_session_
    return {"model": type(client).__name__, "params": params,
            "session": getattr(client, "session_", None),
            "release_digest": engine.release_digest,
            "release": _release_record(engine),
            "n_classes": engine.n_classes, "n_draws": engine.n_draws,
            "n_features_in": int(client.n_features_in_),
            "feature_names_in": _feature_names(client),
            "rows_per_pack": int(engine.layout.rows_per_pack)}


def _release_record(engine) -> dict | None:
    """A regression engine's ``release`` (what its target release spent, for the ledger
    and ``privacy_report_``) as JSON; None for an engine without one."""
    release = getattr(engine, "release", None)
    if not release:
        return None
    return {name: ([float(v) for v in value] if isinstance(value, tuple) else _report_to_json(
        value.item() if isinstance(value, np.generic) else value))  # "paper": ε = ∞
            for name, value in release.items()}


def _report_to_json(value):
    """A privacy report (dicts with string keys, lists, tuples, numbers, strings, None) as
    JSON, tagged as model files tag them: a tuple ``{"$tuple": [...]}``, an infinite or NaN
    float ``{"$float": "inf"}`` (a report of the paper's selection spends ε = ∞)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        value = float(value)
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, list | tuple):
        items = [_report_to_json(item) for item in value]
        return {"$tuple": items} if isinstance(value, tuple) else items
    if isinstance(value, dict) and all(isinstance(key, str) and not key.startswith("$")
                                       for key in value):
        return {key: _report_to_json(item) for key, item in value.items()}
    raise TypeError(f"a privacy report holds {value!r}, which cannot be saved")


def _report_from_json(value):
    """The report :func:`_report_to_json` wrote; ValueError if ``value`` is not one."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_report_from_json(item) for item in value]
    if not isinstance(value, dict):
        raise ValueError(f"unexpected value {value!r}")
    if "$float" in value:
        if len(value) != 1 or value["$float"] not in ("inf", "-inf", "nan"):
            raise ValueError(f"unexpected float {value!r}")
        return float(value["$float"])
    if "$tuple" in value:
        if len(value) != 1 or not isinstance(value["$tuple"], list):
            raise ValueError(f"unexpected tuple {value!r}")
        return tuple(_report_from_json(item) for item in value["$tuple"])
    return {key: _report_from_json(item) for key, item in value.items()}


def _restore_report(client, path: str, meta: dict) -> None:
    """Give a loaded model the privacy report saved with it, and the attributes taken from
    it; a model saved before reports were kept gets none."""
    if meta.get("privacy_report") is None:
        return
    try:
        report = _report_from_json(meta["privacy_report"])
        names = meta.get("report_attributes", [])
        if not isinstance(report, dict) or not isinstance(report.get("epsilon"), float):
            raise ValueError("not a mapping with a float epsilon")
        if not isinstance(names, list) or not set(names) <= set(_REPORT_ATTRIBUTES):
            raise ValueError(f"unknown attributes {names!r}")
        values = {name: report[_REPORT_ATTRIBUTES[name]] for name in names}
    except (KeyError, ValueError) as exc:
        raise StateFileError(f"{path}: client.npz: malformed privacy report ({exc})") from None
    client.privacy_report_ = report
    for name, value in values.items():
        setattr(client, name, value)


def _feature_names(client) -> list[str] | None:
    """``feature_names_in_`` as a JSON list (None when fitted on an array without names)."""
    names = getattr(client, "feature_names_in_", None)
    return None if names is None else [str(name) for name in names]


def _classes(client) -> np.ndarray:
    """The classifier's classes (none for a regressor)."""
    classes = np.asarray(getattr(client, "classes_", np.zeros(0)))
    return classes.astype(str) if classes.dtype.hasobject else classes


def _write_secrets(client, path: str) -> None:
    _write_private(os.path.join(path, "he_keys.bin"), client.client_session_.he.secret_bytes())
    client.encryptor_.save_state(os.path.join(path, "gipe.npz"))


def setup_message_path(path: str | os.PathLike[str]) -> str:
    """The package's ``setup`` message file."""
    return os.path.join(os.fspath(path), _PACKAGE_DIR, "setup.msg")


def label_message_path(path: str | os.PathLike[str], index: int) -> str:
    """The package's ``index``-th ``labels`` message file."""
    return os.path.join(os.fspath(path), _PACKAGE_DIR, f"labels-{index:05d}.msg")


def answer_path(path: str | os.PathLike[str], index: int) -> str:
    """The ``index``-th (from 1) recorded answer of the rounds."""
    return os.path.join(os.fspath(path), "rounds", f"answer-{index:05d}.msg")


def record_answer(path: str | os.PathLike[str], index: int, data: bytes) -> None:
    """Write the ``index``-th answer (0600), then count it in ``client.npz``: an answer
    counted there is on disk, and none is sent before it is counted."""
    os.makedirs(os.path.join(os.fspath(path), "rounds"), mode=0o700, exist_ok=True)
    _write_private(answer_path(path, index), data)
    update_package(path, answers_recorded=index)


def save_package(client, path: str | os.PathLike[str], setup: Message,
                 labels: Iterable[Message], *, force: bool = False) -> int:
    """Write an encrypted, not yet uploaded client to the directory ``path`` (0700).

    The secret files as :func:`save_client` writes them, the public ``setup`` and ``labels``
    messages under ``package/``, and ``client.npz`` (stage ``encrypted``) last. A ``path``
    that exists and is not empty is refused unless ``force``, which first deletes the model
    files found there (``client.npz`` first, so an interrupted overwrite is never taken for
    a complete model). Returns the number of labels messages.

    Raises
    ------
    FileExistsError
        ``path`` is a file, or a non-empty directory and ``force`` is False.
    """
    path = os.fspath(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise FileExistsError(f"{path} exists and is not a directory")
    if os.path.isdir(path) and os.listdir(path):
        if not force:
            what = ("holds another model" if os.path.exists(os.path.join(path, "client.npz"))
                    else "is not empty")
            raise FileExistsError(f"{path} {what}: choose another directory, or --force to "
                                  "replace the model files in it")
        _remove_model_files(path)
    params, _, _ = _params(client)
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)  # it holds the secret key, whoever created it
    os.makedirs(os.path.join(path, _PACKAGE_DIR), mode=0o700, exist_ok=True)
    _write_secrets(client, path)
    _write_private(setup_message_path(path), encode_message(setup))
    n_messages = 0
    for message in labels:
        _write_private(label_message_path(path, n_messages), encode_message(message))
        n_messages += 1
    meta = {**_client_meta(client, params), "stage": "encrypted", "transport": None,
            "n_label_messages": n_messages, "setup_committed": False,
            "label_messages_committed": 0, "answers_recorded": 0}
    engine = client.client_session_
    write_state_file(os.path.join(path, "client.npz"), CLIENT_FORMAT, CLIENT_VERSION, meta,
                     {"classes": _classes(client), "labels": engine.labels,
                      **({} if engine.row_keys is None else {"row_keys": engine.row_keys})})
    return n_messages


def _remove_model_files(path: str) -> None:
    names = ["client.npz", "he_keys.bin", "gipe.npz", "server_setup.msg", "server_state.npz"]
    for name in names:
        if os.path.lexists(os.path.join(path, name)):
            os.unlink(os.path.join(path, name))
    for folder, prefixes in ((_PACKAGE_DIR, ("setup.msg", "labels-")),
                             ("rounds", ("answer-",))):
        folder = os.path.join(path, folder)
        if os.path.isdir(folder):
            for name in os.listdir(folder):
                if name.startswith(prefixes) and name.endswith(".msg"):
                    os.unlink(os.path.join(folder, name))


def load_package(cls, path: str | os.PathLike[str]):
    """``(client, meta)`` of a model directory at any stage before ``trained``: the client
    with its keys, GIPE state, classes and (once ``setup`` is committed) session id; ``meta``
    the directory's record (``stage``, ``transport``, ``n_label_messages``,
    ``setup_committed``, ``label_messages_committed``)."""
    path = os.fspath(path)
    meta, arrays = read_state_file(os.path.join(path, "client.npz"), CLIENT_FORMAT, CLIENT_VERSION)
    stage = meta.get("stage", "trained")
    if stage == "trained":
        raise ValueError(f"{path} holds a trained model, not a package to upload or train "
                         "(predict with it, or encrypt the data again into a new directory)")
    client = _client_from_meta(cls, path, meta, arrays, dict(meta["params"]))
    return client, meta


def update_package(path: str | os.PathLike[str], client=None, **changes) -> dict:
    """Rewrite ``client.npz`` of a package with ``changes`` to its record (atomically);
    with ``client``, also its parameters and session id. Returns the new record."""
    path = os.fspath(path)
    file = os.path.join(path, "client.npz")
    meta, arrays = read_state_file(file, CLIENT_FORMAT, CLIENT_VERSION)
    meta = {k: v for k, v in meta.items() if k not in _HEADER_KEYS}
    if client is not None:
        meta["params"] = {**client.get_params(), "server": meta["params"]["server"]}
        meta["session"] = getattr(client, "session_", None)
    meta.update(changes)
    if meta["stage"] not in PACKAGE_STAGES:
        raise ValueError(f"unknown stage {meta['stage']!r}")
    write_state_file(file, CLIENT_FORMAT, CLIENT_VERSION, meta, arrays)
    return meta


def load_client(cls, path: str | os.PathLike[str], server=None, server_key=None):
    """A client of class ``cls`` as :func:`save_client` left it."""
    path = os.fspath(path)
    meta, arrays = read_state_file(os.path.join(path, "client.npz"), CLIENT_FORMAT, CLIENT_VERSION)
    stage = meta.get("stage", "trained")
    if stage != "trained":
        raise ValueError(f"{path} holds an encrypted package at stage {stage!r}, not a trained "
                         "model: run 'cipherforest client upload' and 'cipherforest client "
                         "train' on it first")
    params = dict(meta["params"])
    if server is not None:
        params["server"] = server
    if server_key is not None:
        params["server_key"] = server_key
    client = _client_from_meta(cls, path, meta, arrays, params)
    _restore_report(client, path, meta)
    target = params["server"]
    engine = client.client_session_
    if isinstance(target, str):
        info = meta["transport"] or {}
        engine.transport = client.server_ = HTTPTransport(
            target, client.server_key, timeout=client.timeout, session=info)
    elif target is None:
        with open(os.path.join(path, "server_setup.msg"), "rb") as file:
            setup = file.read()
        state_meta, state_arrays = read_state_file(os.path.join(path, "server_state.npz"),
                                                   _SERVER_FORMAT, CLIENT_VERSION)
        state = state_from_arrays(json.loads(state_meta["state"]), state_arrays)
        client.server_ = PrivateForestServer(n_jobs=client.n_jobs)
        client.server_.restore_session(client.session_, [setup], state)
        engine.transport = InProcessTransport(client.server_)
    else:
        engine.transport = client.server_ = target
    return client


def _client_from_meta(cls, path: str, meta: dict, arrays: dict, params: dict):
    """A client with the parameters, classes, keys and GIPE state of a model directory
    (its engine of class ``cls.engine_type``, by default :class:`ClientSession`)."""
    engine_type = getattr(cls, "engine_type", ClientSession)
    client = cls(**params)
    if arrays["classes"].size:  # a regressor has none
        client.classes_ = arrays["classes"]
    client.n_features_in_ = int(meta["n_features_in"])
    names = meta.get("feature_names_in")  # absent from files of earlier versions
    if names is not None:
        if len(names) != client.n_features_in_:
            raise ValueError(f"{len(names)} feature names for {client.n_features_in_} "
                             "features in the saved client")
        client.feature_names_in_ = np.asarray(names, dtype=object)
    session = None if meta["session"] is None else str(meta["session"])
    if session is not None:
        client.session_ = session
    with open(os.path.join(path, "he_keys.bin"), "rb") as file:
        try:
            he = SecretContext.from_secret_bytes(file.read())
        except HEError as exc:
            raise StateFileError(f"{path}: he_keys.bin: {exc}") from None
    scheme = getattr(client, "scheme", "ckks")  # a regressor's session is always CKKS
    if he.scheme != scheme:
        raise StateFileError(f"{path}: he_keys.bin holds {he.scheme} keys, the client "
                             f"was fitted with {scheme}")
    client.encryptor_ = GiniPreservingEncryptor.load_state(os.path.join(path, "gipe.npz"))
    try:
        table = engine_type.leaf_table_type.from_arrays(arrays)
    except ValueError as exc:
        raise StateFileError(f"{path}: client.npz: {exc}") from None
    client.client_session_ = engine_type(client.get_params()).restore(
        arrays["classes"], client.encryptor_, he, int(meta["n_draws"]),
        int(meta["rows_per_pack"]), session, arrays.get("labels"), table,
        arrays.get("row_keys"), meta.get("release_digest"))
    release = meta.get("release")
    if release is not None:
        if not isinstance(release, dict):
            raise StateFileError(f"{path}: client.npz: the release record is not a mapping")
        client.client_session_.release = {
            name: tuple(value) if name == "bounds" and value is not None
            else _report_from_json(value) for name, value in release.items()}
    return client


def model_name(path: str | os.PathLike[str]) -> str:
    """The estimator class a model directory was saved from (``PrivateForestClient`` for
    directories that do not record it)."""
    meta, _ = read_state_file(os.path.join(os.fspath(path), "client.npz"), CLIENT_FORMAT,
                              CLIENT_VERSION)
    return str(meta.get("model", "PrivateForestClient"))


def model_stage(path: str | os.PathLike[str]) -> str:
    """The stage recorded in a model directory's ``client.npz`` (see
    :data:`PACKAGE_STAGES`; a directory saved by :func:`save_client` is ``trained``)."""
    meta, _ = read_state_file(os.path.join(os.fspath(path), "client.npz"), CLIENT_FORMAT,
                              CLIENT_VERSION)
    return str(meta.get("stage", "trained"))
