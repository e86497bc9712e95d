"""Slot layout of packed labels, query ciphertexts and the leaf store (server and client).

The slots are cut into *lanes* of ``stride`` slots, a power of two: ``τ`` for CKKS and
``2τ`` for BFV, rounded up. Every ciphertext of the protocol uses this grid.

* **Packed labels.** The client puts ``rows_per_pack`` rows' one-hot labels into one
  ciphertext, row ``b`` in lane ``b`` (BFV: in both halves of the lane and in both rows of
  the slot matrix, as BFV rotations turn each row separately). The server keeps, per pack,
  its rotations by ``d`` lanes (``d`` in :meth:`BlockLayout.offsets`): in rotation ``d`` lane
  ``K`` holds row ``K + d`` (indices modulo ``cycle``), so the rows of a running sum destined
  to lane ``K`` are added from the rotations that bring each row there. Other lanes hold
  other rows' labels: garbage that the lane's mask removes. Rotations are cyclic because
  ``cycle · stride`` is the slot count (of one row, BFV).
* **Query blocks.** Candidate ``k`` of a running sum bound to lane ``K`` puts its left
  counts ``L`` and right counts ``R = T - L`` into lane ``K`` of a query ciphertext. CKKS:
  ``τ`` complex slots ``z = v·L + i·v·R`` (``v = 2^-shift`` keeps squares in range), squared
  by the server: ``z² = v²(L² - R²) + 2i·v²·L·R``, from which the client recovers ``L²`` and
  ``R²`` per class (both non-negative). BFV: ``2τ`` integer slots ``L | R``, squared.
  The client reads the per-class counts, so the node's total ``T = L + R`` needs no block.
* **Leaf store.** Two leaves' class counts per lane: CKKS real and imaginary parts, BFV
  the two halves of the lane.
"""

from __future__ import annotations

import numpy as np


def _power_of_two_at_least(value: int) -> int:
    return 1 << max(0, int(value) - 1).bit_length()


class BlockLayout:
    """Lane geometry and mask values for one scheme, slot count, class count, row count.

    Parameters
    ----------
    scheme : {"ckks", "bfv"}
    n_slots : int
        Slots of a ciphertext (CKKS: complex slots).
    n_classes : int
        τ.
    n_rows : int
        Training rows: with fewer rows than a full pack, packs and lanes shrink to the rows
        (fewer rotations for the server to hold).
    pack_rows : int or None, default=None
        At most this many rows per label pack (and lanes per query ciphertext row).
    """

    def __init__(self, scheme: str, n_slots: int, n_classes: int, n_rows: int,
                 pack_rows: int | None = None):
        self.scheme = scheme
        self.n_slots = n_slots
        self.tau = n_classes
        self.stride = _power_of_two_at_least(n_classes if scheme == "ckks" else 2 * n_classes)
        self.block_size = self.stride
        row_slots = n_slots if scheme == "ckks" else n_slots // 2
        self.cycle = row_slots // self.stride
        self.rows_per_pack = max(1, min(self.cycle, int(n_rows),
                                        self.cycle if pack_rows is None else int(pack_rows)))
        # Lanes per slot-matrix row; BFV has two rows.
        self.lanes_per_row = self.rows_per_pack
        self.per_ciphertext = self.lanes_per_row * (1 if scheme == "ckks" else 2)
        self.leaves_per_ciphertext = 2 * self.per_ciphertext

    # ------------------------------------------------------------------ lanes
    def lane_start(self, lane: int) -> int:
        """First slot of ``lane``."""
        row, k = divmod(int(lane), self.lanes_per_row)
        return row * (self.n_slots // 2) + k * self.stride if self.scheme == "bfv" \
            else k * self.stride

    def lane_position(self, lane: int) -> int:
        """Lane index within its slot-matrix row (what rotations move)."""
        return int(lane) % self.lanes_per_row

    def offsets(self) -> list[int]:
        """Rotations (in lanes, modulo ``cycle``) the server keeps per pack: every
        ``row - lane`` for rows and lanes below ``rows_per_pack``."""
        m = self.rows_per_pack
        if 2 * m - 1 >= self.cycle:
            return list(range(self.cycle))
        return sorted({d % self.cycle for d in range(-(m - 1), m)})

    def copy_index(self, row_in_pack: int, lane_position: int) -> int:
        """The rotation that brings row ``row_in_pack`` of a pack to ``lane_position``."""
        return (row_in_pack - lane_position) % self.cycle

    def pack_values(self, y: np.ndarray) -> np.ndarray:
        """Slot values of one label pack: row ``b``'s one-hot label in lane ``b``."""
        y = np.asarray(y, dtype=np.int64)
        if y.shape[0] > self.rows_per_pack:
            raise ValueError(f"a pack holds at most {self.rows_per_pack} rows")
        values = np.zeros(self.n_slots, dtype=np.float64 if self.scheme == "ckks" else np.int64)
        base = np.arange(y.shape[0]) * self.stride + y
        if self.scheme == "ckks":
            values[base] = 1
        else:
            half = self.n_slots // 2
            for offset in (0, self.tau, half, half + self.tau):
                values[base + offset] = 1
        return values

    # ------------------------------------------------------------------ masks
    def empty_mask(self) -> np.ndarray:
        return np.zeros(self.n_slots, dtype=np.complex128 if self.scheme == "ckks" else np.int64)

    def candidate_mask(self, lane: int, value: float) -> np.ndarray:
        """Mask putting ``+L`` in ``lane``'s left part and ``-L`` in its right part."""
        mask = self.empty_mask()
        start = self.lane_start(lane)
        if self.scheme == "ckks":
            mask[start: start + self.tau] = complex(value, -value)
        else:
            mask[start: start + self.tau] = value
            mask[start + self.tau: start + 2 * self.tau] = -value
        return mask

    def total_mask(self, lane: int, value: float) -> np.ndarray:
        """Mask routing the node total ``T`` into ``lane``'s right part (``R = T - L``)."""
        mask = self.empty_mask()
        start = self.lane_start(lane)
        if self.scheme == "ckks":
            mask[start: start + self.tau] = complex(0.0, value)
        else:
            mask[start + self.tau: start + 2 * self.tau] = value
        return mask

    def leaf_mask(self, position: int) -> np.ndarray:
        """Mask putting a leaf's counts ``T`` at ``position`` of a leaf-store ciphertext."""
        lane, part = divmod(int(position), 2)
        mask = self.empty_mask()
        start = self.lane_start(lane)
        if self.scheme == "ckks":
            mask[start: start + self.tau] = 1j if part else 1.0
        else:
            mask[start + part * self.tau: start + (part + 1) * self.tau] = 1
        return mask

    # ------------------------------------------------------------------ client reading
    def _lane_slots(self, slots: np.ndarray, width: int) -> np.ndarray:
        """``(per_ciphertext, width)`` slots at the start of every lane."""
        starts = np.array([self.lane_start(j) for j in range(self.per_ciphertext)])
        return slots[starts[:, None] + np.arange(width)[None, :]]

    def class_squares(self, slots: np.ndarray) -> np.ndarray:
        """``(per_ciphertext, 2, τ)``: per lane and class ``L²`` and ``R²`` of a decrypted
        squared query ciphertext (unscaled: CKKS values still carry ``v²``)."""
        if self.scheme == "ckks":
            z2 = self._lane_slots(slots, self.tau)
            difference, cross = z2.real, z2.imag  # v²(L² - R²), 2 v² L R
            left = 0.5 * (difference + np.hypot(difference, cross))
            return np.stack([left, left - difference], axis=1)
        halves = self._lane_slots(slots, 2 * self.tau).astype(np.float64)
        return halves.reshape(self.per_ciphertext, 2, self.tau)

    def leaf_counts(self, slots: np.ndarray) -> np.ndarray:
        """``(leaves_per_ciphertext, τ)`` class counts of a decrypted leaf-store ciphertext."""
        if self.scheme == "ckks":
            z = self._lane_slots(slots, self.tau)
            return np.stack([z.real, z.imag], axis=1).reshape(-1, self.tau)
        return self._lane_slots(slots, 2 * self.tau).reshape(-1, self.tau)
