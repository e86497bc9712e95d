"""Label rotations: what the server holds per training row, and the sums over them.

A label pack (``rows_per_pack`` rows' one-hot labels, row ``b`` in lane ``b``) is expanded
into its rotations by the lane offsets the running sums need
(:meth:`~...he.BlockLayout.offsets`; one key switch each, from its neighbour), so that adding
a row's label into a sum bound to any lane is one ciphertext addition into one of the sum's
*rotation parts* (:mod:`...he.blocks` documents the layout). With full packs that is
``1/P`` ciphertext per row: 128 KiB with BFV (two 60-bit primes, P = 2), 96 KiB with CKKS
(three primes, P = 4).

:class:`LabelRotations` holds the rotations of a contiguous range of packs: every pack of a
session on one server, or one shard of them on a Dask worker
(:mod:`.dask_levels`). :class:`DrawSums` and :func:`leaf_sums` are the additions every level
is made of; the query packing is in :mod:`.level`.
"""

from __future__ import annotations

import numpy as np

from ...he import BlockLayout, PublicContext

__all__ = ["DrawSums", "LabelRotations", "LeafJob", "add_into", "join_parts",
           "lane_rotations", "leaf_sums"]

# CKKS leaves are stored as class frequencies (counts / T, at most 1): at scale 2^48 they fit
# the 50-bit prime of a leaf reply, and the store's rescale noise (~3e3 in scaled units) is
# ~1e-11 of a frequency.
_CKKS_STORE_SCALE_BITS = 48


def lane_rotations(context: PublicContext, layout: BlockLayout, pack) -> dict[int, object]:
    """A label pack rotated by every lane offset the running sums need (one key switch per
    rotation, each from its neighbour), prepared for mask multiplication."""
    offsets = layout.offsets()
    copies = {0: pack}
    every = layout.parts > 1 or len(offsets) == layout.cycle  # offsets 0 .. k - 1
    forward = [d for d in offsets if 0 < d and (every or d <= layout.rows_per_pack - 1)]
    for d in forward:
        copies[d] = context.rotate(copies[d - 1], layout.stride)
    for d in sorted((d for d in offsets if d not in copies), reverse=True):
        previous = copies[(d + 1) % layout.cycle]
        copies[d] = context.rotate(previous, -layout.stride)
    return {d: context.prepare(ct) for d, ct in copies.items()}


class LabelRotations:
    """The lane rotations of packs ``first_pack, first_pack + 1, ...`` (appended in order).

    Parameters
    ----------
    context : PublicContext
    layout : BlockLayout
    first_pack : int, default=0
        Index of the first pack held: rows ``first_pack * rows_per_pack`` on.
    """

    def __init__(self, context: PublicContext, layout: BlockLayout, first_pack: int = 0):
        self.context = context
        self.layout = layout
        self.first_pack = int(first_pack)
        self.packs: list[dict[int, object]] = []

    @property
    def next_pack(self) -> int:
        """The index of the pack :meth:`add_pack` takes next."""
        return self.first_pack + len(self.packs)

    def add_pack(self, pack) -> None:
        """Expand a validated, freshly encrypted pack into its rotations and keep them."""
        self.packs.append(lane_rotations(self.context, self.layout, pack))

    def add_packs(self, first_pack: int, packs: list, blobs: list[bytes]) -> None:
        """Add consecutive packs from ``first_pack`` on (``blobs``: their bytes, which a
        server holding the rotations itself does not keep)."""
        if first_pack != self.next_pack:
            raise ValueError(f"pack {first_pack} arrives where pack {self.next_pack} is due")
        for pack in packs:
            self.add_pack(pack)

    def copy(self, row: int, lane_position: int) -> tuple[int, object]:
        """``(part, rotation)``: the held rotation holding ``row``'s one-hot label in lane
        ``lane_position`` of rotation part ``part`` (:meth:`BlockLayout.copy_index`)."""
        pack, b = divmod(int(row), self.layout.rows_per_pack)
        part, d = self.layout.copy_index(b, lane_position)
        return part, self.packs[pack - self.first_pack][d]

    def nbytes(self) -> int:
        """Bytes of the held ciphertexts' coefficients (2 polynomials × N × primes × 8)."""
        return sum(_ciphertext_bytes(ct) for copies in self.packs for ct in copies.values())

    def clear(self) -> None:
        self.packs = []


def _ciphertext_bytes(ct) -> int:
    return int(ct.size()) * int(ct.poly_modulus_degree()) * int(ct.coeff_modulus_size()) * 8


class DrawSums:
    """A running sum of label rotations per rotation part, each row added as often as it was
    drawn. A row drawn ``k`` times goes ``k mod 2`` times into the part's *once* sum and
    ``k // 2`` times into its *twice* sum, which counts double: one addition fewer per row
    drawn two or more times (~28 % of a bootstrap's draws are such repeats), at the price of
    a copy and two additions when the total is read: worth it for sums read rarely
    (``pairs``), otherwise every draw is one addition. Other lanes hold garbage the masks
    remove."""

    def __init__(self, context: PublicContext, n_parts: int, pairs: bool = True):
        self.context = context
        self.pairs = pairs
        self.once: list = [None] * n_parts
        self.twice: list = [None] * n_parts

    def add_rows(self, label_copy, rows: np.ndarray, counts: np.ndarray,
                 lane_position: int) -> None:
        """Add each of ``rows``' labels bound to ``lane_position``, ``counts[i]`` times."""
        context, once, twice = self.context, self.once, self.twice
        for row, k in zip(rows.tolist(), counts.tolist(), strict=True):
            part, ct = label_copy(row, lane_position)
            split = ((once, k & 1), (twice, k >> 1)) if self.pairs else ((once, k),)
            for sums, times in split:
                for _ in range(times):
                    if sums[part] is None:
                        sums[part] = context.copy(ct)
                    else:
                        context.add_inplace(sums[part], ct)

    def totals(self) -> list:
        """Per part the sum (None where nothing was added); a ciphertext the caller must
        not change in place."""
        out = []
        for once, twice in zip(self.once, self.twice, strict=True):
            if twice is None:
                out.append(once)
                continue
            total = self.context.copy(twice)
            self.context.add_inplace(total, twice)
            if once is not None:
                self.context.add_inplace(total, once)
            out.append(total)
        return out

    def rotate(self, step: int) -> None:
        """Move the sums ``step`` slots (one rotation per part: twice is folded in)."""
        self.once = [None if t is None else self.context.rotate(t, step)
                     for t in self.totals()]
        self.twice = [None] * len(self.once)


def add_into(context: PublicContext, target: dict | list, key, ct) -> None:
    """``target[key] += ct`` (``ct`` itself where ``target[key]`` is absent or None)."""
    current = target.get(key) if isinstance(target, dict) else target[key]
    if current is None:
        target[key] = ct
    else:
        context.add_inplace(current, ct)


def join_parts(context: PublicContext, layout: BlockLayout, parts: list):
    """One ciphertext from per-rotation-part ciphertexts (part ``i`` holds its values
    ``i · span`` lanes along): ``Σ_i rot(parts[i], i · span)`` by Horner's scheme, None
    parts skipped (None if all are)."""
    step = layout.span * layout.stride
    acc = None
    for ct in reversed(parts):
        if acc is not None:
            acc = context.rotate(acc, step)
        if ct is not None:
            if acc is None:
                acc = ct
            else:
                context.add_inplace(acc, ct)
    return acc


class LeafJob:
    """One leaf's sum: store ciphertext ``index``, position ``position`` in it, the rows
    (with their bootstrap draws) whose labels it adds and the leaf's total draws ``T``
    (CKKS stores frequencies, so its mask carries ``1/T``)."""

    __slots__ = ("counts", "index", "position", "rows", "total")

    def __init__(self, index: int, position: int, rows: np.ndarray, counts: np.ndarray,
                 total: int):
        self.index, self.position, self.total = int(index), int(position), int(total)
        self.rows, self.counts = rows, counts


def leaf_sums(context: PublicContext, layout: BlockLayout, label_copy,
              jobs: list[LeafJob]) -> dict[int, object]:
    """The leaves' counts masked into their leaf-store lanes, summed per store ciphertext
    (unfinished partial sums by store index; rotation parts joined).

    A leaf's mask depends on its position in its store ciphertext, the rotation part and
    (CKKS) its total draws ``T``; encoding one costs about three times the multiplication
    it serves. Leaves are taken in order of (position, ``T``), and the masks of the last
    (position, ``T``) are kept: leaves at one position of several stores with equal ``T``
    share them (:func:`.level.store_order` places leaves so), and at most one mask per
    rotation part is held. The order changes no sum but the order CKKS adds in.
    """
    parts: dict[int, list] = {}
    ckks = context.kind.approximate
    scale = (2.0 ** _CKKS_STORE_SCALE_BITS * context.scale / context.label_scale
             if ckks else None)
    masks: dict[int, object] = {}
    masks_of = None
    for job in sorted(jobs, key=lambda job: (job.position, job.total)):
        sums = DrawSums(context, layout.parts)
        sums.add_rows(label_copy, job.rows, job.counts,
                      layout.lane_position(layout.leaf_lane(job.position)))
        if masks_of != (job.position, job.total if ckks else 0):
            masks_of = (job.position, job.total if ckks else 0)
            masks = {}
        for part, total in enumerate(sums.totals()):
            if total is None:  # none of this leaf's rows are held here in this part
                continue
            if part not in masks:
                mask = layout.leaf_mask(job.position, part)
                if ckks:
                    mask = mask / float(job.total)
                masks[part] = context.encode_mask(mask, scale=scale)
            product = context.multiply_mask(total, masks[part])
            add_into(context, parts.setdefault(job.index, [None] * layout.parts), part,
                     product)
    return {index: join_parts(context, layout, cts) for index, cts in parts.items()}
