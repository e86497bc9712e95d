"""Attacks on the encrypted random forest: what a server learns about the labels and values.

Each attack takes exactly what the adversary holds — the training cipher matrix it received in
``setup``, the protocol messages (a :class:`RecordingServer` captures them during a real
:meth:`PrivateForestClient.fit <cipherforest.privacy.PrivateForestClient.fit>`), the trees it
grew — plus the side knowledge named in its docstring (class counts, one known label per class,
an auxiliary sample of a feature's distribution). The attacker's *guess* is computed by a pure
function of that view alone; the true labels or values enter only in the scoring step, which
returns an :class:`AttackResult` with the success rate next to the majority-class baseline
(the best a guess without the attack achieves).

Attacks (``docs/threat_model.md`` reports what they recover in each mode, measured by
``benchmarks/privacy_attacks.py``):

* :func:`alternation_labels` — binary labels from cipher1 alone: the paper's GIPE merges runs
  of same-label neighbours into one cipher, so along a feature consecutive distinct ciphers
  alternate labels.
* :func:`shared_cipher_labels` — label propagation over rows that share a cipher, one known
  label per class.
* :func:`leaf_union_labels` — the paper's rule answers "leaf" exactly for pure nodes: rows
  sharing a client-declared leaf share a label; union over trees.
* :func:`proximity_matrix`, :func:`proximity_cluster_labels`, :func:`proximity_nearest_labels`
  — what any revealed tree structure leaks: rows that keep landing together share labels.
* :class:`PairOracleServer` / :func:`pair_oracle_attack` — a malicious server asks crafted
  two-row "nodes" and reads "leaf" as "same label".
* :func:`quantile_value_recovery` / :func:`score_value_recovery` — values from cipher ranks
  and an auxiliary sample of the feature's distribution.

:func:`forest_trees` gives a fitted :class:`~cipherforest.ensemble.RandomForestClassifier`'s
trees in the server's format, so the tree attacks run without the protocol.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
from scipy import sparse
from scipy.optimize import linear_sum_assignment
from scipy.sparse.linalg import eigsh
from scipy.stats import rankdata, spearmanr

from .protocol import Message, ProtocolError, decode_message, encode_message

__all__ = [
    "AttackResult",
    "PairOracleResult",
    "PairOracleServer",
    "RecordingServer",
    "Transcript",
    "ValueRecoveryResult",
    "alternation_labels",
    "declared_leaves",
    "forest_trees",
    "known_label_success",
    "leaf_union_labels",
    "majority_baseline",
    "one_known_per_class",
    "pair_oracle_attack",
    "proximity_cluster_labels",
    "proximity_matrix",
    "proximity_nearest_labels",
    "quantile_value_recovery",
    "score_labels",
    "score_value_recovery",
    "server_bootstrap_counts",
    "shared_cipher_labels",
]


# ---------------------------------------------------------------------- results and scoring
@dataclass(frozen=True)
class AttackResult:
    """Success of a label attack.

    Attributes
    ----------
    name : str
    success : float
        Fraction of the scored rows whose label the attack guessed right.
    baseline : float
        Majority-class baseline on the same rows: the fraction a constant guess of the most
        frequent class gets right.
    n_scored : int
        Rows scored (rows whose label the attacker was given are excluded).
    """

    name: str
    success: float
    baseline: float
    n_scored: int

    @property
    def advantage(self) -> float:
        """``success - baseline``: what the attack adds to knowing the class counts."""
        return self.success - self.baseline


def majority_baseline(y) -> float:
    """Fraction of ``y`` equal to its most frequent value."""
    y = np.asarray(y)
    if y.size == 0:
        raise ValueError("majority_baseline needs at least one label")
    _, counts = np.unique(y, return_counts=True)
    return float(counts.max() / y.size)


def score_labels(name: str, guess, y_true, exclude=()) -> AttackResult:
    """Score guessed labels against the truth, leaving out the rows in ``exclude``."""
    guess, y_true = np.asarray(guess), np.asarray(y_true)
    if guess.shape != y_true.shape:
        raise ValueError(f"guess has shape {guess.shape}, y_true {y_true.shape}")
    keep = np.ones(y_true.shape[0], dtype=bool)
    keep[np.asarray(exclude, dtype=np.int64)] = False
    if not keep.any():
        raise ValueError("no row left to score")
    return AttackResult(name, float(np.mean(guess[keep] == y_true[keep])),
                        majority_baseline(y_true[keep]), int(keep.sum()))


def one_known_per_class(y, random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Rows (one per class, drawn at random) whose labels an attacker is given, and those labels.

    Used to *simulate* an attacker's side knowledge; the labels returned are class codes
    ``0 .. n_classes - 1`` in the order of ``np.unique(y)``.
    """
    rng = np.random.default_rng(random_state)
    codes = np.unique(np.asarray(y), return_inverse=True)[1]
    rows = np.array([rng.choice(np.flatnonzero(codes == c)) for c in range(codes.max() + 1)])
    return rows, codes[rows]


def _fallback_class(class_counts) -> int:
    return int(np.argmax(np.asarray(class_counts)))


# ---------------------------------------------------------------------- cipher groups
def _groups(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of each row's distinct cipher in increasing order, and each group's size."""
    _, inverse, counts = np.unique(column, return_inverse=True, return_counts=True)
    return inverse.ravel(), counts


# ---------------------------------------------------------------------- 1. alternation
def alternation_labels(X_cipher, class_counts, *, count_tolerance: float = 0.05) -> np.ndarray:
    """Binary labels guessed from cipher1 alone, by label alternation along every feature.

    The paper's GIPE gives one cipher to each run of same-label neighbours in a feature's
    sorted order, so consecutive distinct ciphers of a feature carry different labels and
    rows sharing a cipher the same label. The attacker writes these as a signed graph on the
    rows — per feature, ``+1/|g|`` between rows of one cipher group ``g`` and
    ``-1/sqrt(|g||h|)`` between rows of consecutive groups ``g, h`` (each group constraint
    counts once whatever its size) — summed over features, and splits the rows by the sign
    of the graph's leading eigenvector (the ±1 assignment that best satisfies the
    constraints, relaxed).

    Naming rule (the attacker knows the class counts ``n_0, n_1``): the side of the split
    whose size is closer to ``n_1`` is named class 1 (on a tie, the side where the
    eigenvector is positive, whose sign is arbitrary: with equal class counts the naming
    is a coin flip). The
    hypothesis "ciphers alternate labels" predicts the split's sizes to be the class counts;
    when the side named class 1 differs from ``n_1`` by more than ``count_tolerance · n``
    rows the attacker rejects the hypothesis and guesses the most frequent class for every
    row (so an attack on label-independent ciphers, whose alternation splits rows about
    evenly, falls back to the majority baseline instead of below it).

    Parameters
    ----------
    X_cipher : array-like of shape (n_samples, n_features)
        The training cipher matrix (the ``setup`` message's ``X``).
    class_counts : array-like of shape (2,)
        Rows of class 0 and class 1.
    count_tolerance : float, default=0.05

    Returns
    -------
    guess : ndarray of int64, shape (n_samples,)
        Class codes 0/1.
    """
    X_cipher = np.asarray(X_cipher)
    counts = np.asarray(class_counts)
    if counts.shape != (2,):
        raise ValueError("alternation_labels needs the counts of exactly two classes")
    n = X_cipher.shape[0]
    if counts.sum() != n:
        raise ValueError(f"class counts sum to {counts.sum()}, the cipher matrix has {n} rows")
    graph = _alternation_graph(X_cipher)
    score = _leading_eigenvector(graph)
    side = score > 0
    if abs(int((~side).sum()) - counts[1]) < abs(int(side.sum()) - counts[1]):
        side = ~side
    if abs(int(side.sum()) - counts[1]) > count_tolerance * n:
        return np.full(n, _fallback_class(counts), dtype=np.int64)
    return side.astype(np.int64)


def _alternation_graph(X_cipher: np.ndarray) -> sparse.csr_matrix:
    """The signed row graph of :func:`alternation_labels` (``G K Gᵀ`` summed over features)."""
    n = X_cipher.shape[0]
    blocks = []
    for j in range(X_cipher.shape[1]):
        group, sizes = _groups(X_cipher[:, j])
        m = sizes.shape[0]
        if m < 2:
            continue
        incidence = sparse.csr_matrix((1.0 / np.sqrt(sizes[group]), (np.arange(n), group)),
                                      shape=(n, m))
        step = sparse.diags(np.ones(m - 1), 1, shape=(m, m))
        kernel = sparse.identity(m) - step - step.T
        blocks.append(incidence @ kernel @ incidence.T)
    if not blocks:
        return sparse.csr_matrix((n, n))
    return sparse.csr_matrix(sum(blocks))


def _leading_eigenvector(graph: sparse.spmatrix) -> np.ndarray:
    """Eigenvector of the largest eigenvalue of a symmetric sparse matrix (Lanczos)."""
    if graph.nnz == 0:
        return np.zeros(graph.shape[0])
    if graph.shape[0] < 3:
        return np.linalg.eigh(graph.toarray())[1][:, -1]
    start = np.random.default_rng(0).standard_normal(graph.shape[0])  # deterministic
    _, vectors = eigsh(graph.astype(np.float64), k=1, which="LA", v0=start)
    return vectors[:, 0]


# ---------------------------------------------------------------------- 2. shared ciphers
def shared_cipher_labels(X_cipher, known_rows, known_labels, class_counts, *,
                         alpha: float = 0.8, prior_weight: float = 1e-3,
                         n_iter: int = 100) -> np.ndarray:
    """Labels propagated over rows that share a cipher, from one known label per class.

    In the paper's GIPE a cipher shared by several rows is (mostly) a run of one label.
    Every group ``g`` of rows sharing a cipher of a feature (a row alone with its cipher
    counts as a group of one) is a hyperedge of weight ``1/|g|``, ``W = Σ_g 1_g 1_gᵀ / |g|``:
    a random walk picks one of the row's features, then a member of its group, so a row
    that shares its cipher in few features mostly stays where it is. Label spreading (Zhou
    et al., 2004) iterates ``F ← α D⁻¹ W F + (1 - α) Y`` from the known rows' one-hot labels
    ``Y``; the restart probability ``1 - α`` keeps the walks short, so labels travel along
    chains of shared ciphers and do not diffuse across the few mixed groups (equal values
    of both labels). Each row takes ``argmax_c F[i, c] + prior_weight · n_c / n`` (the
    attacker knows the class counts ``n_c``): rows the known labels reach only weakly, or
    not at all, keep the most frequent class. Known rows keep their labels.

    Equal plaintext values share a cipher in every mode, and quantile bins are shared by
    similar rows, so on such ciphers this is also semi-supervised learning from ``X``'s
    equality structure, whatever the labels did to the ciphers.

    Parameters
    ----------
    X_cipher : array-like of shape (n_samples, n_features)
    known_rows, known_labels : array-like of int
        Rows whose labels (class codes ``0 .. n_classes - 1``) the attacker knows.
    class_counts : array-like of shape (n_classes,)
    alpha : float, default=0.8
    prior_weight : float, default=1e-3
    n_iter : int, default=100

    Returns
    -------
    guess : ndarray of int64, shape (n_samples,)
    """
    X_cipher = np.asarray(X_cipher)
    n = X_cipher.shape[0]
    columns, weights, offset = [], [], 0
    for j in range(X_cipher.shape[1]):
        group, sizes = _groups(X_cipher[:, j])
        columns.append(group + offset)
        weights.append(1.0 / np.sqrt(sizes[group]))
        offset += sizes.shape[0]
    rows = np.tile(np.arange(n), X_cipher.shape[1])
    incidence = sparse.csr_matrix((np.concatenate(weights), (rows, np.concatenate(columns))),
                                  shape=(n, offset))
    counts = np.asarray(class_counts, dtype=np.float64)
    scores = _spread(incidence, known_rows, known_labels, counts.shape[0], alpha, n_iter)
    guess = np.argmax(scores + prior_weight * counts / counts.sum(), axis=1)
    guess[np.asarray(known_rows, dtype=np.int64)] = known_labels
    return guess.astype(np.int64)


def _spread(incidence: sparse.csr_matrix, known_rows, known_labels, n_classes: int,
            alpha: float, n_iter: int) -> np.ndarray:
    """Label spreading scores on ``W = B Bᵀ`` (``B`` the weighted incidence), never
    forming ``W``."""
    n = incidence.shape[0]
    seeds = np.zeros((n, n_classes))
    seeds[np.asarray(known_rows, dtype=np.int64), np.asarray(known_labels, dtype=np.int64)] = 1
    degree = np.asarray(incidence @ (incidence.T @ np.ones(n))).ravel()
    inverse_degree = np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)
    scores = seeds.copy()
    for _ in range(n_iter):
        spread = inverse_degree[:, None] * (incidence @ (incidence.T @ scores))
        scores = alpha * spread + (1.0 - alpha) * seeds
    return scores


# ---------------------------------------------------------------------- trees
def forest_trees(forest) -> list[dict[str, np.ndarray]]:
    """The structure of a fitted forest's trees in the server's format (``tree_arrays``).

    A :class:`~cipherforest.ensemble.RandomForestClassifier` fitted on cipher1 with clear
    labels grows the trees the encrypted forest's server grows with the same parameters and
    seed, so this is the server's view without running the protocol.
    """
    return [{"children_left": np.asarray(est.tree_.children_left),
             "children_right": np.asarray(est.tree_.children_right),
             "feature": np.asarray(est.tree_.feature),
             "threshold": np.asarray(est.tree_.threshold),
             "n_node_samples": np.asarray(est.tree_.n_node_samples)}
            for est in forest.estimators_]


def _paths(tree: dict, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (row, node) pair of the rows' root-to-leaf paths, and each row's leaf."""
    left = np.asarray(tree["children_left"])
    right = np.asarray(tree["children_right"])
    feature = np.asarray(tree["feature"])
    threshold = np.asarray(tree["threshold"])
    node = np.zeros(X.shape[0], dtype=np.int64)
    rows = np.arange(X.shape[0])
    path_rows, path_nodes = [rows], [node.copy()]
    active = left[node] >= 0
    while active.any():
        idx = rows[active]
        cur = node[idx]
        go_left = X[idx, feature[cur]] <= threshold[cur]
        node[idx] = np.where(go_left, left[cur], right[cur])
        path_rows.append(idx)
        path_nodes.append(node[idx])
        active = left[node] >= 0
    return np.stack([np.concatenate(path_rows), np.concatenate(path_nodes)]), node


# ---------------------------------------------------------------------- 3. leaf union
@dataclass
class Transcript:
    """What the server held after a fit: every message in and out, and its trees."""

    exchanges: list[tuple[Message, Message]] = field(default_factory=list)
    trees: list[dict[str, np.ndarray]] | None = None

    def first(self, kind: str) -> Message:
        """The first received message of ``kind``."""
        for request, _ in self.exchanges:
            if request.kind == kind:
                return request
        raise LookupError(f"the transcript holds no {kind!r} message")

    @property
    def X_cipher(self) -> np.ndarray:
        """The training cipher matrix the ``setup`` message carried."""
        return self.first("setup").arrays["X"]


class RecordingServer:
    """A server that records every message it receives and sends: an honest-but-curious view.

    Wraps a real server (anything with ``handle(bytes) -> bytes``, e.g.
    :class:`~cipherforest.privacy.PrivateForestServer`); pass it as
    ``PrivateForestClient(server=RecordingServer(PrivateForestServer()))``. After the
    ``trained`` reply it also records the trees the server grew (``tree_arrays``).

    Parameters
    ----------
    server
        The wrapped server.
    keep_blobs : bool, default=False
        Keep ciphertext bytes in the recorded messages. No attack reads them (CKKS and BFV
        are semantically secure); by default they are replaced by empty byte strings (their
        count stays) to keep memory small.
    """

    def __init__(self, server, keep_blobs: bool = False):
        self.server = server
        self.keep_blobs = keep_blobs
        self.transcript = Transcript()

    def handle(self, data: bytes) -> bytes:
        reply = self.server.handle(data)
        request, response = decode_message(data), decode_message(reply)
        if not self.keep_blobs:
            for message in (request, response):
                message.blobs = {name: [b""] * len(items) for name, items in
                                 message.blobs.items()}
        self.transcript.exchanges.append((request, response))
        if response.kind == "trained" and hasattr(self.server, "tree_arrays"):
            self.transcript.trees = self.server.tree_arrays(response.meta["session"])
        return reply


def server_bootstrap_counts(setup: Message) -> np.ndarray:
    """Bootstrap counts of every tree, shape (n_estimators, n_samples), from the setup message.

    The server derives them deterministically from the forest seed and parameters the client
    sends (its label-free planning, :class:`~cipherforest.privacy.protocol.planner.ForestGrowth`).
    """
    from .protocol.params import ForestSpec
    from .protocol.planner import ForestGrowth

    X = setup.arrays["X"]
    growth = ForestGrowth(X, ForestSpec.from_meta(setup.meta, X.shape[0], X.shape[1]))
    return np.stack([growth.weights(t) for t in range(len(growth.trees))])


def declared_leaves(transcript: Transcript) -> list[tuple[int, int]]:
    """(tree, node) pairs the client answered "leaf" (-1) although the server had asked.

    A node is in a query only when public rules (depth, sample counts, a valid candidate)
    let it split, so "leaf" there is the client's own decision: under the paper's rule,
    a pure node (or one without gain).
    """
    leaves = []
    for request, _ in transcript.exchanges:
        if request.kind != "answer":
            continue
        choice = request.arrays["choice"]
        for t, node in zip(request.arrays["tree"][choice < 0].tolist(),
                           request.arrays["node"][choice < 0].tolist(), strict=True):
            leaves.append((t, node))
    return leaves


def leaf_union_labels(X_cipher, trees, leaves, bootstrap, known_rows, known_labels,
                      class_counts) -> np.ndarray:
    """Labels from client-declared leaves: their in-bag rows share a label; union over trees.

    The bootstrap rows of each declared leaf (rows with a positive bootstrap count routed to
    it) are merged into one component (union-find). A component holding known rows of
    exactly one class gets that class; every other row (in no declared leaf, or in a
    component with no or conflicting known labels) gets the most frequent class of
    ``class_counts``.

    Parameters
    ----------
    X_cipher : ndarray of shape (n_samples, n_features)
    trees : list of dict
        The server's trees (``PrivateForestServer.tree_arrays``).
    leaves : list of (tree, node)
        :func:`declared_leaves`.
    bootstrap : ndarray of shape (n_trees, n_samples)
        :func:`server_bootstrap_counts`.
    known_rows, known_labels, class_counts
        As in :func:`shared_cipher_labels`.

    Returns
    -------
    guess : ndarray of int64, shape (n_samples,)
    """
    X_cipher = np.asarray(X_cipher, dtype=np.float64)
    n = X_cipher.shape[0]
    parent = np.arange(n)

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    by_tree: dict[int, list[int]] = {}
    for t, node in leaves:
        by_tree.setdefault(t, []).append(node)
    for t, nodes in by_tree.items():
        _, leaf_of = _paths(trees[t], X_cipher)
        in_bag = bootstrap[t] > 0
        for node in nodes:
            members = np.flatnonzero((leaf_of == node) & in_bag)
            if members.shape[0] != trees[t]["n_node_samples"][node]:
                raise ValueError(f"tree {t}, node {node}: {members.shape[0]} in-bag rows "
                                 f"reach it, the server's tree says "
                                 f"{trees[t]['n_node_samples'][node]}: wrong bootstrap")
            root = find(int(members[0]))
            for row in members[1:].tolist():
                parent[find(row)] = root
    roots = np.array([find(i) for i in range(n)])
    guess = np.full(n, _fallback_class(class_counts), dtype=np.int64)
    for root in np.unique(roots[np.asarray(known_rows)]):
        labels = set(np.asarray(known_labels)[roots[np.asarray(known_rows)] == root].tolist())
        if len(labels) == 1 and (roots == root).sum() > 1:
            guess[roots == root] = labels.pop()
    guess[np.asarray(known_rows)] = known_labels
    return guess


# ---------------------------------------------------------------------- 4. proximity
def proximity_matrix(trees, X_cipher) -> np.ndarray:
    """Rows' root-path proximity: depth of their last common node, averaged over trees.

    Two rows' paths share the root and every node down to where they part; the depth of
    the last shared node is the number of shared nodes minus one. With ``M`` the rows ×
    (all trees' nodes) path incidence, ``P = (M Mᵀ - T) / T`` for ``T`` trees.

    Returns
    -------
    P : ndarray of shape (n_samples, n_samples)
    """
    X_cipher = np.asarray(X_cipher, dtype=np.float64)
    n = X_cipher.shape[0]
    rows, nodes, offset = [], [], 0
    for tree in trees:
        (path_rows, path_nodes), _ = _paths(tree, X_cipher)
        rows.append(path_rows)
        nodes.append(path_nodes + offset)
        offset += len(tree["children_left"])
    rows, nodes = np.concatenate(rows), np.concatenate(nodes)
    incidence = sparse.csr_matrix((np.ones(rows.shape[0]), (rows, nodes)), shape=(n, offset))
    shared = (incidence @ incidence.T).toarray()
    return (shared - len(trees)) / len(trees)


def _name_by_counts(clusters: np.ndarray, class_counts) -> np.ndarray:
    """Clusters named so that their sizes best match the class counts.

    The cluster-to-class assignment minimising ``Σ |cluster size - class count|`` (Hungarian
    algorithm; the attacker knows only the counts).
    """
    counts = np.asarray(class_counts)
    ids, sizes = np.unique(clusters, return_counts=True)
    cost = np.abs(sizes[:, None] - counts[None, :]).astype(np.float64)
    row, col = linear_sum_assignment(cost)
    names = np.full(ids.shape[0], _fallback_class(counts), dtype=np.int64)
    names[row] = col
    return names[np.searchsorted(ids, clusters)]


def proximity_cluster_labels(proximity, class_counts, random_state=None) -> np.ndarray:
    """Labels from spectral clustering of the proximity matrix, named by class counts.

    Normalised spectral clustering (Ng, Jordan and Weiss, 2001) of the affinity ``P`` into
    ``k = len(class_counts)`` clusters: the ``k`` leading eigenvectors of
    ``D^(-1/2) P D^(-1/2)``, rows scaled to unit length, then k-means; each cluster is named
    by the class whose count its size matches (:func:`_name_by_counts`). With classes of
    equal size the naming is a guess: the attack then needs known labels
    (:func:`proximity_nearest_labels`).
    """
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    affinity = np.asarray(proximity, dtype=np.float64)
    k = len(class_counts)
    degree = affinity.sum(axis=1)
    scale = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), where=degree > 0)
    normalised = scale[:, None] * affinity * scale[None, :]
    start = np.random.default_rng(0).standard_normal(affinity.shape[0])
    _, vectors = eigsh(normalised, k=k, which="LA", v0=start)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    embedding = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    # Small problem: one thread (OpenMP workers spinning on a loaded machine cost seconds).
    with threadpool_limits(limits=1):
        clusters = KMeans(n_clusters=k, n_init=10,
                          random_state=random_state).fit_predict(embedding)
    return _name_by_counts(clusters, class_counts)


def proximity_nearest_labels(proximity, known_rows, known_labels) -> np.ndarray:
    """Each row takes the label of the known row it is closest to (largest proximity).

    Ties go to the first known row in ``known_rows`` order.
    """
    proximity = np.asarray(proximity)
    known_rows = np.asarray(known_rows, dtype=np.int64)
    guess = np.asarray(known_labels)[np.argmax(proximity[:, known_rows], axis=1)]
    guess[known_rows] = known_labels
    return guess.astype(np.int64)


def known_label_success(X_cipher, proximity, y, draws: int = 1,
                        seed: int = 0) -> tuple[float, float]:
    """Mean success of the shared-cipher and nearest-by-proximity attacks over ``draws``
    draws of the one known row per class (seeds ``seed .. seed + draws - 1``); the known rows
    are not scored. Returns ``(shared cipher, proximity nearest)``."""
    counts = np.bincount(y)
    shared, nearest = [], []
    for draw in range(draws):
        rows, labels = one_known_per_class(y, seed + draw)
        shared.append(score_labels(
            "shared", shared_cipher_labels(X_cipher, rows, labels, counts), y, rows).success)
        nearest.append(score_labels(
            "nearest", proximity_nearest_labels(proximity, rows, labels), y, rows).success)
    return float(np.mean(shared)), float(np.mean(nearest))


# ---------------------------------------------------------------------- 5. pair oracle
@dataclass(frozen=True)
class PairOracleResult:
    """Outcome of the pair-oracle attack.

    Attributes
    ----------
    refused : bool
        The client refused the crafted query (raised ``ProtocolError``).
    success : float
        Fraction of probed rows whose "same label as the reference row?" the attack answered
        right (``nan`` when refused).
    baseline : float
        The better constant answer ("all same" or "all different") on the probed rows.
    n_probed : int
    error : str
        The client's error message when it refused.
    """

    refused: bool
    success: float
    baseline: float
    n_probed: int
    error: str = ""


class PairOracleServer:
    """A malicious server: one crafted round of two-row nodes ``{reference, i}``.

    It forwards ``setup`` and ``labels`` to the real server. When the client asks to
    ``train`` it answers, instead of the real first query, a query of fake nodes: node ``i``
    of tree 0 holds the reference row and row ``i`` (weight 1 each) and one candidate that
    separates them on a feature where their ciphers differ. The packed squared sums are
    computed homomorphically from the client's own label ciphertexts, so they decrypt
    correctly: a node is pure exactly when the two labels are equal, and under the paper's
    rule the client answers "leaf" (-1) exactly then. The real first query (the real server
    got the ``train`` message) is held back and sent after the answer; the real protocol
    then runs on and the client's ``fit`` returns normally.

    Parameters
    ----------
    server : PrivateForestServer
        The real server (its session state is read, as a server would).
    reference_row : int, default=0

    Attributes
    ----------
    crafted_query : Message or None
        The fake query, once sent (node ids are the probed rows).
    same_as_reference : dict[int, bool]
        After the crafted round: row -> the client's answer read as "same label".

    Notes
    -----
    :class:`~cipherforest.privacy.PrivateForestClient` replays the server's label-free plan
    and refuses this query (its nodes are not the forest's): the attack then ends with the
    client's ``ProtocolError``.
    """

    def __init__(self, server, reference_row: int = 0):
        self.server = server
        self.reference_row = reference_row
        self.same_as_reference: dict[int, bool] = {}
        self.crafted_query: Message | None = None
        self._held_reply: bytes | None = None
        self._token = ""
        self._session_id = ""

    def handle(self, data: bytes) -> bytes:
        message = decode_message(data)
        if message.kind == "train" and self._held_reply is None:
            self._held_reply = self.server.handle(data)  # the real first query, held back
            self._session_id = message.meta["session"]
            self.crafted_query = self._crafted_query()
            return encode_message(self.crafted_query)
        if (message.kind == "answer" and self._token
                and message.meta.get("token") == self._token):
            choice = message.arrays["choice"]
            for row, c in zip(message.arrays["node"].tolist(), choice.tolist(), strict=True):
                self.same_as_reference[row] = c < 0
            self._token = ""
            return self._held_reply
        return self.server.handle(data)

    def _crafted_query(self) -> Message:
        # The real server's packing, reused as is: what a malicious server would run.
        from .protocol.planner import Candidate, NodePlan, OpenNode, midpoint
        from .protocol.server.level import level_part

        session = self.server.session(self._session_id)
        X = session.X
        n = X.shape[0]
        ref = self.reference_row
        ones = np.ones(n, dtype=np.int64)
        fake = SimpleNamespace(context=session.context, layout=session.layout,
                               label_copy=session.label_copy, spec=session.spec,
                               n_classes=session.n_classes,
                               growth=SimpleNamespace(weights=lambda t: ones))
        plans = []
        for i in range(n):
            differs = np.flatnonzero(X[ref] != X[i])
            if i == ref or differs.shape[0] == 0:
                continue
            f = int(differs[0])
            low, high = (ref, i) if X[ref, f] < X[i, f] else (i, ref)
            pair = np.array([low, high])
            candidate = Candidate(f, float(X[low, f]),
                                  midpoint(float(X[low, f]), float(X[high, f])), 1, 1)
            plans.append(NodePlan(0, OpenNode(i, np.sort(pair), 0, 0), 2, [pair],
                                  [[candidate]]))
        _, blobs, positions = level_part(fake, [], plans, 0, serialize=False)
        self._token = secrets.token_hex(8)
        meta = {"session": self._session_id, "round": 1, "token": self._token, "shift": 0,
                "block_size": session.block_size,
                "blocks_per_ciphertext": session.blocks_per_ciphertext}
        k = len(plans)
        arrays = {"tree": np.zeros(k, dtype=np.int64),
                  "node": np.array([p.node.node_id for p in plans], dtype=np.int64),
                  "weight": np.full(k, 2, dtype=np.int64),
                  "tree_weight": np.full(k, 2, dtype=np.int64),
                  "n_candidates": np.ones(k, dtype=np.int64),
                  "left_weight": np.ones(k, dtype=np.int64),
                  "block_position": np.asarray(positions, dtype=np.int64)}
        return Message("query", meta, arrays, {"counts": blobs})


def pair_oracle_attack(client, X, y, reference_row: int = 0) -> PairOracleResult:
    """Fit a clone of ``client`` against a :class:`PairOracleServer` and score its answers.

    ``y`` is given to the client (it is the data owner's fit); the attacker's guesses are
    the client's answers, scored against ``y[i] == y[reference_row]``.
    """
    from sklearn.base import clone

    from .protocol import PrivateForestServer

    oracle = PairOracleServer(PrivateForestServer(), reference_row)
    y = np.asarray(y)
    try:
        clone(client).set_params(server=oracle).fit(X, y)
    except ProtocolError as exc:
        truth = np.delete(y == y[reference_row], reference_row)
        return PairOracleResult(True, float("nan"), max(truth.mean(), 1 - truth.mean()), 0,
                                str(exc))
    rows = np.array(sorted(oracle.same_as_reference), dtype=np.int64)
    guess = np.array([oracle.same_as_reference[r] for r in rows.tolist()])
    truth = y[rows] == y[reference_row]
    return PairOracleResult(False, float(np.mean(guess == truth)),
                            float(max(truth.mean(), 1 - truth.mean())), int(rows.shape[0]))


# ---------------------------------------------------------------------- 6. values
@dataclass(frozen=True)
class ValueRecoveryResult:
    """Success of the quantile attack on one or more features (means over features).

    Attributes
    ----------
    within : float
        Fraction of values recovered within ``tolerance`` of the feature's range.
    baseline_within : float
        The same for the constant guess "the auxiliary sample's median".
    rank_correlation : float
        Spearman correlation of recovered and true values.
    tolerance : float
    """

    within: float
    baseline_within: float
    rank_correlation: float
    tolerance: float


def quantile_value_recovery(cipher_column, auxiliary) -> np.ndarray:
    """Values guessed from a cipher column's ranks and an auxiliary sample of the feature.

    Rows are ranked by cipher (rows sharing a cipher get their average rank ``r``) and each
    gets the auxiliary sample's ``(r - 1/2) / n`` quantile: what an order-revealing
    encryption gives away to an attacker who knows the distribution.
    """
    ciphers = np.asarray(cipher_column).ravel()
    auxiliary = np.asarray(auxiliary, dtype=np.float64).ravel()
    if auxiliary.size == 0:
        raise ValueError("the auxiliary sample is empty")
    quantiles = (rankdata(ciphers, method="average") - 0.5) / ciphers.shape[0]
    return np.quantile(auxiliary, quantiles)


def score_value_recovery(X_cipher, X_true, X_auxiliary, tolerance: float = 0.05
                         ) -> ValueRecoveryResult:
    """:func:`quantile_value_recovery` on every feature, scored against the true values."""
    X_cipher, X_true = np.asarray(X_cipher), np.asarray(X_true, dtype=np.float64)
    X_auxiliary = np.asarray(X_auxiliary, dtype=np.float64)
    within, base, rho = [], [], []
    for j in range(X_true.shape[1]):
        x = X_true[:, j]
        span = x.max() - x.min()
        if span == 0:
            continue
        guess = quantile_value_recovery(X_cipher[:, j], X_auxiliary[:, j])
        within.append(np.mean(np.abs(guess - x) <= tolerance * span))
        base.append(np.mean(np.abs(np.median(X_auxiliary[:, j]) - x) <= tolerance * span))
        rho.append(spearmanr(guess, x).statistic if np.ptp(guess) > 0 else 0.0)
    if not within:
        raise ValueError("every feature is constant")
    return ValueRecoveryResult(float(np.mean(within)), float(np.mean(base)),
                               float(np.mean(rho)), tolerance)
