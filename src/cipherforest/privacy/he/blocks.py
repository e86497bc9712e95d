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
* **Rotation parts.** Holding every rotation costs one ciphertext per row. With ``parts =
  P > 1`` the server holds only the rotations ``e < span = cycle / P``: a row that needs
  rotation ``d = i·span + e`` is added from rotation ``e``, which brings it to lane
  ``K + i·span`` instead of ``K``, into the sum's accumulator of *part* ``i`` (bound to that
  lane). Each part's masked products go to their own query (or leaf-store) ciphertext, at
  lane ``K + i·span``; the parts are added after a rotation by ``i·span`` lanes, once per
  ciphertext (Horner's scheme, one more Galois key: ``span · stride`` slots). Memory per
  row falls to ``1/P`` of a ciphertext; each block costs ``P`` mask products instead of
  one. Small packs (``2·rows_per_pack - 1 <= cycle / P`` rotations) keep ``parts = 1``.
* **Query blocks.** A query ciphertext holds two blocks per lane, each one set of ``τ``
  class counts: a candidate's left counts ``L`` or a node's total ``T`` (the client takes
  ``R = T - L``). Block ``2K + part`` of a ciphertext is lane ``K``'s first (``part`` 0) or
  second (``part`` 1) block. CKKS: ``τ`` complex slots ``z = v·a + i·v·b`` (``a``, ``b`` the
  two blocks' counts, ``v = 2^-shift`` keeps them in the last prime's range); BFV: ``2τ``
  integer slots ``a | b``. The client squares the counts itself.
* **Leaf store.** CKKS: one leaf's class *frequencies* (counts over the leaf's bootstrap
  draws ``T``, which the server knows) per lane, in the real parts (so that a slot-wise mask
  can select one leaf: real and imaginary parts of a slot cannot be told apart by a
  multiplication); BFV: two leaves' class counts per lane, in the two halves of the lane.
* **Row sums** (CKKS predictions). Output lane ``l`` of sum ciphertext ``o`` holds, per
  class, test row ``o · 2·cycle + 2l``'s sum over trees of its leaves' class frequencies in
  the real parts and row ``o · 2·cycle + 2l + 1``'s in the imaginary parts. The server moves
  each leaf from its store lane ``j`` to its row's lane ``l`` by rotations of
  ``d = j - l`` lanes, split baby-step giant-step as ``d = G·i + b`` (``G``:
  :attr:`BlockLayout.giant_step`), which needs Galois keys for ``+stride`` (baby steps, the
  packed labels' key) and ``+G·stride`` (giant steps) slots.
"""

from __future__ import annotations

import math

import numpy as np

from .schemes import HEScheme, scheme_named

__all__ = ["BlockLayout"]


def _power_of_two_at_least(value: int) -> int:
    return 1 << max(0, int(value) - 1).bit_length()


class BlockLayout:
    """Lane geometry and mask values for one scheme, slot count, class count, row count.

    Parameters
    ----------
    scheme : {"ckks", "bfv"} or HEScheme
    n_slots : int
        Slots of a ciphertext (CKKS: complex slots).
    n_classes : int
        τ.
    n_rows : int
        Training rows: with fewer rows than a full pack, packs and lanes shrink to the rows
        (fewer rotations for the server to hold).
    pack_rows : int or None, default=None
        At most this many rows per label pack (and lanes per query ciphertext row).
    rotation_parts : int or None, default=None
        ``P``, a power of two: the server holds ``1/P`` of a pack's lane rotations (see
        the module docstring); None: the scheme's (:attr:`HEScheme.rotation_parts`).
    """

    def __init__(self, scheme: str | HEScheme, n_slots: int, n_classes: int, n_rows: int,
                 pack_rows: int | None = None, rotation_parts: int | None = None):
        kind = scheme if isinstance(scheme, HEScheme) else scheme_named(scheme)
        self._kind = kind
        self.scheme = kind.name
        self.n_slots = n_slots
        self.tau = n_classes
        self.stride = _power_of_two_at_least(kind.lane_width * n_classes)
        self.block_size = self.stride
        self.row_slots = n_slots // kind.slot_rows  # what one rotation moves cyclically
        self.cycle = self.row_slots // self.stride
        self.rows_per_pack = max(1, min(self.cycle, int(n_rows),
                                        self.cycle if pack_rows is None else int(pack_rows)))
        # Lanes per slot-matrix row (BFV has two rows).
        self.lanes_per_row = self.rows_per_pack
        self.per_ciphertext = self.lanes_per_row * kind.slot_rows
        self.blocks_per_ciphertext = 2 * self.per_ciphertext  # two query blocks per lane
        self.leaves_per_ciphertext = self.per_ciphertext * kind.leaves_per_lane
        # Row sums: two test rows per lane (real, imaginary) over the whole cycle of lanes;
        # the giant step is the power of two nearest sqrt(cycle), which balances the baby
        # rotations (per store ciphertext) against the giant ones (per sum ciphertext).
        self.rows_per_sum = 2 * self.cycle
        self.giant_step = 1 << round(math.log2(self.cycle) / 2)
        parts = kind.rotation_parts if rotation_parts is None else int(rotation_parts)
        if parts < 1 or parts & (parts - 1) or parts > self.cycle:
            raise ValueError(f"rotation_parts must be a power of two in [1, {self.cycle}], "
                             f"got {parts}")
        self.parts = 1 if 2 * self.rows_per_pack - 1 <= self.cycle // parts else parts
        self.span = self.cycle // self.parts

    def rotation_steps(self) -> list[int]:
        """Slot steps the server rotates by (Galois keys the client must send): ``±stride``
        (label lanes), ``span · stride`` (rotation parts, when ``parts > 1``) and, for
        CKKS row sums, ``giant_step · stride``."""
        steps = [self.stride, -self.stride]
        if self.parts > 1:
            steps.append(self.span * self.stride)
        if self._kind.approximate and self.giant_step < self.cycle:
            steps.append(self.giant_step * self.stride)
        return steps

    # ------------------------------------------------------------------ lanes
    def lane_start(self, lane: int) -> int:
        """First slot of ``lane`` (``lanes_per_row`` lanes per slot-matrix row)."""
        row, k = divmod(int(lane), self.lanes_per_row)
        return row * self.row_slots + k * self.stride

    def _physical_start(self, physical_lane: int) -> int:
        """First slot of lane ``physical_lane`` numbered ``cycle`` per slot-matrix row."""
        row, k = divmod(int(physical_lane), self.cycle)
        return row * self.row_slots + k * self.stride

    def lane_position(self, lane: int) -> int:
        """Lane index within its slot-matrix row (what rotations move)."""
        return int(lane) % self.lanes_per_row

    def offsets(self) -> list[int]:
        """Rotations (in lanes, modulo ``cycle``) the server keeps per pack: every
        ``row - lane`` for rows and lanes below ``rows_per_pack``; with rotation parts the
        ones below ``span``."""
        m = self.rows_per_pack
        if self.parts > 1:
            return list(range(self.span))
        if 2 * m - 1 >= self.cycle:
            return list(range(self.cycle))
        return sorted({d % self.cycle for d in range(-(m - 1), m)})

    def copy_index(self, row_in_pack: int, lane_position: int) -> tuple[int, int]:
        """``(part, rotation)``: the held rotation that brings row ``row_in_pack`` of a
        pack to lane ``lane_position + part · span`` (part 0 without rotation parts)."""
        d = (row_in_pack - lane_position) % self.cycle
        return divmod(d, self.span) if self.parts > 1 else (0, d)

    def part_lane(self, lane: int, part: int) -> int:
        """The lane (numbered as :meth:`lane_start` numbers them) where rotation part
        ``part`` of a sum bound to ``lane`` lives: ``part · span`` lanes further along its
        slot-matrix row."""
        row, k = divmod(int(lane), self.lanes_per_row)
        return row * self.cycle + (k + part * self.span) % self.cycle

    def pack_values(self, y: np.ndarray) -> np.ndarray:
        """Slot values of one label pack: row ``b``'s one-hot label in lane ``b``."""
        y = np.asarray(y, dtype=np.int64)
        return self.pack_rows(np.eye(self.tau, dtype=self._kind.slot_dtype)[y])

    def pack_rows(self, rows: np.ndarray) -> np.ndarray:
        """Slot values of one pack of ``(n, τ)`` row vectors: row ``b`` in lane ``b`` (a
        one-hot label, or a regression target's statistics ``(y, y²)``, CKKS)."""
        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.shape[1] != self.tau:
            raise ValueError(f"expected rows of {self.tau} values, got shape {rows.shape}")
        if rows.shape[0] > self.rows_per_pack:
            raise ValueError(f"a pack holds at most {self.rows_per_pack} rows")
        values = np.zeros(self.n_slots, dtype=self._kind.slot_dtype)
        base = (np.arange(rows.shape[0]) * self.stride)[:, None] + np.arange(self.tau)
        for offset in self._kind.pack_offsets(self.tau, self.row_slots):
            values[base + offset] = rows
        return values

    # ------------------------------------------------------------------ masks
    def empty_mask(self) -> np.ndarray:
        return np.zeros(self.n_slots, dtype=self._kind.mask_dtype)

    def block_mask(self, lane: int, part: int, value: float,
                   rotation_part: int = 0) -> np.ndarray:
        """Mask putting ``value`` times a running sum bound to ``lane`` into the lane's
        first (``part`` 0) or second (``part`` 1) query block; for ``rotation_part`` ``i``,
        at the lane of that part (:meth:`part_lane`)."""
        mask = self.empty_mask()
        start = self._physical_start(self.part_lane(lane, rotation_part))
        self._kind.block_slots(mask, start, self.tau, part, value)
        return mask

    def leaf_lane(self, position: int) -> int:
        """The lane of leaf-store ``position`` (CKKS: one leaf per lane; BFV: two)."""
        return int(position) // self._kind.leaves_per_lane

    def leaf_mask(self, position: int, rotation_part: int = 0) -> np.ndarray:
        """Mask putting a leaf's counts ``T`` at ``position`` of a leaf-store ciphertext
        (for ``rotation_part`` ``i``, at the lane of that part)."""
        mask = self.empty_mask()
        start = self._physical_start(self.part_lane(self.leaf_lane(position), rotation_part))
        self._kind.leaf_slots(mask, start, self.tau, position)
        return mask

    def row_sum_moves(self, leaf_lane: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, ...]:
        """How the row sums (CKKS) move leaves: for a leaf in store lane ``leaf_lane[n]``
        bound for test row ``row[n]`` (numbered across all sum ciphertexts), returns arrays
        ``(baby, out, giant, lane, part)``: the store is rotated by ``baby`` lanes, its lane
        ``lane`` is masked (into the real parts for ``part`` 0, the imaginary parts for 1) and
        added into giant step ``giant`` of sum ciphertext ``out``."""
        leaf_lane = np.asarray(leaf_lane, dtype=np.int64)
        out, local = np.divmod(np.asarray(row, dtype=np.int64), self.rows_per_sum)
        lane, part = np.divmod(local, 2)
        giant, baby = np.divmod((leaf_lane - lane) % self.cycle, self.giant_step)
        # After the baby rotation by b lanes, the leaf of store lane j sits in lane j - b.
        return baby, out, giant, (leaf_lane - baby) % self.cycle, part

    def row_sum_mask(self, lane: int, part: int) -> np.ndarray:
        """Mask keeping ``lane``'s class slots, times 1 (``part`` 0) or i (``part`` 1)."""
        mask = np.zeros(self.n_slots, dtype=np.complex128)
        start = int(lane) * self.stride  # sums use every lane of the cycle, not a pack's
        mask[start: start + self.tau] = 1j if part else 1.0
        return mask

    # ------------------------------------------------------------------ client reading
    def _lane_slots(self, slots: np.ndarray, width: int) -> np.ndarray:
        """``(per_ciphertext, width)`` slots at the start of every lane."""
        starts = np.array([self.lane_start(j) for j in range(self.per_ciphertext)])
        return slots[starts[:, None] + np.arange(width)[None, :]]

    def block_values(self, slots: np.ndarray) -> np.ndarray:
        """``(blocks_per_ciphertext, τ)``: per query block (``2 · lane + part``) and class
        the count of a decrypted query ciphertext (unscaled: CKKS values still carry
        ``v``)."""
        lanes = self._lane_slots(slots, self._kind.lane_width * self.tau)
        pairs = self._kind.blocks_of_lanes(lanes, self.tau)
        return pairs.reshape(self.blocks_per_ciphertext, self.tau)

    def leaf_counts(self, slots: np.ndarray) -> np.ndarray:
        """``(leaves_per_ciphertext, τ)`` class counts of a decrypted leaf-store ciphertext."""
        lanes = self._lane_slots(slots, self._kind.lane_width * self.tau)
        return self._kind.leaves_of_lanes(lanes, self.tau)

    def row_sums(self, slots: np.ndarray) -> np.ndarray:
        """``(rows_per_sum, τ)`` per-row class sums of a decrypted row-sum ciphertext."""
        z = np.asarray(slots).reshape(self.cycle, self.stride)[:, : self.tau]
        return np.stack([z.real, z.imag], axis=1).reshape(-1, self.tau)
