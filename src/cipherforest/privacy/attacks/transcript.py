"""The server's view: the protocol messages it exchanged and the trees it grew.

:class:`RecordingServer` wraps a real server and keeps a :class:`Transcript` of a real
:meth:`PrivateForestClient.fit <cipherforest.privacy.PrivateForestClient.fit>`: an
honest-but-curious server's view. From it :func:`declared_leaves` reads the client's "leaf"
answers and :func:`server_bootstrap_counts` the bootstrap the server derives from the setup
message. :func:`forest_trees` gives a fitted
:class:`~cipherforest.ensemble.RandomForestClassifier`'s trees in the server's format, so the
tree attacks run without the protocol; :func:`tree_paths` routes rows through such a tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..protocol import Message, decode_message, route_tree_rows

__all__ = ["RecordingServer", "Transcript", "declared_leaves", "forest_trees",
           "server_bootstrap_counts", "tree_paths"]


@dataclass
class Transcript:
    """What the server held after a fit: every message in and out, and its trees."""

    exchanges: list[tuple[Message, Message]] = field(default_factory=list)
    trees: list[dict[str, np.ndarray]] | None = None

    def first(self, kind: str) -> Message:
        """The first received message of ``kind``."""
        for request, _ in self.exchanges:
            if request.kind == kind:
                return request
        raise LookupError(f"the transcript holds no {kind!r} message")

    @property
    def X_cipher(self) -> np.ndarray:
        """The training cipher matrix the ``setup`` message carried."""
        return self.first("setup").arrays["X"]


class RecordingServer:
    """A server that records every message it receives and sends: an honest-but-curious view.

    Wraps a real server (anything with ``handle(bytes) -> bytes``, e.g.
    :class:`~cipherforest.privacy.PrivateForestServer`); pass it as
    ``PrivateForestClient(server=RecordingServer(PrivateForestServer()))``. After the
    ``trained`` reply it also records the trees the server grew (``tree_arrays``).

    Parameters
    ----------
    server
        The wrapped server.
    keep_blobs : bool, default=False
        Keep ciphertext bytes in the recorded messages. No attack reads them (CKKS and BFV
        are semantically secure); by default they are replaced by empty byte strings (their
        count stays) to keep memory small.
    """

    def __init__(self, server, keep_blobs: bool = False):
        self.server = server
        self.keep_blobs = keep_blobs
        self.transcript = Transcript()

    def handle(self, data: bytes) -> bytes:
        reply = self.server.handle(data)
        request, response = decode_message(data), decode_message(reply)
        if not self.keep_blobs:
            for message in (request, response):
                message.blobs = {name: [b""] * len(items) for name, items in
                                 message.blobs.items()}
        self.transcript.exchanges.append((request, response))
        if response.kind == "trained" and hasattr(self.server, "tree_arrays"):
            self.transcript.trees = self.server.tree_arrays(response.meta["session"])
        return reply


def server_bootstrap_counts(setup: Message) -> np.ndarray:
    """Bootstrap counts of every tree, shape (n_estimators, n_samples), from the setup message.

    The server derives them deterministically from the forest seed and parameters the client
    sends (its label-free planning, :class:`~cipherforest.privacy.protocol.planner.ForestGrowth`).
    """
    from ..protocol.params import ForestSpec
    from ..protocol.planner import ForestGrowth

    X = setup.arrays["X"]
    growth = ForestGrowth(X, ForestSpec.from_meta(setup.meta, X.shape[0], X.shape[1]))
    return np.stack([growth.weights(t) for t in range(len(growth.trees))])


def declared_leaves(transcript: Transcript) -> list[tuple[int, int]]:
    """(tree, node) pairs the client answered "leaf" (-1) although the server had asked.

    A node is in a query only when public rules (depth, sample counts, a valid candidate)
    let it split, so "leaf" there is the client's own decision: under the paper's rule,
    a pure node (or one without gain).
    """
    leaves = []
    for request, _ in transcript.exchanges:
        if request.kind != "answer":
            continue
        choice = request.arrays["choice"]
        for t, node in zip(request.arrays["tree"][choice < 0].tolist(),
                           request.arrays["node"][choice < 0].tolist(), strict=True):
            leaves.append((t, node))
    return leaves


def forest_trees(forest) -> list[dict[str, np.ndarray]]:
    """The structure of a fitted forest's trees in the server's format (``tree_arrays``).

    A :class:`~cipherforest.ensemble.RandomForestClassifier` fitted on cipher1 with clear
    labels grows the trees the encrypted forest's server grows with the same parameters and
    seed, so this is the server's view without running the protocol.
    """
    return [{"children_left": np.asarray(est.tree_.children_left),
             "children_right": np.asarray(est.tree_.children_right),
             "feature": np.asarray(est.tree_.feature),
             "threshold": np.asarray(est.tree_.threshold),
             "n_node_samples": np.asarray(est.tree_.n_node_samples)}
            for est in forest.estimators_]


def tree_paths(tree: dict, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (row, node) pair of the rows' root-to-leaf paths, and each row's leaf."""
    return route_tree_rows(tree["children_left"], tree["children_right"], tree["feature"],
                           tree["threshold"], X, paths=True)
