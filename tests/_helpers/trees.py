"""Comparing fitted trees array by array."""

from __future__ import annotations

import numpy as np

#: The arrays of a fitted ``Tree`` that define it (structure, splits, node statistics).
TREE_ARRAYS = ("children_left", "children_right", "feature", "threshold", "impurity",
               "n_node_samples", "weighted_n_node_samples", "missing_go_to_left", "value")


def assert_same_tree(a, b, skip: tuple[str, ...] = ()) -> None:
    """Assert two ``Tree`` objects (``estimator.tree_`` or a grower's tree) hold equal
    arrays, naming the first that differs; ``skip`` names arrays left out."""
    for name in TREE_ARRAYS:
        if name not in skip:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def assert_same_forests(a, b, skip: tuple[str, ...] = ()) -> None:
    """Assert two fitted forests have as many trees and equal trees, in order."""
    assert len(a.estimators_) == len(b.estimators_)
    for tree_a, tree_b in zip(a.estimators_, b.estimators_, strict=True):
        assert_same_tree(tree_a.tree_, tree_b.tree_, skip)
