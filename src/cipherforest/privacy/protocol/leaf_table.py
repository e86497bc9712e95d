"""The client's leaf class counts, computed from its own labels: :class:`LeafTable`.

Once a forest's structure is fixed, each training row's leaf in each tree is known (the client
replays the plan in ``"gini"``/``"dp"``; the server, which grew ``"rr"``/``"blind"`` trees,
names the leaf each training row reaches). The client then counts its own labels per leaf,
weighted by the trees' bootstrap draws — the same counts the encrypted leaf store holds — and
keeps them with its keys. A prediction asks the server only for the leaves the test rows
reach: no homomorphic work, and nothing the server could mix label ciphertexts into, so no
reply the client decrypts can be turned into a question about a training label.

A leaf id the table does not hold is refused; which leaves exist and which rows reach them
are functions of what the server itself holds (ciphers, seed, bootstrap draws), so the
refusal tells it nothing about a label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .messages import ProtocolError

__all__ = ["LeafTable"]


@dataclass(frozen=True)
class LeafTable:
    """Per tree, the sorted ids of the leaves training rows reach and their class counts.

    Attributes
    ----------
    offsets : ndarray of shape (n_trees + 1,)
        Tree ``t``'s leaves are rows ``offsets[t]:offsets[t + 1]``.
    leaf_ids : ndarray of shape (n_leaves,)
        Node ids, ascending within each tree.
    counts : ndarray of shape (n_leaves, n_classes)
        Bootstrap-weighted class counts of the training rows in each leaf (secret).
    """

    offsets: np.ndarray
    leaf_ids: np.ndarray
    counts: np.ndarray

    @classmethod
    def from_rows(cls, reached: np.ndarray, labels: np.ndarray,
                  weights_of: Callable[[int], np.ndarray], n_classes: int) -> LeafTable:
        """The table of training rows that reach leaf ``reached[i, t]`` in tree ``t``,
        each weighing its bootstrap draws ``weights_of(t)[i]`` (rows never drawn count
        nothing)."""
        reached = np.asarray(reached, dtype=np.int64)
        labels = np.asarray(labels, dtype=np.int64)
        offsets, ids, counts = [0], [], []
        for t in range(reached.shape[1]):
            weights = np.asarray(weights_of(t), dtype=np.int64)
            rows = np.flatnonzero(weights > 0)
            leaves, where = np.unique(reached[rows, t], return_inverse=True)
            tree_counts = np.zeros((leaves.shape[0], n_classes), dtype=np.int64)
            np.add.at(tree_counts, (where, labels[rows]), weights[rows])
            ids.append(leaves)
            counts.append(tree_counts)
            offsets.append(offsets[-1] + leaves.shape[0])
        return cls(np.asarray(offsets, dtype=np.int64), np.concatenate(ids),
                   np.concatenate(counts))

    @property
    def n_trees(self) -> int:
        return self.offsets.shape[0] - 1

    def rows(self, reached: np.ndarray) -> np.ndarray:
        """``(n_rows, n_trees)`` table rows of the leaves ``reached[i, t]``; a leaf no
        training row reaches is refused (:class:`ProtocolError`)."""
        reached = np.asarray(reached, dtype=np.int64)
        if reached.ndim != 2 or reached.shape[1] != self.n_trees:
            raise ProtocolError(f"scores: expected leaf ids of {self.n_trees} trees per row")
        out = np.empty(reached.shape, dtype=np.int64)
        for t in range(self.n_trees):
            lo, hi = int(self.offsets[t]), int(self.offsets[t + 1])
            ids = self.leaf_ids[lo:hi]
            pos = np.minimum(np.searchsorted(ids, reached[:, t]), ids.shape[0] - 1)
            if (ids[pos] != reached[:, t]).any():
                bad = int(reached[np.flatnonzero(ids[pos] != reached[:, t])[0], t])
                raise ProtocolError(f"scores: node {bad} of tree {t} is not a leaf any "
                                    "training row reaches")
            out[:, t] = lo + pos
        return out

    def proba(self, reached: np.ndarray) -> np.ndarray:
        """Mean over the trees of the class frequencies of the leaves ``reached``."""
        counts = self.counts[self.rows(reached)]  # (rows, trees, τ)
        return (counts / counts.sum(axis=2, keepdims=True)).mean(axis=1)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The arrays :meth:`from_arrays` reads (saved with the client's keys)."""
        return {"leaf_offsets": self.offsets, "leaf_ids": self.leaf_ids,
                "leaf_class_counts": self.counts}

    @classmethod
    def from_arrays(cls, arrays) -> LeafTable | None:
        """The table saved by :meth:`to_arrays`, or None if ``arrays`` holds none."""
        if "leaf_offsets" not in arrays:
            return None
        offsets = np.asarray(arrays["leaf_offsets"], dtype=np.int64)
        ids = np.asarray(arrays["leaf_ids"], dtype=np.int64)
        counts = np.asarray(arrays["leaf_class_counts"], dtype=np.int64)
        if (offsets.ndim != 1 or offsets.shape[0] < 2 or offsets[0] != 0
                or (np.diff(offsets) < 1).any() or offsets[-1] != ids.shape[0]
                or counts.ndim != 2 or counts.shape[0] != ids.shape[0]
                or (counts < 0).any() or (counts.sum(axis=1) < 1).any()):
            raise ValueError("the saved leaf class counts are inconsistent")
        return cls(offsets, ids, counts)
