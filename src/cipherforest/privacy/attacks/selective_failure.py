"""Selective failure in training: a malicious server reads labels from the client's refusals.

The adversary is the server. Every plan field of its queries is honest, and so are the
counts of every node but one per round: in that node's running sums it puts a *target* row
where a *reference* row of known label stands (every copy of it, in every feature order).
The node's decrypted class counts are then exactly right when the two rows share a label and
wrong otherwise. A client that refuses a round whose counts are not its own (the paper's
flow, ``decide_from="server"``) answers exactly when the labels agree: one label bit per
round until the first refusal, one more per retried fit.

The defended client (``decide_from="own"``, the default) decides from its own counts in
plan-only rounds: it uploads no label ciphertext and the queries carry no count, so there is
no row to swap; the attack ends after one fit with nothing probed. (A client that still
received counts would decide from its own and only report a difference after the fit, one bit
per model at most.) :func:`selective_failure_attack` runs the
attack against a client, retrying failed fits; the positive control is the paper's flow
(``tests/privacy/attacks/test_attacks.py``, ``benchmarks/privacy_attacks.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..protocol import Message, ProtocolError, decode_message, encode_message
from .pair_oracle import packed_blocks

__all__ = ["SelectiveFailureResult", "SelectiveFailureServer", "selective_failure_attack"]


@dataclass
class SelectiveFailureResult:
    """Outcome of :func:`selective_failure_attack`.

    Attributes
    ----------
    accuracy : float
        Fraction of probed targets whose "same label as the reference?" the attacker read
        right (``nan`` if nothing was probed).
    baseline : float
        The better constant guess ("all same" or "all different") on the probed targets.
    n_probed : int
        Targets probed (one per forged round).
    n_fits : int
        Fits run (the first and every retry after a refusal).
    refusals : int
        Fits the client refused during the rounds (what the attacker reads as "different").
    reported : int
        Fits after which the client reported the server's deviation (its one bit per model).
    """

    accuracy: float
    baseline: float
    n_probed: int
    n_fits: int
    refusals: int
    reported: int
    guesses: dict = field(default_factory=dict)  # target -> guessed "same as reference"


class SelectiveFailureServer:
    """A malicious server swapping one reference row for one target row per round.

    Parameters
    ----------
    server : PrivateForestServer
        The real server it wraps (it runs the honest protocol, so plans stay in step).
    probes : list of (int, int)
        ``(reference, target)`` rows, probed in order, one per forged round.
    """

    def __init__(self, server, probes: list[tuple[int, int]]):
        self.server = server
        self.probes = list(probes)
        self.next_probe = 0
        self.pending: tuple[int, int] | None = None
        self.guesses: dict[int, bool] = {}

    def handle(self, data: bytes) -> bytes:
        message = decode_message(data)
        if message.kind == "answer" and self.pending is not None:
            self.guesses[self.pending[1]] = True  # answered: the counts looked right
            self.pending = None
        reply = self.server.handle(data)
        decoded = decode_message(reply)
        if decoded.kind != "query" or self.next_probe >= len(self.probes):
            return reply
        return encode_message(self._forged(decoded))

    def refused(self) -> None:
        """The client stopped during a forged round: read it as "different labels"."""
        if self.pending is not None:
            self.guesses[self.pending[1]] = False
            self.pending = None

    def _forged(self, query: Message) -> Message:
        from ..protocol.planner import Candidate, NodePlan

        if "counts" not in query.blobs:  # plan-only rounds: no count to swap a row in
            return query
        session = self.server.session(query.meta["session"])
        reference, target = self.probes[self.next_probe]
        forged, swapped = [], False
        for plan in session.plans:
            weights = session.growth.weights(plan.tree)
            orders = [np.repeat(order, weights[order]) for order in plan.orders]
            if not swapped and reference in plan.node.samples and target != reference:
                orders = [np.where(order == reference, target, order) for order in orders]
                swapped = True
            candidates = [[Candidate(c.feature, c.key, c.threshold, c.left_weight,
                                     c.left_weight) for c in cands]
                          for cands in plan.candidates]
            forged.append(NodePlan(plan.tree, plan.node, plan.weight, orders, candidates))
        if not swapped:  # the reference is in no planned node: an honest round
            return query
        self.pending = (reference, target)
        self.next_probe += 1
        blobs, positions = packed_blocks(session, forged, query.meta["shift"])
        arrays = dict(query.arrays)
        arrays["block_position"] = np.asarray(positions, dtype=np.int64)
        return Message("query", query.meta, arrays, {"counts": blobs})


def selective_failure_attack(client, X, y, n_targets: int = 20, max_fits: int = 30,
                             reference: int | None = None, seed: int = 0
                             ) -> SelectiveFailureResult:
    """Fit clones of ``client`` against a :class:`SelectiveFailureServer` until
    ``n_targets`` targets are probed (or ``max_fits`` fits ran), retrying after each refusal,
    and score the attacker's "same label as the reference?" readings.

    ``y`` is the data owner's; the attacker knows the reference row's label (default: the
    first row) and probes ``n_targets`` other rows drawn at random (seeded: ``seed``).
    """
    import warnings

    from sklearn.base import clone

    from ..client import ServerDeviationWarning
    from ..protocol import PrivateForestServer

    y = np.asarray(y)
    reference = 0 if reference is None else int(reference)
    others = np.array([i for i in range(y.shape[0]) if i != reference])
    targets = np.random.default_rng(seed).permutation(others)[:n_targets].tolist()
    attacker = SelectiveFailureServer(PrivateForestServer(),
                                      [(reference, t) for t in targets])
    fits = refusals = reported = 0
    while attacker.next_probe < len(targets) and fits < max_fits:
        fits += 1
        probed_before = attacker.next_probe
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ServerDeviationWarning)
                fitted = clone(client).set_params(server=attacker).fit(X, y)
        except ProtocolError:
            refusals += 1
            attacker.refused()
            continue
        reported += int(not fitted.privacy_report_["server_honest"]
                        or any(issubclass(w.category, ServerDeviationWarning) for w in caught))
        if attacker.next_probe == probed_before:  # a whole fit without a count to forge
            break
    probed = list(attacker.guesses)
    truth = np.array([y[t] == y[reference] for t in probed], dtype=bool)
    guess = np.array([attacker.guesses[t] for t in probed], dtype=bool)
    accuracy = float(np.mean(guess == truth)) if probed else float("nan")
    baseline = float(max(truth.mean(), 1 - truth.mean())) if probed else float("nan")
    return SelectiveFailureResult(accuracy, baseline, len(probed), fits, refusals, reported,
                                  dict(attacker.guesses))
