"""Export and restore of a server session's training state (Sans-IO, no files, no network).

A relay hands every message to a server; after each training round it exports the session's
state, builds a *new* server from the uploaded messages plus that state (which must export
the very same state: trees, open nodes, leaves, round, query token), and sends the next
message there. The forest grown across these restarts must predict exactly as
RandomForestClassifier on the client's GIPE ciphers with clear labels.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_wine

from _helpers.service import forest_on_ciphers_proba
from cipherforest.privacy import PrivateForestClient, PrivateForestServer, ProtocolError
from cipherforest.privacy.protocol import SessionState, decode_message


class RestartingRelay:
    """A server that is replaced by a restored copy after every training round."""

    def __init__(self):
        self.server = PrivateForestServer()
        self.uploads: list[bytes] = []
        self.session: str | None = None
        self.restarts = 0
        self.stores: dict = {}

    def handle(self, data: bytes) -> bytes:
        kind = decode_message(data).kind
        reply = self.server.handle(data)
        if kind == "setup":
            self.session = decode_message(reply).value("session", str)
        if kind in ("setup", "labels"):
            self.uploads.append(data)
        if kind in ("train", "answer"):
            state = self.server.export_state(self.session, skip_stores=set(self.stores))
            assert not set(state.stores) & set(self.stores)  # only new stores were exported
            self.stores.update(state.stores)
            state = SessionState(state.meta, {k: v.copy() for k, v in state.arrays.items()},
                                 dict(self.stores))
            self.server = PrivateForestServer()
            self.server.restore_session(self.session, self.uploads, state)
            _assert_same_state(self.server.export_state(self.session), state)
            self.restarts += 1
        return reply


def _assert_same_state(restored: SessionState, saved: SessionState) -> None:
    """A restored session exports exactly the state it was restored from."""
    assert restored.meta == saved.meta
    assert restored.arrays.keys() == saved.arrays.keys()
    for name, array in saved.arrays.items():
        np.testing.assert_array_equal(restored.arrays[name], array, err_msg=name)
    assert restored.stores == saved.stores


@pytest.fixture(scope="module")
def wine_small():
    X, y = load_wine(return_X_y=True)
    rng = np.random.RandomState(0)
    idx = rng.permutation(X.shape[0])
    return X[idx[:50]], y[idx[:50]], X[idx[50:]]


@pytest.mark.parametrize("params", [
    {"scheme": "bfv"},
    {"scheme": "ckks", "max_round_bytes": 1 << 18},  # byte-capped rounds: one tree at a time
])
def test_restarts_after_every_round_give_the_same_forest(wine_small, params):
    X, y, X_test = wine_small
    kwargs = {"n_estimators": 3, "max_depth": 3, "random_state": 3, "split_selection": "gini",
              **params}
    relay = RestartingRelay()
    restarted = PrivateForestClient(server=relay, **kwargs).fit(X, y)
    assert relay.restarts == restarted.fit_stats_.rounds + 1 >= 4
    # Pure nodes get a random candidate (hidden leaf decisions), so trees may differ below
    # them between runs; the predictions may not.
    np.testing.assert_allclose(restarted.predict_proba(X_test),
                               forest_on_ciphers_proba(restarted, X, y, X_test, kwargs), atol=1e-5)
    progress = relay.server.session_progress(restarted.session_)
    assert progress["state"] == "trained" and progress["open_nodes"] == 0


def test_restore_rejects_a_state_of_another_forest(wine_small):
    X, y, _ = wine_small
    relay = RestartingRelay()
    PrivateForestClient(n_estimators=2, max_depth=2, random_state=0, scheme="bfv",
                        prediction_reply="leaves",  # a session with a leaf store
                        server=relay).fit(X, y)
    state = relay.server.export_state(relay.session)
    state.meta["n_trees"] = 5
    server = PrivateForestServer()
    with pytest.raises(ProtocolError, match="does not belong"):
        server.restore_session(relay.session, relay.uploads, state)
    assert not server.has_session(relay.session)  # nothing half-restored is left behind
    state = relay.server.export_state(relay.session)
    with pytest.raises(ProtocolError, match="has no ciphertext"):
        server.restore_session(relay.session, relay.uploads,
                        SessionState(state.meta, state.arrays, {}))
