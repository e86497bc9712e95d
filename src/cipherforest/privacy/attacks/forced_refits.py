"""Forced refits: a server reads the randomized labels and answers "busy" until it has enough.

The adversary is the server in the default mode (``split_selection="rr"``), where the
randomized labels travel in ``setup``, before anything can fail. It records them and fails
the fit; the user retries. If every fit drew its randomized labels afresh (the protocol before
the privacy ledger, reproduced by :func:`fresh_randomized_labels`), a majority vote over the
recorded draws converges to the true labels (the positive control). With permanent randomized
response every retry sends the same labels: the majority over any number of failed fits is
one fit's accuracy.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass

import numpy as np

from ..protocol import ProtocolError, decode_message

__all__ = ["BusyServer", "ForcedRefitResult", "forced_refit_attack", "fresh_randomized_labels"]


@dataclass(frozen=True)
class ForcedRefitResult:
    """Outcome of :func:`forced_refit_attack`.

    Attributes
    ----------
    single_fit : float
        Accuracy of one fit's randomized labels as a guess of the true labels.
    majority : float
        Accuracy of the per-row majority over every recorded fit (ties: the first fit's).
    n_fits : int
        Failed fits recorded.
    distinct_draws : int
        Distinct randomized-label vectors among them (1: memoized).
    """

    single_fit: float
    majority: float
    n_fits: int
    distinct_draws: int


class BusyServer:
    """Records the randomized labels of every ``setup`` and refuses it ("busy")."""

    def __init__(self):
        self.draws: list[np.ndarray] = []

    def handle(self, data: bytes) -> bytes:
        message = decode_message(data)
        if message.kind == "setup" and "y_rr" in message.arrays:
            self.draws.append(np.array(message.arrays["y_rr"]))
        raise ProtocolError("setup: the server is busy, try again later")


@contextlib.contextmanager
def fresh_randomized_labels():
    """The client as it was before the privacy ledger (positive control of this attack
    only): each fit draws its randomized labels afresh from the operating system."""
    from ..dp import RandomizedResponse
    from ..ledger import PrivacyLedger

    memoized = PrivacyLedger.randomized_labels

    def fresh(self, X, labels, epsilon, n_classes):
        return RandomizedResponse(epsilon, n_classes).draw(labels, secrets.SystemRandom())

    PrivacyLedger.randomized_labels = fresh
    try:
        yield
    finally:
        PrivacyLedger.randomized_labels = memoized


def forced_refit_attack(client, X, y, n_fits: int = 7) -> ForcedRefitResult:
    """Let ``client`` (``split_selection="rr"``) retry its fit ``n_fits`` times against a
    :class:`BusyServer` and score the majority of the recorded randomized labels.

    ``y`` must be class indices ``0..k-1`` (what the client encodes them to).
    """
    y = np.asarray(y)
    server = BusyServer()
    client.set_params(server=server)
    for _ in range(n_fits):
        with contextlib.suppress(ProtocolError):
            client.fit(X, y)
    draws = np.stack(server.draws)
    n_classes = int(max(draws.max(), y.max())) + 1
    votes = np.zeros((y.shape[0], n_classes), dtype=np.int64)
    for draw in draws:
        votes[np.arange(y.shape[0]), draw] += 1
    best = votes.max(axis=1, keepdims=True)
    # Ties go to the first fit's label when it is among the most voted, else the lowest.
    first = draws[0]
    majority = np.where(votes[np.arange(y.shape[0]), first] == best[:, 0], first,
                        np.argmax(votes, axis=1))
    return ForcedRefitResult(float(np.mean(first == y)), float(np.mean(majority == y)),
                             int(draws.shape[0]), int(np.unique(draws, axis=0).shape[0]))
