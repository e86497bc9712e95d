"""Pair-oracle attack: a malicious server asks crafted two-row "nodes".

The adversary is the server itself: it holds the session (cipher matrix, label ciphertexts,
packing) and deviates from the protocol for one round, asking nodes ``{reference, i}`` and
reading the client's "leaf" as "same label". Positive control: the crafted query decrypted
with the client's key and decided by the paper's rule without the plan check reads 100 % of
the answers (``tests/privacy/attacks/test_attacks.py``). The client replays the server's
label-free plan and refuses the query, so against
:class:`~cipherforest.privacy.PrivateForestClient` the attack ends with a ``ProtocolError``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..protocol import Message, ProtocolError, decode_message, encode_message

__all__ = ["PairOracleResult", "PairOracleServer", "packed_blocks", "pair_oracle_attack"]


def packed_blocks(session, plans: list, shift: int) -> tuple[list[bytes], list[int]]:
    """The real server's packing (what a malicious server would run) of node plans of its
    own making over the session's label ciphertexts: every row weighs 1, and a plan's row
    orders may repeat rows. Returns the query ciphertexts and each block's position."""
    from ..protocol.server.level import level_part

    ones = np.ones(session.X.shape[0], dtype=np.int64)
    unit = SimpleNamespace(context=session.context, layout=session.layout,
                           label_copy=session.label_copy, spec=session.spec,
                           n_classes=session.n_classes,
                           growth=SimpleNamespace(weights=lambda t: ones))
    _, blobs, positions = level_part(unit, [], plans, shift, serialize=False)
    return blobs, positions


@dataclass(frozen=True)
class PairOracleResult:
    """Outcome of the pair-oracle attack.

    Attributes
    ----------
    refused : bool
        The client refused the crafted query (raised ``ProtocolError``).
    success : float
        Fraction of probed rows whose "same label as the reference row?" the attack answered
        right (``nan`` when refused).
    baseline : float
        The better constant answer ("all same" or "all different") on the probed rows.
    n_probed : int
    error : str
        The client's error message when it refused.
    """

    refused: bool
    success: float
    baseline: float
    n_probed: int
    error: str = ""


class PairOracleServer:
    """A malicious server: one crafted round of two-row nodes ``{reference, i}``.

    It forwards ``setup`` and ``labels`` to the real server. When the client asks to
    ``train`` it answers, instead of the real first query, a query of fake nodes: node ``i``
    of tree 0 holds the reference row and row ``i`` (weight 1 each) and one candidate that
    separates them on a feature where their ciphers differ. The packed class counts are
    computed homomorphically from the client's own label ciphertexts, so they decrypt
    correctly: a node is pure exactly when the two labels are equal, and under the paper's
    rule the client answers "leaf" (-1) exactly then. The real first query (the real server
    got the ``train`` message) is held back and sent after the answer; the real protocol
    then runs on and the client's ``fit`` returns normally.

    Parameters
    ----------
    server : PrivateForestServer
        The real server (its session state is read, as a server would).
    reference_row : int, default=0

    Attributes
    ----------
    crafted_query : Message or None
        The fake query, once sent (node ids are the probed rows).
    same_as_reference : dict[int, bool]
        After the crafted round: row -> the client's answer read as "same label".

    Notes
    -----
    :class:`~cipherforest.privacy.PrivateForestClient` replays the server's label-free plan
    and refuses this query (its nodes are not the forest's): the attack then ends with the
    client's ``ProtocolError``.
    """

    def __init__(self, server, reference_row: int = 0):
        self.server = server
        self.reference_row = reference_row
        self.same_as_reference: dict[int, bool] = {}
        self.crafted_query: Message | None = None
        self._held_reply: bytes | None = None
        self._token = ""
        self._session_id = ""

    def handle(self, data: bytes) -> bytes:
        message = decode_message(data)
        if message.kind == "train" and self._held_reply is None:
            self._session_id = message.meta["session"]
            # Crafted first, from the label ciphertexts (a server that trains without
            # rounds drops them once trained); the real first reply is held back.
            self.crafted_query = self._crafted_query()
            self._held_reply = self.server.handle(data)
            return encode_message(self.crafted_query)
        if (message.kind == "answer" and self._token
                and message.meta.get("token") == self._token):
            choice = message.arrays["choice"]
            for row, c in zip(message.arrays["node"].tolist(), choice.tolist(), strict=True):
                self.same_as_reference[row] = c < 0
            self._token = ""
            return self._held_reply
        return self.server.handle(data)

    def _crafted_query(self) -> Message:
        from ..protocol.planner import Candidate, NodePlan, OpenNode, midpoint

        session = self.server.session(self._session_id)
        X = session.X
        n = X.shape[0]
        ref = self.reference_row
        plans = []
        for i in range(n):
            differs = np.flatnonzero(X[ref] != X[i])
            if i == ref or differs.shape[0] == 0:
                continue
            f = int(differs[0])
            low, high = (ref, i) if X[ref, f] < X[i, f] else (i, ref)
            pair = np.array([low, high])
            candidate = Candidate(f, float(X[low, f]),
                                  midpoint(float(X[low, f]), float(X[high, f])), 1, 1)
            plans.append(NodePlan(0, OpenNode(i, np.sort(pair), 0, 0), 2, [pair],
                                  [[candidate]]))
        # A session without label ciphertexts (rr/blind with leaf ids) has nothing to pack:
        # the crafted nodes go out with empty counts.
        blobs, positions = (packed_blocks(session, plans, 0) if session.label_ciphertexts
                            else ([], [0] * sum(p.n_candidates + 1 for p in plans)))
        self._token = secrets.token_hex(8)
        meta = {"session": self._session_id, "round": 1, "token": self._token, "shift": 0,
                "block_size": session.block_size,
                "blocks_per_ciphertext": session.blocks_per_ciphertext}
        k = len(plans)
        arrays = {"tree": np.zeros(k, dtype=np.int64),
                  "node": np.array([p.node.node_id for p in plans], dtype=np.int64),
                  "weight": np.full(k, 2, dtype=np.int64),
                  "tree_weight": np.full(k, 2, dtype=np.int64),
                  "n_candidates": np.ones(k, dtype=np.int64),
                  "left_weight": np.ones(k, dtype=np.int64),
                  "block_position": np.asarray(positions, dtype=np.int64)}
        return Message("query", meta, arrays, {"counts": blobs})


def pair_oracle_attack(client, X, y, reference_row: int = 0) -> PairOracleResult:
    """Fit a clone of ``client`` against a :class:`PairOracleServer` and score its answers.

    ``y`` is given to the client (it is the data owner's fit); the attacker's guesses are
    the client's answers, scored against ``y[i] == y[reference_row]``.
    """
    from sklearn.base import clone

    from ..protocol import PrivateForestServer

    oracle = PairOracleServer(PrivateForestServer(), reference_row)
    y = np.asarray(y)
    try:
        clone(client).set_params(server=oracle).fit(X, y)
    except ProtocolError as exc:
        truth = np.delete(y == y[reference_row], reference_row)
        return PairOracleResult(True, float("nan"), max(truth.mean(), 1 - truth.mean()), 0,
                                str(exc))
    rows = np.array(sorted(oracle.same_as_reference), dtype=np.int64)
    guess = np.array([oracle.same_as_reference[r] for r in rows.tolist()])
    truth = y[rows] == y[reference_row]
    return PairOracleResult(False, float(np.mean(guess == truth)),
                            float(max(truth.mean(), 1 - truth.mean())), int(rows.shape[0]))
