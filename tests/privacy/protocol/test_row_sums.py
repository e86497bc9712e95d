"""Row sums of the CKKS prediction (privacy/protocol/server/row_sums.py): the baby-step
giant-step moves and masks, checked in the clear against the formula Σ_t frequencies per test row.

The ciphertexts are replaced by their slot vectors (rotation = cyclic shift of the slots,
mask multiplication = slot-wise product), so any leaf placement, row count and tree count
can be tried quickly; tests/privacy/test_private_forest.py runs the same code under CKKS.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cipherforest.privacy.he import BlockLayout
from cipherforest.privacy.protocol.server.row_sums import mask_scale, row_sum_ciphertexts


class SlotContext:
    """What row_sum_ciphertexts asks of a PublicContext, on clear slot vectors."""

    def __init__(self):
        self.rotations = 0

    def rotate(self, ct, step):
        self.rotations += 1
        return np.roll(ct, -step)

    def encode_mask(self, values, like=None, scale=None):
        return np.asarray(values)

    def multiply_mask(self, ct, plain):
        return ct * plain

    def add_inplace(self, acc, ct):
        acc += ct

    def finish_plain(self, ct):
        return ct

    def scale_of(self, ct):
        return 2.0 ** 40


def _store_vectors(layout, counts):
    """Leaf-store slot vectors: leaf ``p``'s values in the real parts of lane ``p % per``."""
    per = layout.leaves_per_ciphertext
    stores = []
    for k in range(-(-counts.shape[0] // per)):
        slots = np.zeros(layout.n_slots, dtype=np.complex128)
        for lane, leaf in enumerate(range(k * per, min((k + 1) * per, counts.shape[0]))):
            start = layout.lane_start(lane)
            slots[start: start + layout.tau] = counts[leaf]
        stores.append(slots)
    return stores


@settings(max_examples=40, deadline=None)
@given(n_classes=st.integers(2, 9), n_rows=st.integers(1, 300), n_trees=st.integers(1, 6),
       pack_rows=st.sampled_from([None, 5, 64]), n_slots=st.sampled_from([64, 256, 4096]),
       seed=st.integers(0, 2**31 - 1))
def test_row_sums_equal_the_formula(n_classes, n_rows, n_trees, pack_rows, n_slots, seed):
    rng = np.random.default_rng(seed)
    layout = BlockLayout("ckks", n_slots, n_classes, 10_000, pack_rows)
    n_leaves = int(rng.integers(n_trees, 3 * layout.leaves_per_ciphertext + n_trees + 1))
    counts = rng.integers(0, 7, size=(n_leaves, n_classes)).astype(np.float64)
    counts[counts.sum(axis=1) == 0, 0] = 1
    frequencies = counts / counts.sum(axis=1, keepdims=True)
    positions = rng.integers(0, n_leaves, size=(n_rows, n_trees))
    context = SlotContext()
    stores = _store_vectors(layout, frequencies)
    sums = row_sum_ciphertexts(context, layout, stores, positions)
    assert len(sums) == -(-n_rows // layout.rows_per_sum)
    got = np.concatenate([layout.row_sums(ct) for ct in sums])[:n_rows]
    expected = frequencies[positions].sum(axis=1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    # The rest of every sum's slots is zero: nothing of other leaves leaks into them.
    rest = np.concatenate([layout.row_sums(ct) for ct in sums])[n_rows:]
    np.testing.assert_array_equal(rest, 0)
    # Baby steps per store ciphertext, Horner's giant steps per sum ciphertext.
    big, cycle = layout.giant_step, layout.cycle
    assert context.rotations <= len(stores) * (big - 1) + len(sums) * (-(-cycle // big) - 1)


@pytest.mark.parametrize(("n_classes", "cycle", "giant"), [(2, 2048, 64), (3, 1024, 32),
                                                          (10, 256, 16), (17, 128, 16)])
def test_giant_step_balances_baby_and_giant_rotations(n_classes, cycle, giant):
    layout = BlockLayout("ckks", 4096, n_classes, 10_000)
    assert (layout.cycle, layout.giant_step, layout.rows_per_sum) == (cycle, giant, 2 * cycle)


@pytest.mark.parametrize(("store_bits", "n_trees", "mask_bits"),
                         [(36, 10, 48), (20, 10, 50), (40, 100, 41), (36, 1000, 42),
                          (30, 10_000, 44)])
def test_mask_scale_keeps_sums_on_the_last_prime(store_bits, n_trees, mask_bits):
    """Output scale 2^(store + mask - 40): n_trees times it stays below 2^48, and the mask
    scale never exceeds 2^50."""
    scale = mask_scale(2.0 ** store_bits, n_trees)
    assert scale == 2.0 ** mask_bits
    assert n_trees * 2.0 ** (store_bits + mask_bits - 40) < 2.0 ** 48


def test_row_sums_with_masks_beyond_the_cache(monkeypatch):
    """More (lane, part) masks than the cache keeps: the rest are encoded per move."""
    import cipherforest.privacy.protocol.server.row_sums as row_sums

    monkeypatch.setattr(row_sums, "MAX_CACHED_MASKS", 3)
    layout = BlockLayout("ckks", 256, 2, 10_000)
    rng = np.random.default_rng(5)
    frequencies = rng.dirichlet(np.ones(2), size=300)
    positions = rng.integers(0, 300, size=(250, 4))
    sums = row_sum_ciphertexts(SlotContext(), layout, _store_vectors(layout, frequencies),
                               positions)
    got = np.concatenate([layout.row_sums(ct) for ct in sums])[:250]
    np.testing.assert_allclose(got, frequencies[positions].sum(axis=1), rtol=0, atol=1e-12)
