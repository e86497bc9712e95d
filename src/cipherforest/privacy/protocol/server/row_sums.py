"""Prediction by row sums (CKKS): each test row's leaf class frequencies, summed over the
trees on the server, so the reply is a few ciphertexts instead of every leaf reached.

Leaf ``(t, leaf)`` of store ciphertext ``k`` sits in store lane ``j`` with its class
frequencies ``c / T`` (the server knows the leaf's bootstrap total ``T``: the rows that reach
it and their weights; it weighs the leaf's mask by ``1/T`` when it stores it). Test row ``r``
needs ``Σ_t c_t(r) / T_t(r)``: each of its leaves moved from lane ``j`` to the row's lane
``l`` (:class:`~cipherforest.privacy.he.BlockLayout` documents the layout), a rotation by
``d = j - l``
lanes. With ``d = G·i + b``::

    sum_o = Σ_i rot(Q_oi, G·i),   Q_oi = Σ_{moves} mask(lane j - b, part) ⊙ rot(store_k, b)

Each move is one multiplication by a mask that depends only on the target lane and the part
(real or imaginary) — at most ``2·cycle`` masks, encoded once per prediction — and one
addition.

``rot(store_k, b)`` for ``b < G`` are the baby steps (``G - 1`` rotations per store
ciphertext, each from the previous one), the giant steps run Horner's scheme
(``sum_o = Q_o0 + rot(Q_o1 + rot(Q_o2 + …, G), G)``: ``cycle/G - 1`` rotations per sum
ciphertext). Rotations happen above the last level, before the single rescale, so their
key-switching noise is divided by the rescaling prime; masks cost one level, which the leaf
store keeps for this purpose (:meth:`~cipherforest.privacy.he.PublicContext.finish_leaf_store`).
"""

from __future__ import annotations

import math

import numpy as np

from ...he import BlockLayout, PublicContext

__all__ = ["MAX_CACHED_MASKS", "can_sum_rows", "mask_scale", "row_sum_ciphertexts"]

# The sums land on the last (50-bit) prime: values up to n_trees at the output scale must
# stay below 2^48. A large output scale matters: the final rescale adds noise of ~3e3 in
# scaled units (~3e-6 at 2^30, ~3e-9 at 2^40).
_LAST_PRIME_HEADROOM_BITS = 48
_RESCALE_PRIME_BITS = 40
_MAX_MASK_SCALE_BITS = 50
# Encoded masks kept during one prediction: 2,048 plaintexts of 131 KB (two primes), every
# (lane, part) mask for three or more classes; two classes' 4,096 masks are half cached.
MAX_CACHED_MASKS = 2048


def mask_scale(store_scale: float, n_trees: int) -> float:
    """Encoding scale of the row-sum masks: the largest that keeps the sums in range."""
    output_bits = _LAST_PRIME_HEADROOM_BITS - math.ceil(math.log2(n_trees + 1))
    bits = output_bits - math.log2(store_scale) + _RESCALE_PRIME_BITS
    return 2.0 ** min(_MAX_MASK_SCALE_BITS, int(bits))


def can_sum_rows(context: PublicContext, layout: BlockLayout, stores: list) -> bool:
    """Whether the context's keys and the stores' levels allow row sums."""
    return (context.kind.approximate
            and context.has_rotation(layout.stride, both_ways=False)
            and (layout.giant_step >= layout.cycle
                 or context.has_rotation(layout.giant_step * layout.stride, both_ways=False))
            and all(context.has_level_left(ct) for ct in stores))


def row_sum_ciphertexts(context: PublicContext, layout: BlockLayout, stores: list,
                        positions: np.ndarray) -> list:
    """The row-sum ciphertexts of ``positions.shape[0]`` test rows.

    Parameters
    ----------
    context, layout
        The session's public context and slot layout (CKKS).
    stores : list of Ciphertext
        The finished leaf store (class frequencies), one level above the last.
    positions : ndarray of shape (n_rows, n_trees)
        Store position of the leaf each row reaches in each tree.

    Returns
    -------
    list of Ciphertext
        ``ceil(n_rows / layout.rows_per_sum)`` ciphertexts on the last level.
    """
    n_rows, n_trees = positions.shape
    scale = mask_scale(context.scale_of(stores[0]), n_trees) if stores else 1.0
    n_sums = -(-n_rows // layout.rows_per_sum)
    n_giant = -(-layout.cycle // layout.giant_step)
    partial: list[list] = [[None] * n_giant for _ in range(n_sums)]
    store_of, lane_of = np.divmod(positions.reshape(-1), layout.leaves_per_ciphertext)
    baby, out, giant, lane, part = layout.row_sum_moves(
        lane_of, np.repeat(np.arange(n_rows), n_trees))
    # One mask per (lane, part), encoded once (up to MAX_CACHED_MASKS: 2·cycle of them is
    # 537 MB for two classes): a move is then one multiplication and one addition.
    masks: dict[tuple[int, int], object] = {}
    order = np.lexsort((baby, store_of))
    bounds = np.searchsorted(store_of[order], np.arange(len(stores) + 1))
    for k in range(len(stores)):
        rotated, at = stores[k], 0
        for n in order[bounds[k]: bounds[k + 1]].tolist():
            while at < baby[n]:
                rotated = context.rotate(rotated, layout.stride)
                at += 1
            key = (int(lane[n]), int(part[n]))
            mask = masks.get(key)
            if mask is None:
                mask = context.encode_mask(layout.row_sum_mask(*key), like=rotated, scale=scale)
                if len(masks) < MAX_CACHED_MASKS:
                    masks[key] = mask
            product = context.multiply_mask(rotated, mask)
            o, i = int(out[n]), int(giant[n])
            if partial[o][i] is None:
                partial[o][i] = product
            else:
                context.add_inplace(partial[o][i], product)
    sums = []
    step = layout.giant_step * layout.stride
    for giants in partial:
        acc = None
        for piece in reversed(giants):
            if acc is not None:
                acc = context.rotate(acc, step)
                if piece is not None:
                    context.add_inplace(acc, piece)
            elif piece is not None:
                acc = piece
        sums.append(context.finish_plain(acc))
    return sums
