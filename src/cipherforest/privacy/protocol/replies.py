"""The client's reading of what the server sends back encrypted, each value checked.

Decrypted values must be what the client's own keys and labels can produce: class counts
whose left parts fit within their node's totals, row sums of class frequencies
over the trees, leaf counts that add up to the leaves' bootstrap draws. Anything else was
made under another key, corrupted, or (CKKS, very large nodes) ran out of precision, and is
refused with a :class:`~.messages.ProtocolError` before any decision is taken from it.
"""

from __future__ import annotations

import numpy as np

from ..he import BlockLayout, HEError, SecretContext
from .decisions import squares_of_counts
from .messages import Message, ProtocolError

__all__ = ["CKKS_SUM_TOLERANCE", "CKKS_TARGET_TOLERANCE", "CKKS_TIE_TOLERANCE", "decrypt_blob",
           "leaf_counts", "query_counts", "query_squares", "query_sums", "row_sums"]

# CKKS returns class counts with an error far below this; more means a wrong key or a
# corrupted ciphertext, not rounding.
CKKS_INTEGER_TOLERANCE = 0.25
# Row sums (predict_proba) carry CKKS noise of ~1e-6 per tree (measured); this bound per
# tree flags a wrong key or a corrupted ciphertext, whose slots are far off.
CKKS_SUM_TOLERANCE = 1e-4
# Probabilities from row sums closer than this count as tied in predict. Their noise comes
# from the labels' rotations (leaf frequencies in the store: median 1.9e-7, max 5.7e-7 on
# pendigits) and reached 7.6e-7 in probability with 5 trees (benchmarks/row_sums.py
# noise); two classes' probabilities that truly differ differ by far more
# (1 / (n_trees · T · T') for leaf draws T, T').
CKKS_TIE_TOLERANCE = 1e-5
# A regression query's blocks hold sums of (y', y'²), y' the target scaled to [0, 1], at
# 2^-shift (as counts are); decrypted and unscaled they differ from the exact sums by the
# CKKS error times 2^shift: at most 1.6e-5 · 2^shift on diabetes (442 rows) and 3.6e-5 ·
# 2^shift on friedman1 (5,000 rows), over every block of 3-tree fits 8 levels deep. A
# difference beyond this times 2^shift is a forged or corrupted ciphertext, not rounding.
CKKS_TARGET_TOLERANCE = 1e-3


def integers(values: np.ndarray, what: str, source: str) -> np.ndarray:
    """CKKS results that must be integers, rounded; a larger residue is not rounding error."""
    rounded = np.rint(values)
    if np.abs(values - rounded).max(initial=0.0) > CKKS_INTEGER_TOLERANCE:
        raise ProtocolError(f"decrypted {what} are not integers: {source} not made with "
                            "this client's key or corrupted, or CKKS ran out of precision "
                            "(scheme='bfv' is exact)")
    return rounded


def decrypt_blob(he: SecretContext, blob: bytes, where: str,
                 complex_slots: bool = False) -> np.ndarray:
    """One ciphertext of a reply, decrypted; foreign or broken bytes name ``where``."""
    try:
        ct = he.load_ciphertext(blob)
    except HEError as exc:
        raise ProtocolError(f"{where}: {exc}") from None
    return he.decrypt(ct, complex_slots=complex_slots)


def query_counts(he: SecretContext, layout: BlockLayout, query: Message) -> np.ndarray:
    """``(blocks, τ)`` class counts a query carries, decrypted, in query order: per node,
    each candidate's left counts ``L`` and then the node's total ``T``; exact integers
    (BFV exactly, CKKS rounded within :data:`CKKS_INTEGER_TOLERANCE`)."""
    values, shift = _query_blocks(he, layout, query)
    if he.kind.approximate:
        counts = integers(values * 2.0 ** shift, "class counts", "the query was")
    else:  # BFV decodes residues as signed; counts are below t (the server's setup)
        counts = np.mod(values, he.plain_modulus)
    if (counts < 0).any():
        raise ProtocolError("decrypted class counts are negative: the query was not made "
                            "with this client's key or is corrupted")
    return counts


def query_sums(he: SecretContext, layout: BlockLayout, query: Message) -> np.ndarray:
    """``(blocks, τ)`` real sums a CKKS query carries (a regression target's statistics,
    :func:`~.decisions.target_statistics`), decrypted and unscaled, in query order as
    :func:`query_counts`; not rounded: the caller compares them with its own sums within
    :data:`CKKS_TARGET_TOLERANCE`."""
    if not he.kind.approximate:
        raise ProtocolError("query: real-valued sums come from CKKS sessions only")
    values, shift = _query_blocks(he, layout, query)
    return values * 2.0 ** shift


def _query_blocks(he: SecretContext, layout: BlockLayout,
                  query: Message) -> tuple[np.ndarray, int]:
    """The decrypted blocks of a query in query order (CKKS: still times ``2^-shift``),
    and its shift, after checking the query's layout and block positions."""
    shift = query.value("shift", int)
    if (query.value("block_size", int), query.value("blocks_per_ciphertext", int)) != (
            layout.block_size, layout.blocks_per_ciphertext):
        raise ProtocolError("query: block layout differs from this client's "
                            f"({layout.block_size} slots × {layout.blocks_per_ciphertext})")
    if not 0 <= shift <= 60:
        raise ProtocolError(f"query: shift {shift} out of range")
    ciphertexts = query.blob_list("counts")
    positions = query.array("block_position", "int64", 1)
    n_candidates = query.array("n_candidates", "int64", 1)
    n_blocks = int((n_candidates + 1).sum())
    if (n_candidates < 1).any() or positions.shape[0] != n_blocks:
        raise ProtocolError(f"query: {positions.shape[0]} block positions for "
                            f"{int(n_candidates.sum())} candidates and "
                            f"{n_candidates.shape[0]} node totals (each node needs >= 1 "
                            "candidate)")
    per_ct = layout.blocks_per_ciphertext
    n_places = len(ciphertexts) * per_ct
    if positions.size and (positions.min() < 0 or positions.max() >= n_places
                           or np.unique(positions).shape[0] != positions.shape[0]):
        raise ProtocolError(f"query: block positions must be distinct blocks of the "
                            f"{len(ciphertexts)} ciphertexts")
    values = np.zeros((max(n_places, 1), layout.tau))
    for i, blob in enumerate(ciphertexts):
        slots = decrypt_blob(he, blob, "query", complex_slots=True)
        values[i * per_ct: (i + 1) * per_ct] = layout.block_values(slots)
    return values[positions], shift  # (blocks, τ) in query order


def query_squares(he: SecretContext, layout: BlockLayout, query: Message) -> np.ndarray:
    """Per candidate in query order ``(ΣL², ΣR²)`` as exact integers, each node's candidates
    followed by its total block ``(ΣT², 0)`` (:func:`query_counts`,
    :func:`~.decisions.squares_of_counts`)."""
    return squares_of_counts(query_counts(he, layout, query),
                             query.array("n_candidates", "int64", 1))


def row_sums(he: SecretContext, layout: BlockLayout, reply: Message, n_rows: int,
             n_trees: int) -> np.ndarray:
    """``(rows, τ)`` per-row sums over trees of leaf class frequencies (CKKS), checked:
    every frequency is in [0, 1] per tree, and each row's sum over classes is the number of
    trees."""
    if reply.value("rows_per_sum", int) != layout.rows_per_sum:
        raise ProtocolError("scores: row-sum layout differs from this client's "
                            f"({layout.rows_per_sum} rows per ciphertext)")
    blobs = reply.blob_list("sums")
    if len(blobs) != -(-n_rows // layout.rows_per_sum):
        raise ProtocolError(f"scores: {len(blobs)} row-sum ciphertexts for {n_rows} rows")
    sums = np.concatenate([layout.row_sums(decrypt_blob(he, blob, "scores", complex_slots=True))
                           for blob in blobs])[:n_rows] if blobs else np.zeros((0, layout.tau))
    tolerance = CKKS_SUM_TOLERANCE * n_trees
    if (sums < -tolerance).any() or (sums > n_trees + tolerance).any() or \
            (np.abs(sums.sum(axis=1) - n_trees) > tolerance).any():
        raise ProtocolError("decrypted row sums are not sums of class frequencies over "
                            f"{n_trees} trees: the scores were not made with this client's "
                            "key or are corrupted")
    return np.clip(sums, 0.0, None)


def leaf_counts(he: SecretContext, layout: BlockLayout, reply: Message, n_rows: int,
                n_trees: int) -> np.ndarray:
    """``(rows, trees, τ)`` leaf class counts from a scores reply: the leaf-store
    ciphertexts decrypted once, each (row, tree) reading its leaf's position."""
    if reply.value("leaves_per_ciphertext", int) != layout.leaves_per_ciphertext:
        raise ProtocolError("scores: leaf layout differs from this client's "
                            f"({layout.leaves_per_ciphertext} leaves per ciphertext)")
    blobs = reply.blob_list("leaves")
    positions = reply.array("leaf", "int32", 2)
    if positions.shape != (n_rows, n_trees):
        raise ProtocolError(f"scores: leaf positions have shape {positions.shape}, "
                            f"expected {(n_rows, n_trees)}")
    n_leaves = len(blobs) * layout.leaves_per_ciphertext
    if positions.size and (positions.min() < 0 or positions.max() >= n_leaves):
        raise ProtocolError(f"scores: leaf positions must lie in [0, {n_leaves})")
    table = np.zeros((max(n_leaves, 1), layout.tau))
    for i, blob in enumerate(blobs):
        rows = slice(i * layout.leaves_per_ciphertext, (i + 1) * layout.leaves_per_ciphertext)
        table[rows] = layout.leaf_counts(decrypt_blob(he, blob, "scores", complex_slots=True))
    draws = reply.array("draws", "int32", 2)
    if draws.shape != (n_rows, n_trees):
        raise ProtocolError(f"scores: leaf draws have shape {draws.shape}, expected "
                            f"{(n_rows, n_trees)}")
    if he.kind.approximate:  # the store holds frequencies: counts / draws
        counts = integers(table[positions] * draws[:, :, None], "leaf counts",
                          "the scores were")
    else:  # signed residues: leaf counts are below t (the server's setup)
        counts = np.mod(table[positions], he.plain_modulus)
    if (counts.sum(axis=2) != draws).any():
        raise ProtocolError("scores: decrypted leaf counts do not add up to the leaves' "
                            "bootstrap draws: the scores were not made with this client's "
                            "key or are corrupted")
    return counts.astype(np.float64)
