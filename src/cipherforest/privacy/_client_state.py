"""Saving a fitted :class:`~cipherforest.privacy.PrivateForestClient` to a private directory.

The directory (created 0700) holds files written atomically with mode 0600 from their
creation, none of them a pickle::

    client.npz        parameters, classes, session ids and the server session's token
    he_keys.bin       homomorphic parameters and keys, including the SECRET key
    gipe.npz          the GIPE state (GiniPreservingEncryptor.save_state)
    server_setup.msg  (embedded server only) the session's setup message ...
    server_state.npz  ... and its trained forest, leaf-store ciphertexts included

A client fitted against a server URL reconnects to the same session on that server (the
server keeps it on disk; its access key is not saved, the session token suffices); a client
with the embedded server gets that server back with the trained forest.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ..io import atomic_write
from ._blocks import BlockLayout
from ._session_state import (
    embedded_setup,
    export_session_state,
    restore_session,
    state_from_arrays,
    state_to_arrays,
)
from ._state_file import StateFileError, read_state_file, write_state_file
from .gipe import GiniPreservingEncryptor
from .he import HEError, SecretContext

__all__ = ["load_client", "save_client"]

_FORMAT = "cipherforest-private-forest-client"
_SERVER_FORMAT = "cipherforest-private-forest-server-session"
_VERSION = 2
_JSON_PARAMS = (type(None), bool, int, float, str)


def _write_private(path: str, data: bytes) -> None:
    atomic_write(path, lambda file: file.write(data), mode=0o600)


def save_client(client, path: str | os.PathLike[str]) -> None:
    """Write a fitted client's secret material (and embedded server state) under ``path``."""
    from ..service.transport import HTTPTransport

    path = os.fspath(path)
    params = client.get_params()
    server = params.pop("server")
    transport = getattr(client, "server_", None)
    if isinstance(server, HTTPTransport):  # saved as its URL and session
        transport, server = server, server.url
    if server is not None and not isinstance(server, str):
        raise TypeError("a client with a server object cannot be saved with it; give "
                        "server=None (embedded) or a URL, or pass the server to load()")
    for name, value in params.items():
        if not isinstance(value, _JSON_PARAMS):
            raise TypeError(f"parameter {name}={value!r} cannot be saved (only None, bool, "
                            "int, float and str parameters can)")
    params["server"] = server
    meta: dict[str, Any] = {
        "params": params, "session": client.session_, "n_classes": client._n_classes,
        "n_draws": client._n_draws, "n_features_in": int(client.n_features_in_),
        "rows_per_pack": int(client._layout.rows_per_pack),
        "transport": (transport.session_info() if isinstance(transport, HTTPTransport)
                      else None),
    }
    classes = np.asarray(client.classes_)
    if classes.dtype.hasobject:
        classes = classes.astype(str)
    os.makedirs(path, mode=0o700, exist_ok=True)
    _write_private(os.path.join(path, "he_keys.bin"), client._he.secret_bytes())
    client.encryptor_.save_state(os.path.join(path, "gipe.npz"))
    if server is None:
        state = export_session_state(transport, client.session_)
        if state.meta["state"] != "trained":
            raise ValueError("the embedded server's session is not trained; nothing to save")
        _write_private(os.path.join(path, "server_setup.msg"),
                       embedded_setup(transport, client.session_, client._he.public_bytes()))
        state_meta, state_arrays = state_to_arrays(state)
        write_state_file(os.path.join(path, "server_state.npz"), _SERVER_FORMAT, _VERSION,
                         {"state": json.dumps(state_meta)}, state_arrays)
    # Written last: a directory with client.npz is complete.
    write_state_file(os.path.join(path, "client.npz"), _FORMAT, _VERSION, meta,
                     {"classes": classes})


def load_client(cls, path: str | os.PathLike[str], server=None, server_key=None):
    """A client of class ``cls`` as :func:`save_client` left it."""
    from ..service.transport import HTTPTransport
    from .server import PrivateForestServer

    path = os.fspath(path)
    meta, arrays = read_state_file(os.path.join(path, "client.npz"), _FORMAT, _VERSION)
    params = dict(meta["params"])
    if server is not None:
        params["server"] = server
    if server_key is not None:
        params["server_key"] = server_key
    client = cls(**params)
    client.classes_ = arrays["classes"]
    client.n_features_in_ = int(meta["n_features_in"])
    client.session_ = str(meta["session"])
    client._n_classes = int(meta["n_classes"])
    client._n_draws = int(meta["n_draws"])
    rows_per_pack = int(meta["rows_per_pack"])
    client._layout = BlockLayout(client.scheme, SecretContext.slot_count(client.scheme),
                                 client._n_classes, rows_per_pack, rows_per_pack)
    with open(os.path.join(path, "he_keys.bin"), "rb") as file:
        try:
            client._he = SecretContext.from_secret_bytes(file.read())
        except HEError as exc:
            raise StateFileError(f"{path}: he_keys.bin: {exc}") from None
    if client._he.scheme != client.scheme:
        raise StateFileError(f"{path}: he_keys.bin holds {client._he.scheme} keys, the client "
                             f"was fitted with {client.scheme}")
    client.encryptor_ = GiniPreservingEncryptor.load_state(os.path.join(path, "gipe.npz"))
    target = params["server"]
    if isinstance(target, str):
        info = meta["transport"] or {}
        client.server_ = HTTPTransport(target, client.server_key, timeout=client.timeout,
                                       session=info)
    elif target is None:
        with open(os.path.join(path, "server_setup.msg"), "rb") as file:
            setup = file.read()
        state_meta, state_arrays = read_state_file(os.path.join(path, "server_state.npz"),
                                                   _SERVER_FORMAT, _VERSION)
        state = state_from_arrays(json.loads(state_meta["state"]), state_arrays)
        client.server_ = PrivateForestServer(n_jobs=client.n_jobs)
        restore_session(client.server_, client.session_, [setup], state)
    return client
