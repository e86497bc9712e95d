"""Content-substitution attack: a malicious server keeps the plan honest, forges the counts.

The adversary is the server. Every plan field of its queries is the honest one (trees, nodes,
weights, candidates, left weights), so the client's replay of the plan passes; only the
ciphertext contents are substituted. For each planned node it picks a probe row ``b`` and a
reference row ``a`` and computes, homomorphically from the client's own label ciphertexts,
counts that stand for a node whose first ``lw`` (the first candidate's left weight) units are
row ``a`` and the rest row ``b``: every candidate's left counts, the node's total — all of
them real counts of the right weights, so range, square and integer checks pass. If ``a`` and
``b`` share a class the node looks pure (the client answers "leaf", or a random candidate
when leaves are hidden); otherwise the first candidate separates the classes perfectly and
the client chooses it. One bit per node and round; the number of probes doubles with every
level, so a few rounds read every label.

Positive control: a client of the paper's flow (``decide_from="server"``) without the
arithmetic check (the protocol before it, reproduced by :func:`without_count_check`) — the
attack reads the labels (``tests/privacy/test_label_guarantee.py``,
``benchmarks/label_privacy.py``). With the check, the paper's flow refuses the first forged
round (:func:`~cipherforest.privacy.protocol.decisions.check_counts`). The default client decides
from its own counts in plan-only rounds: it uploads no label ciphertext and asks for no count,
so this server has nothing to forge (its queries pass unchanged).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from ..protocol import Message, ProtocolError, decode_message, encode_message
from .pair_oracle import packed_blocks

__all__ = ["ContentSubstitutionResult", "ContentSubstitutionServer",
           "content_substitution_attack", "without_count_check"]


@dataclass
class ContentSubstitutionResult:
    """Outcome of the content-substitution attack.

    Attributes
    ----------
    refused : bool
        The client refused a forged round (raised ``ProtocolError``).
    refused_round : int
        The round it refused (0 if it never did).
    success : float
        Fraction of all rows whose label the attack recovered (groups named by one known
        label per class; ``nan`` when refused before any answer).
    baseline : float
        The majority-class rate.
    rounds : int
        Forged rounds answered.
    error : str
    """

    refused: bool
    refused_round: int
    success: float
    baseline: float
    rounds: int
    error: str = ""


@dataclass
class _Probes:
    """The attacker's running inference: a group per row, references per group."""

    n_rows: int
    group: dict = field(default_factory=dict)  # row -> group id
    references: list = field(default_factory=list)  # one row per group found
    tried: dict = field(default_factory=dict)  # row -> references found different
    differ_votes: dict = field(default_factory=dict)  # row -> "different" answers in a row
    confirmations: int = 2

    def __post_init__(self):
        self.group[0] = 0
        self.references.append(0)

    def next_pairs(self, k: int) -> list[tuple[int, int]]:
        """Up to ``k`` (reference, probe) pairs, each unknown row against the next reference
        it has not been told apart from."""
        pairs = []
        for row in range(self.n_rows):
            if len(pairs) == k:
                break
            if row in self.group:
                continue
            done = self.tried.get(row, 0)
            if done < len(self.references):
                pairs.append((self.references[done], row))
        return pairs

    def record(self, reference: int, row: int, same: bool) -> None:
        """A choice other than the separating candidate proves "same class"; choosing it
        means "different" unless a pure node's random candidate happened to be it, so
        "different" is taken after ``confirmations`` such answers in a row."""
        if same:
            self.group[row] = self.group[reference]
            return
        self.differ_votes[row] = self.differ_votes.get(row, 0) + 1
        if self.differ_votes[row] < self.confirmations:
            return
        self.differ_votes[row] = 0
        self.tried[row] = self.tried.get(row, 0) + 1
        if self.tried[row] >= len(self.references):  # unlike every group seen: a new one
            self.group[row] = len(self.references)
            self.references.append(row)


class ContentSubstitutionServer:
    """A malicious server: honest plans, forged ciphertext contents (module docstring).

    Parameters
    ----------
    server : PrivateForestServer
        The real server it wraps; it runs the honest protocol (so the plans stay in step
        with the client's replay, which applies the client's answers as real splits).
    """

    def __init__(self, server):
        self.server = server
        self.rounds = 0
        self._probes: _Probes | None = None
        self._pending: dict = {}  # (tree, node) -> (reference, row)

    def handle(self, data: bytes) -> bytes:
        message = decode_message(data)
        if message.kind == "answer" and self._pending:
            self._read_answer(message)
        reply = self.server.handle(data)
        decoded = decode_message(reply)
        if decoded.kind == "session":
            setup = message
            self._probes = _Probes(setup.arrays["X"].shape[0])
        if decoded.kind != "query":
            return reply
        return encode_message(self._forged(decoded))

    def _read_answer(self, answer: Message) -> None:
        for tree, node, choice in zip(answer.arrays["tree"].tolist(),
                                      answer.arrays["node"].tolist(),
                                      answer.arrays["choice"].tolist(), strict=True):
            pair = self._pending.get((tree, node))
            if pair is not None:
                # The forged node's first candidate separates the two rows perfectly: it is
                # chosen exactly when their classes differ (pure otherwise: leaf or random).
                self._probes.record(*pair, same=choice != 0)
        self._pending = {}
        self.rounds += 1

    def labels(self) -> dict:
        """Row -> group id inferred so far."""
        return dict(self._probes.group)

    def _forged(self, query: Message) -> Message:
        from ..protocol.planner import Candidate, NodePlan

        if "counts" not in query.blobs:  # plan-only rounds: no ciphertext to substitute
            return query
        session = self.server.session(query.meta["session"])
        plans = session.plans
        pairs = self._probes.next_pairs(len(plans))
        forged = []
        for i, plan in enumerate(plans):
            reference, row = pairs[i] if i < len(pairs) else (0, 0)
            first = plan.candidates[0][0].left_weight
            # Unit weights over repeated rows: `first` copies of the reference, then the probe.
            order = np.array([reference] * first + [row] * (plan.weight - first))
            candidates = [[Candidate(c.feature, c.key, c.threshold, c.left_weight,
                                     c.left_weight) for c in cands]
                          for cands in plan.candidates]
            forged.append(NodePlan(plan.tree, plan.node, plan.weight,
                                   [order] * len(candidates), candidates))
            if i < len(pairs):
                self._pending[(plan.tree, plan.node.node_id)] = (reference, row)
        blobs, positions = packed_blocks(session, forged, query.meta["shift"])
        arrays = dict(query.arrays)
        arrays["block_position"] = np.asarray(positions, dtype=np.int64)
        return Message("query", query.meta, arrays, {"counts": blobs})


@contextlib.contextmanager
def without_count_check():
    """The client as it was before it checked the server's arithmetic (positive control
    of this attack only, with ``decide_from="server"``): every decrypted count is taken as
    it comes."""
    from ..protocol import session as session_module

    checked = session_module.check_counts
    session_module.check_counts = lambda plans, decrypted, expected, tolerance=0.0: None
    try:
        yield
    finally:
        session_module.check_counts = checked


def content_substitution_attack(client, X, y, known_per_class=None
                                ) -> ContentSubstitutionResult:
    """Fit a clone of ``client`` against a :class:`ContentSubstitutionServer` and score the
    labels it reads.

    ``y`` is given to the client (it is the data owner's fit). The attacker's groups are
    named with one known label per class (``known_per_class``: row indices; default the
    first row of each class), the side knowledge the other label attacks take.
    """
    from sklearn.base import clone

    from ..protocol import PrivateForestServer

    y = np.asarray(y)
    attacker = ContentSubstitutionServer(PrivateForestServer())
    baseline = float(np.max(np.unique(y, return_counts=True)[1]) / y.shape[0])
    try:
        clone(client).set_params(server=attacker).fit(X, y)
    except ProtocolError as exc:
        if attacker.rounds == 0:
            return ContentSubstitutionResult(True, 1, float("nan"), baseline, 0, str(exc))
        refused, error = attacker.rounds + 1, str(exc)
    else:
        refused, error = 0, ""
    groups = attacker.labels()
    known = ([int(np.flatnonzero(y == c)[0]) for c in np.unique(y)]
             if known_per_class is None else list(known_per_class))
    names = {}
    for row in known:
        if row in groups:
            names.setdefault(groups[row], y[row])
    guess = np.array([names.get(groups.get(i), None) for i in range(y.shape[0])],
                     dtype=object)
    success = float(np.mean(guess == y))
    return ContentSubstitutionResult(bool(refused), refused, success, baseline,
                                     attacker.rounds, error)
