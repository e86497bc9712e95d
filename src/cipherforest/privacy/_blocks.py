"""Slot layout of the packed query ciphertexts, shared by server (packing) and client.

Each candidate split owns one *block* of slots holding its left counts ``L`` and right counts
``R = T - L`` (``τ`` classes each); each queried node owns one block holding its total ``T``.
After the server squares the ciphertext, the client reads ``ΣL²`` and ``ΣR²`` per block.

* CKKS: a block is ``τ`` complex slots ``z = v·L + i·v·R`` (``v = 2^-shift`` keeps squares in
  range). The square is ``z² = v²(L² - R²) + 2i·v²·L·R``, from which ``L²`` and ``R²`` follow
  (both non-negative): half the slots — and half the bytes per round — of a real layout.
* BFV: slots are integers mod ``t``; a block is ``2τ`` slots, ``L`` then ``R``.

Written in terms of the label ciphertexts (one-hot label replicated over all slots), a
candidate contributes ``L ⊙ candidate_mask`` and its node ``T ⊙ total_mask``.
"""

from __future__ import annotations

import numpy as np


class BlockLayout:
    """Block geometry and mask values for one scheme, slot count and number of classes."""

    def __init__(self, scheme: str, n_slots: int, n_classes: int):
        self.scheme = scheme
        self.n_slots = n_slots
        self.tau = n_classes
        self.block_size = n_classes if scheme == "ckks" else 2 * n_classes
        self.per_ciphertext = n_slots // self.block_size

    def empty_mask(self) -> np.ndarray:
        return np.zeros(self.n_slots, dtype=np.complex128 if self.scheme == "ckks" else np.int64)

    def candidate_mask(self, index: int, value: float) -> np.ndarray:
        """Mask putting ``+L`` in block ``index``'s left part and ``-L`` in its right part."""
        mask = self.empty_mask()
        start = index * self.block_size
        if self.scheme == "ckks":
            mask[start: start + self.tau] = complex(value, -value)
        else:
            mask[start: start + self.tau] = value
            mask[start + self.tau: start + 2 * self.tau] = -value
        return mask

    def add_total(self, mask: np.ndarray, index: int, value: float, node_block: bool) -> None:
        """Route the node total ``T`` into block ``index``: its left part for the node's own
        block, its right part (completing ``R = T - L``) for a candidate block."""
        start = index * self.block_size
        if self.scheme == "ckks":
            mask[start: start + self.tau] = complex(value, 0.0) if node_block else complex(
                0.0, value)
        elif node_block:
            mask[start: start + self.tau] = value
        else:
            mask[start + self.tau: start + 2 * self.tau] = value

    def squares(self, slots: np.ndarray, n_used: int) -> np.ndarray:
        """``(ΣL², ΣR²)`` of the first ``n_used`` blocks of a decrypted, squared ciphertext
        (unscaled: CKKS values still carry ``v²``)."""
        blocks = slots[: n_used * self.block_size]
        if self.scheme == "ckks":
            z2 = blocks.reshape(n_used, self.tau)
            difference, cross = z2.real, z2.imag  # v²(L² - R²), 2 v² L R
            left = 0.5 * (difference + np.hypot(difference, cross))
            right = left - difference
            return np.stack([left.sum(axis=1), right.sum(axis=1)], axis=1)
        halves = blocks.reshape(n_used, 2, self.tau).astype(np.float64)
        return halves.sum(axis=2)
