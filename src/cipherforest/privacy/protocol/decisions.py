"""The client's split decisions from decrypted squared class counts.

Given, per planned node, ``(ΣL², ΣR²)`` of every candidate and ``ΣT²`` of the node (what the
client decrypts, or what the simulator computes in the clear), :func:`decide_splits` answers
each node with a candidate index — the paper's Gini choice (:func:`choose_splits`), with
pure nodes hidden behind a random candidate unless ``reveal_leaves``, or a label-DP draw by
the exponential mechanism (:func:`exponential_mechanism`). Every squared sum is checked to lie
in the range the node's weight allows before it is used, so a wrong key or a corrupted query
cannot pass as counts.
"""

from __future__ import annotations

import numpy as np

from ..dp import ExponentialMechanism
from .messages import ProtocolError
from .planner import ForestGrowth, NodePlan, plan_fields
from .selections import selection

__all__ = ["check_counts", "choose_splits", "clear_counts", "clear_squares", "decide_splits",
           "differing_nodes",
           "exponential_mechanism", "grow_levels", "grow_on_labels", "node_scores",
           "squares_of_counts", "target_statistics", "variance_splits"]

_EPSILON = np.finfo(np.float64).eps


def node_scores(squares: np.ndarray, weight: np.ndarray, n_candidates: np.ndarray,
                 left_weight: np.ndarray, n_classes: int):
    """Per node: ``(index, W, ΣT², children)`` with ``children[c] = W_l - ΣL²/W_l + W_r -
    ΣR²/W_r`` (the weighted children impurity of candidate ``c``), after checking that the
    decrypted squares can be this node's (a wrong key or corruption cannot pass)."""
    n_nodes = weight.shape[0]
    expected_blocks = n_nodes + int(n_candidates.sum())
    if squares.shape[0] < expected_blocks:
        raise ProtocolError(f"query describes {expected_blocks} blocks, its ciphertexts "
                            f"hold {squares.shape[0]}")
    block = 0
    cand = 0
    for i in range(n_nodes):
        w = float(weight[i])
        k = int(n_candidates[i])
        sq = squares[block: block + k]
        sq_total = squares[block + k, 0]
        w_left = left_weight[cand: cand + k].astype(np.float64)
        block += k + 1
        cand += k
        # Σ over classes of squared counts lies in [W²/τ, W²] for W rows: anything else did
        # not come from this client's labels (another key, corruption).
        if (not w * w / n_classes - 0.5 <= sq_total <= w * w
                or (sq[:, 0] > w_left ** 2).any() or (sq[:, 1] > (w - w_left) ** 2).any()
                or (sq[:, 0] < w_left ** 2 / n_classes - 0.5).any()
                or (sq[:, 1] < (w - w_left) ** 2 / n_classes - 0.5).any()):
            raise ProtocolError("decrypted squared counts are out of range for the node's "
                                "weight: the query was not made with this client's key or "
                                "is corrupted")
        w_right = w - w_left
        children = (w_left - sq[:, 0] / w_left) + (w_right - sq[:, 1] / w_right)
        yield i, w, sq_total, children


def choose_splits(squares: np.ndarray, weight: np.ndarray, tree_weight: np.ndarray,
                  n_candidates: np.ndarray, left_weight: np.ndarray,
                  n_classes: int) -> np.ndarray:
    """The paper's decision per node: index of the best candidate, or -1 for a leaf.

    Parameters
    ----------
    squares : ndarray of shape (n_blocks, 2)
        Decrypted blocks in query order: per node, one ``(ΣL², ΣR²)`` block per candidate
        followed by the node's total block ``(ΣT², 0)``; exact integers.
    weight, tree_weight, n_candidates : ndarray of shape (n_nodes,)
        Node weight ``W``, its tree's root weight, number of candidates.
    left_weight : ndarray of shape (n_candidates_total,)
        Left child weight ``W_l`` of every candidate.
    n_classes : int
        τ; with the weights it bounds every squared sum (a check against wrong keys).

    Returns
    -------
    choice : ndarray of int64
        As the plaintext grower decides: a pure node (Gini ≤ eps) is a leaf; otherwise the
        candidate with the smallest weighted children impurity
        ``W_l - ΣL²/W_l + W_r - ΣR²/W_r`` (first in the server's order on ties), unless it
        does not decrease the impurity.
    """
    choice = np.full(weight.shape[0], -1, dtype=np.int64)
    for i, w, sq_total, children in node_scores(squares, weight, n_candidates, left_weight,
                                                  n_classes):
        impurity = 1.0 - sq_total / (w * w)
        if impurity <= _EPSILON or children.shape[0] == 0:
            continue
        best = int(np.argmin(children))
        improvement = (w * impurity - children[best]) / float(tree_weight[i])
        if improvement + _EPSILON < 0.0:
            continue
        choice[i] = best
    return choice


def target_statistics(y: np.ndarray) -> np.ndarray:
    """``(n, 2)`` rows ``(y', y'²)`` of the targets scaled to ``y' = (y - min) / (max -
    min)`` in [0, 1] (0 for a constant target): what a regression query sums, its
    running sums the squared-error criterion's statistics (Σw·y', Σw·y'²). The scale is
    the client's (from its own targets); only the argmax of the variance rule matters,
    which the scaling keeps."""
    y = np.asarray(y, dtype=np.float64)
    low, span = float(y.min(initial=0.0)), float(np.ptp(y)) if y.size else 0.0
    scaled = (y - low) / span if span > 0 else np.zeros_like(y)
    return np.stack([scaled, scaled * scaled], axis=1)


def variance_splits(blocks: np.ndarray, weight: np.ndarray, tree_weight: np.ndarray,
                    n_candidates: np.ndarray, left_weight: np.ndarray) -> np.ndarray:
    """The exact variance rule per node, the regression analogue of :func:`choose_splits`:
    index of the candidate maximising ``S_l²/W_l + S_r²/W_r`` (the least within-node
    squared error of the children), or -1 where the plaintext grower stops.

    Parameters
    ----------
    blocks : ndarray of shape (n_blocks, 2)
        Per node, one ``(S_l, Q_l) = (Σw·y, Σw·y²)`` block per candidate's left side,
        then the node's total ``(S, Q)`` (:func:`clear_counts` of
        :func:`target_statistics`); ``R = T - L``.
    weight, tree_weight, n_candidates, left_weight
        As :func:`choose_splits`.

    Returns
    -------
    choice : ndarray of int64
        -1 for a node whose targets are constant (squared error <= eps per unit weight) or
        whose best candidate does not decrease it; the first best candidate on ties.
    """
    choice = np.full(weight.shape[0], -1, dtype=np.int64)
    if blocks.shape[0] != weight.shape[0] + int(np.sum(n_candidates)):
        raise ProtocolError(f"query describes {weight.shape[0] + int(np.sum(n_candidates))} "
                            f"blocks, the sums hold {blocks.shape[0]}")
    block = cand = 0
    for i in range(weight.shape[0]):
        w, k = float(weight[i]), int(n_candidates[i])
        left, total = blocks[block: block + k, 0], blocks[block + k]
        w_left = left_weight[cand: cand + k].astype(np.float64)
        block += k + 1
        cand += k
        parent = total[0] * total[0] / w
        if k == 0 or total[1] - parent <= _EPSILON * w:
            continue
        right = total[0] - left
        proxy = left * left / w_left + right * right / (w - w_left)
        best = int(np.argmax(proxy))
        if (proxy[best] - parent) / float(tree_weight[i]) + _EPSILON < 0.0:
            continue
        choice[i] = best
    return choice


def _plan_arrays(growth: ForestGrowth, plans: list[NodePlan]):
    """Per planned node its weight, its tree's root weight and its candidate count, and
    every candidate's left weight: the public half of a decision."""
    fields = plan_fields(growth, plans)
    return (fields["weight"], fields["tree_weight"], fields["n_candidates"],
            fields["left_weight"])


def decide_splits(growth: ForestGrowth, plans: list[NodePlan], squares: np.ndarray,
                  n_classes: int, split_selection: str, reveal_leaves: bool,
                  label_epsilon: float | None, rng) -> np.ndarray:
    """The client's answer for the planned nodes of one round, from their squared counts:
    the selection's decision (:meth:`.selections.SplitSelection.decide`).

    ``"gini"`` takes the paper's choice (:func:`choose_splits`); unless ``reveal_leaves``, a
    node the paper would close ("leaf") gets a uniformly random candidate instead. ``"dp"``
    draws by the exponential mechanism with ε = ``label_epsilon``. ``rng`` is a
    ``random.Random``-like source (the client uses the OS's).
    """
    return selection(split_selection).decide(growth, plans, squares, n_classes,
                                             reveal_leaves, label_epsilon, rng)


def exponential_mechanism(squares: np.ndarray, weight: np.ndarray, n_candidates: np.ndarray,
                          left_weight: np.ndarray, n_classes: int, epsilon: float,
                          sensitivity: np.ndarray, rng) -> np.ndarray:
    """Label-DP split choice per node: candidate ``c`` with probability proportional to
    ``exp(ε·u_c / (2Δ))``, ``u_c`` the negated weighted children impurity
    (:class:`~cipherforest.privacy.dp.ExponentialMechanism`, one ε-label-DP choice per node).
    """
    mechanism = ExponentialMechanism(epsilon)
    choice = np.empty(weight.shape[0], dtype=np.int64)
    for i, _, _, children in node_scores(squares, weight, n_candidates, left_weight,
                                         n_classes):
        choice[i] = mechanism.choose(-children, float(sensitivity[i]), rng)
    return choice


# ---------------------------------------------------------------------- counts in the clear
def clear_counts(plans: list[NodePlan], onehot: np.ndarray, weights_of) -> np.ndarray:
    """``(blocks, τ)`` the class counts a query of ``plans`` carries, computed in the clear:
    per node, each candidate's weighted left counts ``L`` in the server's order, then the
    node's total ``T``. ``onehot`` is ``(n_samples, τ)``, ``weights_of(t)`` tree ``t``'s
    bootstrap counts. The client compares them with what it decrypts; the simulator and the
    randomized-response server decide from them."""
    blocks = []
    for plan in plans:
        weights = weights_of(plan.tree)
        total = None
        for order, cands in zip(plan.orders, plan.candidates, strict=True):
            running = np.cumsum(onehot[order] * weights[order, None], axis=0)
            total = running[-1]
            blocks.append(running[[c.end - 1 for c in cands]])
        blocks.append(total[None, :])
    return np.concatenate(blocks) if blocks else np.zeros((0, onehot.shape[1]))


def squares_of_counts(counts: np.ndarray, n_candidates: np.ndarray) -> np.ndarray:
    """Per candidate ``(ΣL², ΣR²)`` and per node ``(ΣT², 0)``, in query order, from the
    blocks' class counts (``R = T - L``, checked to be a count)."""
    blocks, start = [], 0
    for k in np.asarray(n_candidates).tolist():
        left, total = counts[start: start + k], counts[start + k]
        right = total - left
        if (right < 0).any():
            raise ProtocolError("query: a candidate's left counts exceed its node's class "
                                "totals: not made with this client's key or corrupted")
        blocks.append(np.stack([(left ** 2).sum(axis=1), (right ** 2).sum(axis=1)], axis=1))
        blocks.append([[float((total ** 2).sum()), 0.0]])
        start += k + 1
    return np.concatenate(blocks) if blocks else np.zeros((0, 2))


def clear_squares(plans: list[NodePlan], onehot: np.ndarray, weights_of) -> np.ndarray:
    """The decrypted query blocks of ``plans`` in the clear: per node ``(ΣL², ΣR²)`` for
    every candidate in the server's order, then ``(ΣT², 0)``."""
    return squares_of_counts(clear_counts(plans, onehot, weights_of),
                             [p.n_candidates for p in plans])


def differing_nodes(plans: list[NodePlan], decrypted: np.ndarray, expected: np.ndarray,
                    tolerance: np.ndarray | float = 0.0) -> list[tuple[int, int, str]]:
    """``(tree, node id, what)`` of every planned node whose decrypted class counts differ
    from ``expected`` (the client's own) by more than ``tolerance`` (per block, or one
    number: 0 for exact counts), ``what`` naming its first differing block."""
    if decrypted.shape != expected.shape:
        raise ProtocolError(f"query: {decrypted.shape[0]} count blocks, the plan has "
                            f"{expected.shape[0]}")
    wrong = (np.abs(decrypted - expected) > np.reshape(tolerance, (-1, 1))).any(axis=1)
    found, start = [], 0
    for plan in plans:
        k = plan.n_candidates
        bad = np.flatnonzero(wrong[start: start + k + 1])
        if bad.size:
            first = int(bad[0])
            found.append((plan.tree, plan.node.node_id,
                          f"candidate {first}" if first < k else "its total"))
        start += k + 1
    return found


def check_counts(plans: list[NodePlan], decrypted: np.ndarray, expected: np.ndarray,
                 tolerance: np.ndarray | float = 0.0) -> None:
    """Refuse the round unless every decrypted class count is the client's own (within
    ``tolerance`` per block: the CKKS error of a regression query's real sums; 0 for
    counts, which are exact integers).

    The client holds the labels and replays the plan, so it knows each candidate's left
    counts and each node's total; a server that substituted ciphertext contents (to turn
    the client's choice into a question about one row) is caught here, before any choice
    is made from the round. Raises :class:`ProtocolError` naming the first node and
    candidate that differ.

    This is the paper's flow (``decide_from="server"``): the refusal itself depends on the
    labels, so a server that swaps rows learns one label bit from it; by default the client
    decides from its own counts and only records the difference (:func:`differing_nodes`).
    """
    wrong = differing_nodes(plans, decrypted, expected, tolerance)
    if wrong:
        tree, node, what = wrong[0]
        raise ProtocolError(
            f"query: the server's class counts for node {node} of tree {tree} ({what}) "
            f"differ from the counts of the client's own labels ({len(wrong)} nodes "
            "differ): the ciphertexts were not computed as the protocol says; round refused")


def grow_levels(growth: ForestGrowth, decide) -> list:
    """Grow every tree of ``growth`` level by level, all trees at once, as the rounds do:
    ``decide(plans)`` returns a choice per planned node (negative: a leaf). Returns the
    ``(tree, leaf node)`` pairs."""
    leaves = []
    while any(tree.open for tree in growth.trees):
        plans = []
        for t, tree in enumerate(growth.trees):
            if tree.open:
                tree_plans, rule_leaves = growth.plan_tree(t)
                plans.extend(tree_plans)
                leaves.extend((t, node) for node in rule_leaves)
        if not plans:
            break
        choices = np.asarray(decide(plans), dtype=np.int64)
        leaves.extend((p.tree, p.node) for p in growth.apply_level(plans, choices.tolist()))
    return leaves


def grow_on_labels(growth: ForestGrowth, onehot: np.ndarray) -> list:
    """Grow every tree of ``growth`` by the paper's Gini rule on labels known in the clear
    (randomized-response labels on the server, any labels in the simulator); returns the
    ``(tree, leaf node)`` pairs. Nodes pure in these labels are leaves."""
    def decide(plans):
        squares = clear_squares(plans, onehot, growth.weights)
        return choose_splits(squares, *_plan_arrays(growth, plans), onehot.shape[1])

    return grow_levels(growth, decide)
