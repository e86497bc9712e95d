"""Exact split finders for multi-output targets and the absolute-error criterion.

The single-output finder (``_splitter_exact``) keeps one stats vector per node. Here a node
holds ``n_outputs`` targets, so its stats vector is laid out as ``[weight, count, block_0,
block_1, ...]``: one block of ``block`` criterion statistics per output, in the layout
``_criteria`` uses for one output (class weights; sum(w*y), sum(w*y*y); poisson's four). A
criterion's impurity is the mean over outputs of the single-output impurity of each block,
as in scikit-learn. The absolute error is not additive: its nodes keep only weight and count
(``block = 0``) and splits are scored from prefix and suffix absolute errors
(``_absolute_error``).

Both finders read the presorted layout of ``_splitter_exact`` (node segment
``[start, end)`` of ``sorted_index[f]``, NaN last) and fill the same split record fields as
it (``SPLIT_FEATURE`` to ``SPLIT_CHILDREN``) plus the children's sample counts.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._absolute_error import prefix_abs_errors
from ._candidates import fill_right_child
from ._common import FEATURE_THRESHOLD, LEAF_JIT_OPTIONS, STAT_COUNT, STAT_FIRST, STAT_WEIGHT
from ._criteria import add_sample, node_impurity, weighted_impurity
from ._rng import rand_uniform
from ._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_FEATURE,
    SPLIT_MISSING_LEFT,
    SPLIT_POSITION,
    SPLIT_THRESHOLD,
)
from ._splitter_exact import _midpoint, n_non_missing

#: Children's sample counts, after the shared split record fields.
GSPLIT_N_LEFT = 5
GSPLIT_N_RIGHT = 6
GSPLIT_SIZE = 7


@njit(**LEAF_JIT_OPTIONS)
def add_sample_outputs(stats, Y, sample, w, criterion, block, scratch):
    """Add sample ``Y[sample]`` (one target per output) with weight ``w`` to ``stats``."""
    stats[STAT_WEIGHT] += w
    stats[STAT_COUNT] += 1.0
    for o in range(Y.shape[1]):
        for k in range(scratch.shape[0]):
            scratch[k] = 0.0
        add_sample(scratch, Y[sample, o], w, criterion)
        base = STAT_FIRST + o * block
        for k in range(block):
            stats[base + k] += scratch[STAT_FIRST + k]


@njit(**LEAF_JIT_OPTIONS)
def _load_block(stats, o, block, scratch):
    scratch[STAT_WEIGHT] = stats[STAT_WEIGHT]
    scratch[STAT_COUNT] = stats[STAT_COUNT]
    base = STAT_FIRST + o * block
    for k in range(block):
        scratch[STAT_FIRST + k] = stats[base + k]


@njit(**LEAF_JIT_OPTIONS)
def node_impurity_outputs(stats, criterion, n_outputs, block, scratch):
    """Mean over outputs of each output's impurity (additive criteria)."""
    total = 0.0
    for o in range(n_outputs):
        _load_block(stats, o, block, scratch)
        total += node_impurity(scratch, criterion)
    return total / n_outputs


@njit(**LEAF_JIT_OPTIONS)
def _children_impurity_outputs(left, right, node, criterion, n_outputs, block,
                               min_samples_leaf, min_weight_leaf, scratch):
    if not fill_right_child(left, right, node, min_samples_leaf, min_weight_leaf):
        return np.inf
    total = 0.0
    for o in range(n_outputs):
        _load_block(left, o, block, scratch)
        total += weighted_impurity(scratch, criterion)
        _load_block(right, o, block, scratch)
        total += weighted_impurity(scratch, criterion)
    return total / n_outputs


@njit(**LEAF_JIT_OPTIONS)
def monotonic_values_allowed(value_left, value_right, cst, lower, upper):
    """scikit-learn's monotonicity check of a candidate on a constrained feature (``cst`` +1
    increasing, -1 decreasing, 0 free): both children's values lie in the node's
    ``[lower, upper]`` and are ordered as ``cst`` says."""
    if cst == 0:
        return True
    if value_left < lower or value_right < lower or value_left > upper or value_right > upper:
        return False
    return (value_left - value_right) * cst <= 0.0


@njit(**LEAF_JIT_OPTIONS)
def monotonic_allowed(left, right, cst, lower, upper):
    """``monotonic_values_allowed`` for additive stats: a child's value is its first
    statistic over its weight (the mean target, or the proportion of class 0)."""
    if cst == 0:
        return True
    return monotonic_values_allowed(left[STAT_FIRST] / left[STAT_WEIGHT],
                                    right[STAT_FIRST] / right[STAT_WEIGHT], cst, lower, upper)


@njit(**LEAF_JIT_OPTIONS)
def _record(split, feature, position, missing_left, children, threshold, n_left, n_right):
    split[SPLIT_FEATURE] = feature
    split[SPLIT_POSITION] = position
    split[SPLIT_MISSING_LEFT] = missing_left
    split[SPLIT_CHILDREN] = children
    split[SPLIT_THRESHOLD] = threshold
    split[GSPLIT_N_LEFT] = n_left
    split[GSPLIT_N_RIGHT] = n_right


@njit(**LEAF_JIT_OPTIONS)
def _feature_range(feature, start, end, sorted_value, is_random, rng_state):
    """``(n_valid, usable, splittable, draw)``: non-missing count, whether the feature can
    split the node at all (a threshold or NaN), whether a threshold exists, and the random
    splitter's threshold (drawn as ``_splitter_exact`` draws it, only for usable features)."""
    n_valid = n_non_missing(sorted_value, feature, start, end)
    if n_valid == 0:
        return n_valid, False, False, 0.0
    lo = sorted_value[feature, start]
    hi = sorted_value[feature, start + n_valid - 1]
    splittable = hi > lo + FEATURE_THRESHOLD
    if not splittable and start + n_valid == end:
        return n_valid, False, False, 0.0
    draw = 0.0
    if is_random and hi > lo:
        draw = rand_uniform(rng_state, lo, hi)
        if draw >= hi:
            draw = lo
    return n_valid, True, splittable, draw


@njit(**LEAF_JIT_OPTIONS)
def best_split_outputs_feature(feature, start, end, sorted_index, sorted_value, Y, w,
                               criterion, block, node, min_samples_leaf, min_weight_leaf,
                               is_random, rng_state, split, cum, missing, left, right,
                               scratch, scratch_block, cst, lower, upper):
    """Additive criteria over several outputs: ``_splitter_exact.best_split_exact_feature``
    with per-output blocks, and candidates filtered by ``monotonic_allowed`` (single output)
    when ``cst`` is not 0. Returns False when the feature is constant in the node."""
    n_outputs = Y.shape[1]
    n_valid, usable, splittable, draw = _feature_range(feature, start, end, sorted_value,
                                                       is_random, rng_state)
    if not usable:
        return False
    stop = start + n_valid
    has_missing = stop < end
    missing[:] = 0.0
    for i in range(stop, end):
        sample = sorted_index[feature, i]
        add_sample_outputs(missing, Y, sample, w[sample], criterion, block, scratch_block)
    cum[:] = 0.0
    unseen = MISSING_UNSEEN if not has_missing else 0.0
    if splittable:
        for i in range(start, stop - 1):
            sample = sorted_index[feature, i]
            add_sample_outputs(cum, Y, sample, w[sample], criterion, block, scratch_block)
            v_next = sorted_value[feature, i + 1]
            v = sorted_value[feature, i]
            if v_next <= v + FEATURE_THRESHOLD:
                continue
            if is_random and not (v <= draw < v_next):
                continue
            threshold = draw if is_random else _midpoint(v, v_next)
            position = i + 1 - start
            c = _children_impurity_outputs(cum, right, node, criterion, n_outputs, block,
                                           min_samples_leaf, min_weight_leaf, scratch)
            if c < split[SPLIT_CHILDREN] and monotonic_allowed(cum, right, cst, lower, upper):
                _record(split, feature, position, unseen, c, threshold, cum[STAT_COUNT],
                        right[STAT_COUNT])
            if has_missing:
                for k in range(cum.shape[0]):
                    left[k] = cum[k] + missing[k]
                c = _children_impurity_outputs(left, right, node, criterion, n_outputs,
                                               block, min_samples_leaf, min_weight_leaf,
                                               scratch)
                if (c < split[SPLIT_CHILDREN]
                        and monotonic_allowed(left, right, cst, lower, upper)):
                    _record(split, feature, position, 1.0, c, threshold, left[STAT_COUNT],
                            right[STAT_COUNT])
            if is_random:
                break
    if has_missing:
        for k in range(cum.shape[0]):
            left[k] = node[k] - missing[k]
        c = _children_impurity_outputs(left, right, node, criterion, n_outputs, block,
                                       min_samples_leaf, min_weight_leaf, scratch)
        if c < split[SPLIT_CHILDREN] and monotonic_allowed(left, right, cst, lower, upper):
            _record(split, feature, n_valid, 0.0, c, np.inf, left[STAT_COUNT],
                    right[STAT_COUNT])
    return True


@njit(**LEAF_JIT_OPTIONS)
def _allowed(n_left, w_left, n_right, w_right, min_samples_leaf, min_weight_leaf):
    if n_left < min_samples_leaf or n_right < min_samples_leaf:
        return False
    if w_left < min_weight_leaf or w_right < min_weight_leaf:
        return False
    return w_left > 0.0 and w_right > 0.0


@njit(**LEAF_JIT_OPTIONS)
def best_split_absolute_feature(feature, start, end, sorted_index, sorted_value, Y, w,
                                node_weight, min_samples_leaf, min_weight_leaf, is_random,
                                rng_state, split, rank_of, sorted_y, tree_w, tree_wy, seq,
                                err_left, err_right, err_left_missing, err_right_missing,
                                medians, cst, lower, upper):
    """Absolute error: score every threshold of one feature from prefix/suffix errors.

    With the non-missing samples ``A`` (sorted by the feature) and missing ones ``B``:
    ``err_left[k]`` is the error of ``A[:k+1]``, ``err_right[k]`` of the last ``k+1`` of
    ``A``; with NaN present ``err_left_missing[k]`` is that of ``B`` followed by ``A``'s
    first ``k+1-|B|`` and ``err_right_missing[k]`` of ``B`` with ``A``'s last ``k+1-|B|``.
    Errors are summed over outputs; ``rank_of[o]`` / ``sorted_y[o]`` rank the node's targets
    (``_absolute_error.node_ranks``). ``medians[0..3]`` receive the matching medians (of the
    last output: monotonic constraints, single output only, compare the children's medians).
    Returns False when the feature is constant.
    """
    n_outputs = Y.shape[1]
    n = end - start
    n_valid, usable, splittable, draw = _feature_range(feature, start, end, sorted_value,
                                                       is_random, rng_state)
    if not usable:
        return False
    stop = start + n_valid
    n_missing = end - stop
    for k in range(n):
        err_left[k] = 0.0
        err_right[k] = 0.0
        err_left_missing[k] = 0.0
        err_right_missing[k] = 0.0
    for o in range(n_outputs):
        for k in range(n_valid):
            seq[k] = sorted_index[feature, start + k]
        prefix_abs_errors(seq, n_valid, Y, o, w, rank_of[o], sorted_y[o], n, tree_w, tree_wy,
                          err_left, medians[0])
        for k in range(n_valid):
            seq[k] = sorted_index[feature, stop - 1 - k]
        prefix_abs_errors(seq, n_valid, Y, o, w, rank_of[o], sorted_y[o], n, tree_w, tree_wy,
                          err_right, medians[1])
        if n_missing > 0:
            for k in range(n_missing):
                seq[k] = sorted_index[feature, stop + k]
            for k in range(n_valid):
                seq[n_missing + k] = sorted_index[feature, start + k]
            prefix_abs_errors(seq, n, Y, o, w, rank_of[o], sorted_y[o], n, tree_w, tree_wy,
                              err_left_missing, medians[2])
            for k in range(n_valid):
                seq[n_missing + k] = sorted_index[feature, stop - 1 - k]
            prefix_abs_errors(seq, n, Y, o, w, rank_of[o], sorted_y[o], n, tree_w, tree_wy,
                              err_right_missing, medians[3])
    missing_weight = 0.0
    for i in range(stop, end):
        missing_weight += w[sorted_index[feature, i]]
    unseen = MISSING_UNSEEN if n_missing == 0 else 0.0
    # Weighted impurity of a child = its summed absolute error / n_outputs.
    scale = 1.0 / n_outputs
    if splittable:
        w_left = 0.0
        for i in range(start, stop - 1):
            w_left += w[sorted_index[feature, i]]
            v_next = sorted_value[feature, i + 1]
            v = sorted_value[feature, i]
            if v_next <= v + FEATURE_THRESHOLD:
                continue
            if is_random and not (v <= draw < v_next):
                continue
            threshold = draw if is_random else _midpoint(v, v_next)
            p = i + 1 - start  # non-missing samples going left
            n_right_valid = n_valid - p
            w_right_valid = node_weight - missing_weight - w_left
            if n_missing > 0:
                right_err = err_right_missing[n_missing + n_right_valid - 1]
                right_median = medians[3, n_missing + n_right_valid - 1]
            else:
                right_err = err_right[n_right_valid - 1]
                right_median = medians[1, n_right_valid - 1]
            if _allowed(p, w_left, n - p, node_weight - w_left, min_samples_leaf,
                        min_weight_leaf):
                c = (err_left[p - 1] + right_err) * scale
                if c < split[SPLIT_CHILDREN] and monotonic_values_allowed(
                        medians[0, p - 1], right_median, cst, lower, upper):
                    _record(split, feature, p, unseen, c, threshold, p, n - p)
            if n_missing > 0 and _allowed(p + n_missing, w_left + missing_weight,
                                          n_right_valid, w_right_valid, min_samples_leaf,
                                          min_weight_leaf):
                c = (err_left_missing[n_missing + p - 1] + err_right[n_right_valid - 1]) * scale
                if c < split[SPLIT_CHILDREN] and monotonic_values_allowed(
                        medians[2, n_missing + p - 1], medians[1, n_right_valid - 1], cst,
                        lower, upper):
                    _record(split, feature, p, 1.0, c, threshold, p + n_missing,
                            n_right_valid)
            if is_random:
                break
    if n_missing > 0 and _allowed(n_valid, node_weight - missing_weight, n_missing,
                                  missing_weight, min_samples_leaf, min_weight_leaf):
        c = (err_left[n_valid - 1] + err_left_missing[n_missing - 1]) * scale
        if c < split[SPLIT_CHILDREN] and monotonic_values_allowed(
                medians[0, n_valid - 1], medians[2, n_missing - 1], cst, lower, upper):
            _record(split, feature, n_valid, 0.0, c, np.inf, n_valid, n_missing)
    return True
