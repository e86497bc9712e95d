"""Selective failure at prediction: a doctored leaf turns a predict call into a label question.

The adversary is the server after training. It keeps the training label ciphertexts (an
honest server forgets them) and, before answering a predict call, adds α·(e_yi − e_yj) —
computed from rows ``i`` and ``j``'s label ciphertexts, α larger than any leaf count — to the
leaf the first test row reaches in tree 0. The leaf's counts are unchanged when the two rows
share a label and turn negative otherwise, so a client that decrypts the leaf store and
checks what it reads (the paper's replies, ``prediction_reply="sums"`` or ``"leaves"``: the
positive control) fails exactly when the labels differ: one label bit per call, read from
whether the client fails (stops, retries).

By default (``prediction_reply="ids"``) the client asks only for the leaves the rows reach
and reads its own leaf counts: nothing it uses comes from the leaf store, the doctoring has no
effect (in ``"rr"`` and ``"blind"`` the server does not even get label ciphertexts to mix),
and the attacker's reading is a constant guess.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..protocol import ProtocolError, decode_message

__all__ = ["PredictionOracleResult", "PredictionOracleServer", "prediction_oracle_attack"]


@dataclass(frozen=True)
class PredictionOracleResult:
    """Outcome of :func:`prediction_oracle_attack`.

    Attributes
    ----------
    accuracy : float
        Fraction of probed pairs whose "same label?" the attacker read right.
    baseline : float
        The better constant guess on the probed pairs.
    n_probed : int
        Predict calls doctored (one pair each).
    failures : int
        Predict calls the client failed.
    """

    accuracy: float
    baseline: float
    n_probed: int
    failures: int


class PredictionOracleServer:
    """A real server that keeps the label ciphertexts and doctors one leaf per predict call.

    Parameters
    ----------
    server : PrivateForestServer
    pairs : list of (int, int)
        Training rows ``(i, j)`` asked about, one pair per predict call.
    """

    def __init__(self, server, pairs: list[tuple[int, int]]):
        self.server = server
        self.pairs = list(pairs)
        self.asked = 0

    def handle(self, data: bytes) -> bytes:
        message = decode_message(data)
        if message.kind == "train":
            session = self.server.session(message.meta["session"])
            session.labels.clear = lambda: None  # keep the label rotations after training
        if message.kind != "predict" or self.asked >= len(self.pairs):
            return self.server.handle(data)
        session = self.server.session(message.meta["session"])
        if not session.label_ciphertexts:  # rr/blind with leaf ids: nothing to mix in
            self.asked += 1
            return self.server.handle(data)
        tree = session.trees[0]
        node = int(tree.apply(message.arrays["X"][:1])[0])
        index, position = divmod(int(tree.leaves[node]), session.layout.leaves_per_ciphertext)
        original = session.leaf_store[index]
        i, j = self.pairs[self.asked]
        self.asked += 1
        session.leaf_store[index] = _doctored(session, original, position, i, j)
        try:
            return self.server.handle(data)
        finally:
            session.leaf_store[index] = original


def _doctored(session, store_ct, position: int, i: int, j: int):
    """``store_ct`` plus α·(e_yi − e_yj) in leaf ``position``'s slots, α = 2^10 draws."""
    from ..protocol.server.labels import DrawSums, add_into, join_parts

    context, layout = session.context, session.layout
    ckks = context.kind.approximate
    alpha = float(2 ** 10)
    scale = 2.0 ** 48 * context.scale / context.label_scale if ckks else None
    lane = layout.lane_position(layout.leaf_lane(position))
    parts: list = [None] * layout.parts
    for row, sign in ((i, 1.0), (j, -1.0)):
        sums = DrawSums(context, layout.parts, pairs=False)
        sums.add_rows(session.label_copy, np.array([row]), np.array([1]), lane)
        for part, total in enumerate(sums.totals()):
            if total is None:
                continue
            mask = layout.leaf_mask(position, part) * sign * alpha  # BFV: signed integers
            product = context.multiply_mask(total, context.encode_mask(mask, scale=scale))
            add_into(context, parts, part, product)
    extra = context.finish_leaf_store(join_parts(context, layout, parts))
    out = context.copy(store_ct)
    context.add_inplace(out, extra)
    return out


def prediction_oracle_attack(client, X_train, y_train, X_test, n_pairs: int = 10,
                             seed: int = 0) -> PredictionOracleResult:
    """Fit ``client`` against a :class:`PredictionOracleServer`, call ``predict`` once per
    pair of random training rows, and score the attacker's reading (a failed call:
    "different labels")."""
    y = np.asarray(y_train)
    rng = np.random.default_rng(seed)
    pairs = [tuple(int(r) for r in rng.choice(y.shape[0], 2, replace=False))
             for _ in range(n_pairs)]
    server = PredictionOracleServer(_real_server(), pairs)
    client.set_params(server=server).fit(X_train, y)
    guesses, failures = [], 0
    for _ in pairs:
        try:
            client.predict(X_test)
        except ProtocolError:
            failures += 1
            guesses.append(False)
        else:
            guesses.append(True)
    truth = np.array([y[i] == y[j] for i, j in pairs])
    guess = np.array(guesses)
    return PredictionOracleResult(float(np.mean(guess == truth)),
                                  float(max(truth.mean(), 1 - truth.mean())), len(pairs),
                                  failures)


def _real_server():
    from ..protocol import PrivateForestServer

    return PrivateForestServer()
