"""Attacks on the encrypted forest (cipherforest.privacy.attacks): controls both ways.

Positive controls: in the paper's mode (label-dependent GIPE, the client's "leaf" answers for
pure nodes) the attacks recover labels far above the majority-class baseline, as measured in
issue #9. Negative controls: with labels unrelated to what the adversary sees (ciphers
of permuted labels, forests grown on random labels, transcripts without declared leaves) they
fall to the baseline; with label-independent ciphers (``mode="order"`` / ``"quantile"``) the
cipher attacks gain nothing from the labels. Small oracles pin the building blocks (naming
rule, proximity formula, value quantiles).
"""

from __future__ import annotations

import itertools
import random
import secrets

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_wine

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import (
    GiniPreservingEncryptor,
    PrivateForestClient,
    PrivateForestServer,
    ProtocolError,
    attacks,
)
from cipherforest.privacy.protocol.decisions import choose_splits
from cipherforest.privacy.protocol.replies import query_squares

TOLERANCE = 0.05  # "falls to the baseline": within 5 points


@pytest.fixture(scope="module")
def cancer():
    return load_breast_cancer(return_X_y=True)


@pytest.fixture(scope="module")
def wine():
    return load_wine(return_X_y=True)


@pytest.fixture(scope="module")
def digits():
    return load_digits(return_X_y=True)


def _ciphers(X, y, mode: str, seed: int = 0) -> np.ndarray:
    return GiniPreservingEncryptor(mode=mode, random_state=seed).fit_transform(X, y)


def _permuted(y, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).permutation(y)


# ---------------------------------------------------------------------- scoring helpers
def test_score_labels_and_baseline():
    result = attacks.score_labels("x", [0, 1, 1, 0, 1], [0, 1, 0, 0, 0], exclude=[0])
    assert result.success == pytest.approx(2 / 4)  # rows 1..4: right on 1 and 3
    assert result.baseline == pytest.approx(3 / 4)
    assert result.n_scored == 4
    assert result.advantage == pytest.approx(-0.25)
    with pytest.raises(ValueError, match="shape"):
        attacks.score_labels("x", [0, 1], [0, 1, 1])


def test_one_known_per_class_gives_one_row_of_each_class():
    y = np.array(["b", "a", "c", "a", "b", "c", "c"])
    rows, labels = attacks.one_known_per_class(y, random_state=0)
    codes = np.unique(y, return_inverse=True)[1]
    assert sorted(labels.tolist()) == [0, 1, 2]
    assert np.array_equal(codes[rows], labels)


# ---------------------------------------------------------------------- 1. alternation
def test_alternation_oracle_and_naming_rule():
    # One feature, runs of labels 0 0 | 1 | 0 0 0 | 1 1 with one cipher per run.
    y = np.array([0, 0, 1, 0, 0, 0, 1, 1])
    column = np.array([5, 5, 9, 20, 20, 20, 31, 31])[:, None]
    guess = attacks.alternation_labels(column, np.bincount(y))
    assert np.array_equal(guess, y)
    # The same ciphers with counts (3, 5): the other side is named class 1.
    assert np.array_equal(attacks.alternation_labels(column, [3, 5]), 1 - y)
    # Counts no split matches (neither side has 1 row): the hypothesis is rejected and every
    # row gets the most frequent class.
    assert np.array_equal(attacks.alternation_labels(column, [7, 1]), np.zeros(8))
    with pytest.raises(ValueError, match="two classes"):
        attacks.alternation_labels(column, [3, 3, 2])


def test_alternation_recovers_paper_mode_labels(cancer):
    X, y = cancer
    result = attacks.score_labels("alternation",
                                  attacks.alternation_labels(_ciphers(X, y, "paper"),
                                                             np.bincount(y)), y)
    assert result.baseline == pytest.approx(357 / 569)
    assert result.success >= 0.93  # measured 1.000 (issue #9: 93-100 %)


def test_alternation_on_ciphers_of_permuted_labels_is_no_better_than_baseline(cancer):
    X, y = cancer
    guess = attacks.alternation_labels(_ciphers(X, _permuted(y), "paper"), np.bincount(y))
    assert attacks.score_labels("alternation", guess, y).advantage <= TOLERANCE


@pytest.mark.parametrize("mode", ["order", "quantile"])
def test_alternation_falls_to_baseline_with_label_independent_modes(cancer, mode):
    X, y = cancer
    guess = attacks.alternation_labels(_ciphers(X, y, mode), np.bincount(y))
    assert abs(attacks.score_labels("alternation", guess, y).advantage) <= TOLERANCE


# ---------------------------------------------------------------------- 2. shared ciphers
def test_shared_cipher_oracle():
    # Two features; rows 0-2 share feature-0 cipher 1, rows 2-3 feature-1 cipher 7, rows 4-5
    # feature-0 cipher 2. Known: row 0 is class 0, row 5 class 1. Row 6 shares nothing.
    X = np.array([[1, 0], [1, 1], [1, 7], [3, 7], [2, 4], [2, 5], [9, 9]])
    guess = attacks.shared_cipher_labels(X, [0, 5], [0, 1], class_counts=[3, 4])
    assert guess[:6].tolist() == [0, 0, 0, 0, 1, 1]
    assert guess[6] == 1  # unreached: the most frequent class


@pytest.mark.parametrize("data, minimum", [("cancer", 0.93), ("wine", 0.7), ("digits", 0.2)])
def test_shared_cipher_propagation_in_paper_mode(data, minimum, request):
    # Measured (3 draws of the known rows): 99 %, 77-84 %, 25-34 % (issue #9: 94-100 %,
    # 83-87 %, 49 %); majority baselines 63 %, 40 %, 10 %.
    X, y = request.getfixturevalue(data)
    rows, labels = attacks.one_known_per_class(y, random_state=0)
    guess = attacks.shared_cipher_labels(_ciphers(X, y, "paper"), rows, labels, np.bincount(y))
    result = attacks.score_labels("shared", guess, y, exclude=rows)
    assert result.success >= minimum
    assert result.advantage >= 0.1


@pytest.mark.parametrize("data", ["cancer", "wine", "digits"])
@pytest.mark.parametrize("mode", ["order", "quantile"])
def test_shared_cipher_gains_nothing_from_labels_in_label_independent_modes(data, mode,
                                                                            request):
    """The attack on ciphers made with y does exactly as well as on ciphers made with a
    permutation of y: whatever it recovers comes from X (equal values or bins shared by
    similar rows), not from the labels. In paper mode the labels are what it reads."""
    X, y = request.getfixturevalue(data)
    rows, labels = attacks.one_known_per_class(y, random_state=0)
    successes = {}
    for name, labels_encrypted in (("true", y), ("permuted", _permuted(y))):
        guess = attacks.shared_cipher_labels(_ciphers(X, labels_encrypted, mode), rows,
                                             labels, np.bincount(y))
        successes[name] = attacks.score_labels("shared", guess, y, exclude=rows).success
    assert successes["true"] == pytest.approx(successes["permuted"])


def test_shared_cipher_paper_mode_reads_the_labels(cancer):
    X, y = cancer
    rows, labels = attacks.one_known_per_class(y, random_state=0)
    counts = np.bincount(y)
    true = attacks.shared_cipher_labels(_ciphers(X, y, "paper"), rows, labels, counts)
    permuted = attacks.shared_cipher_labels(_ciphers(X, _permuted(y), "paper"), rows, labels,
                                            counts)
    assert (attacks.score_labels("", true, y, rows).success
            - attacks.score_labels("", permuted, y, rows).success) >= 0.3
    assert attacks.score_labels("", permuted, y, rows).advantage <= TOLERANCE


def test_shared_cipher_falls_to_baseline_on_distinct_values(cancer):
    # Breast cancer's values are (almost) all distinct: order-preserving ciphers share none.
    X, y = cancer
    rows, labels = attacks.one_known_per_class(y, random_state=0)
    guess = attacks.shared_cipher_labels(_ciphers(X, y, "order"), rows, labels, np.bincount(y))
    assert abs(attacks.score_labels("shared", guess, y, rows).advantage) <= TOLERANCE


# ---------------------------------------------------------------------- 4. proximity
def test_proximity_matrix_oracle():
    # Root splits feature 0 at 0.5; its right child splits feature 1 at 0.5.
    tree = {"children_left": np.array([1, -1, 3, -1, -1]),
            "children_right": np.array([2, -1, 4, -1, -1]),
            "feature": np.array([0, -2, 1, -2, -2]),
            "threshold": np.array([0.5, -2, 0.5, -2, -2]),
            "n_node_samples": np.array([4, 1, 3, 1, 2])}
    X = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    expected = np.array([[1, 0, 0, 0], [0, 2, 1, 1], [0, 1, 2, 2], [0, 1, 2, 2]], float)
    assert np.array_equal(attacks.proximity_matrix([tree], X), expected)
    stump = {key: value[:3] for key, value in tree.items()}
    stump["children_left"] = np.array([1, -1, -1])
    stump["children_right"] = np.array([2, -1, -1])
    both = attacks.proximity_matrix([tree, stump], X)
    assert np.allclose(both, (expected + np.array([[1, 0, 0, 0], [0, 1, 1, 1], [0, 1, 1, 1],
                                                   [0, 1, 1, 1]])) / 2)


def test_nearest_and_naming_oracles():
    proximity = np.array([[3, 0, 1], [0, 3, 2], [1, 2, 3]], float)
    assert attacks.proximity_nearest_labels(proximity, [0, 1], [4, 7]).tolist() == [4, 7, 7]
    # Clusters of sizes 1 and 3 are named by the class counts (3, 1): the big one class 0.
    assert attacks.name_clusters_by_counts(np.array([5, 2, 2, 2]), [3, 1]).tolist() == [1, 0, 0, 0]


def _proximity_results(X, y, mode):
    C = _ciphers(X, y, mode)
    forest = RandomForestClassifier(n_estimators=30, random_state=0).fit(C, y)
    proximity = attacks.proximity_matrix(attacks.forest_trees(forest), C)
    rows, labels = attacks.one_known_per_class(y, random_state=0)
    cluster = attacks.score_labels(
        "cluster", attacks.proximity_cluster_labels(proximity, np.bincount(y), 0), y)
    nearest = attacks.score_labels(
        "nearest", attacks.proximity_nearest_labels(proximity, rows, labels), y, rows)
    return cluster, nearest


@pytest.mark.parametrize("mode", ["paper", "quantile"])
def test_proximity_recovers_labels_from_tree_structure(cancer, wine, mode):
    # Issue #10 (30 trees): clusters 95.8 % / 98.9 %, nearest 95.3 % / 94.4 %.
    for (X, y), minimum in ((cancer, 0.9), (wine, 0.9)):
        cluster, nearest = _proximity_results(X, y, mode)
        assert cluster.success >= minimum and nearest.success >= minimum


def test_proximity_falls_to_baseline_on_random_labels(cancer):
    X, _ = cancer
    y = np.random.default_rng(3).permutation(np.repeat([0, 1], [212, 357]))
    cluster, nearest = _proximity_results(X, y, "order")
    assert cluster.advantage <= TOLERANCE and nearest.advantage <= TOLERANCE


# ---------------------------------------------------------------------- 6. values
def test_quantile_value_recovery_oracle():
    x = np.linspace(0.0, 10.0, 101)
    ciphers = np.exp(x)  # any increasing map: only ranks matter
    guess = attacks.quantile_value_recovery(ciphers, auxiliary=x)
    assert np.abs(guess - x).max() <= 0.05 + 1e-12  # half a grid step of interpolation
    # Ties share their mean rank.
    tied = attacks.quantile_value_recovery([1, 1, 2, 3], auxiliary=[0.0, 1.0, 2.0, 3.0])
    assert tied[0] == tied[1]
    with pytest.raises(ValueError, match="empty"):
        attacks.quantile_value_recovery([1, 2], auxiliary=[])


def test_value_recovery_from_order_ciphers(cancer):
    X, y = cancer
    aux, target = X[::2], X[1::2]
    order = attacks.score_value_recovery(_ciphers(target, y[1::2], "order"), target, aux)
    assert order.rank_correlation >= 0.99
    assert order.within >= 0.7 and order.within >= order.baseline_within + 0.3
    coarse = GiniPreservingEncryptor(mode="quantile", n_bins=4, random_state=0)
    binned = attacks.score_value_recovery(coarse.fit_transform(target), target, aux)
    assert binned.within < order.within and binned.rank_correlation < order.rank_correlation


# ---------------------------------------------------------------------- transcript attacks
def _paper_client(**params) -> PrivateForestClient:
    """The paper's protocol: its GIPE, the client answers "leaf" for pure nodes and decides
    from the server's encrypted counts."""
    return PrivateForestClient(random_state=0, gipe_mode="paper", reveal_leaves=True,
                               split_selection="gini", decide_from="server", **params)


@pytest.fixture(scope="module")
def wine_small(wine):
    X, y = wine
    rows = np.random.default_rng(0).choice(y.shape[0], 60, replace=False)
    return X[rows], y[rows]


@pytest.fixture(scope="module")
def recorded_paper_fit(wine_small):
    X, y = wine_small
    recorder = attacks.RecordingServer(PrivateForestServer())
    # max_bins=8 keeps the query rounds small; the leaf rule is the same.
    _paper_client(n_estimators=6, max_bins=8, server=recorder).fit(X, y)
    return recorder.transcript


def test_recording_server_holds_the_whole_exchange(recorded_paper_fit, wine_small):
    X, _ = wine_small
    kinds = [request.kind for request, _ in recorded_paper_fit.exchanges]
    assert kinds[0] == "setup" and "labels" in kinds and kinds[-1] == "answer"
    assert kinds.count("train") == 1
    replies = [reply.kind for _, reply in recorded_paper_fit.exchanges]
    assert replies[-1] == "trained"
    assert recorded_paper_fit.X_cipher.shape == X.shape
    assert len(recorded_paper_fit.trees) == 6
    # Ciphertexts are dropped by default, their counts kept.
    labels = [r for r, _ in recorded_paper_fit.exchanges if r.kind == "labels"]
    rows_per_pack = recorded_paper_fit.exchanges[0][1].meta["rows_per_pack"]
    assert sum(len(m.blobs["labels"]) for m in labels) == -(-X.shape[0] // rows_per_pack)
    assert all(b == b"" for m in labels for b in m.blobs["labels"])


def test_leaf_union_recovers_labels_from_the_paper_transcript(recorded_paper_fit, wine_small):
    X, y = wine_small
    transcript = recorded_paper_fit
    leaves = attacks.declared_leaves(transcript)
    assert leaves  # the paper's rule declares pure nodes
    rows, labels = attacks.one_known_per_class(y, random_state=0)
    guess = attacks.leaf_union_labels(
        transcript.X_cipher, transcript.trees, leaves,
        attacks.server_bootstrap_counts(transcript.first("setup")), rows, labels,
        np.bincount(y))
    result = attacks.score_labels("leaf union", guess, y, exclude=rows)
    assert result.success >= 0.95  # measured 100 % (6 trees, 60 rows); issue #9: 100 %
    # Against labels unrelated to the fit, the same guesses are no better than the baseline.
    assert attacks.score_labels("", guess, _permuted(y), exclude=rows).advantage <= TOLERANCE


def test_leaf_union_without_declared_leaves_is_the_baseline(wine_small):
    X, y = wine_small
    recorder = attacks.RecordingServer(PrivateForestServer())
    # Depth 1: the root is not pure, its children are leaves by rule (never asked).
    _paper_client(n_estimators=1, max_depth=1, server=recorder).fit(X, y)
    transcript = recorder.transcript
    assert attacks.declared_leaves(transcript) == []
    rows, labels = attacks.one_known_per_class(y, random_state=0)
    guess = attacks.leaf_union_labels(
        transcript.X_cipher, transcript.trees, [],
        attacks.server_bootstrap_counts(transcript.first("setup")), rows, labels,
        np.bincount(y))
    assert abs(attacks.score_labels("", guess, y, exclude=rows).advantage) <= TOLERANCE


@pytest.mark.parametrize("data", ["cancer", "wine", "digits"])
def test_attacks_on_the_default_transcript_fall_to_baseline(data, request):
    """Defaults (quantile ciphers, no leaf revealed): the client declares no leaf, so the
    leaf union guesses the majority class; on binary data the alternation attack on the
    cipher matrix the server received falls back to it too."""
    X, y = request.getfixturevalue(data)
    rows = np.random.default_rng(0).choice(y.shape[0], 60, replace=False)
    X, y = X[rows], np.unique(y[rows], return_inverse=True)[1]
    recorder = attacks.RecordingServer(PrivateForestServer())
    PrivateForestClient(n_estimators=3, max_bins=8, random_state=0, server=recorder).fit(X, y)
    transcript = recorder.transcript
    assert attacks.declared_leaves(transcript) == []
    known, labels = attacks.one_known_per_class(y, random_state=0)
    guess = attacks.leaf_union_labels(
        transcript.X_cipher, transcript.trees, attacks.declared_leaves(transcript),
        attacks.server_bootstrap_counts(transcript.first("setup")), known, labels,
        np.bincount(y))
    assert abs(attacks.score_labels("", guess, y, exclude=known).advantage) <= TOLERANCE
    if np.unique(y).shape[0] == 2:
        guess = attacks.alternation_labels(transcript.X_cipher, np.bincount(y))
        assert abs(attacks.score_labels("", guess, y).advantage) <= TOLERANCE


def test_leaf_union_rejects_a_wrong_bootstrap(recorded_paper_fit, wine_small):
    _, y = wine_small
    transcript = recorded_paper_fit
    wrong = np.ones_like(attacks.server_bootstrap_counts(transcript.first("setup")))
    rows, labels = attacks.one_known_per_class(y, random_state=0)
    with pytest.raises(ValueError, match="wrong bootstrap"):
        attacks.leaf_union_labels(transcript.X_cipher, transcript.trees,
                                  attacks.declared_leaves(transcript), wrong, rows, labels,
                                  np.bincount(y))


@pytest.mark.parametrize("paper", [False, True])
def test_pair_oracle_is_refused_by_the_client(wine_small, paper):
    X, y = wine_small
    client = _paper_client(n_estimators=1) if paper else PrivateForestClient(
        n_estimators=1, split_selection="gini")
    result = attacks.pair_oracle_attack(client, X[:30], y[:30])
    assert result.refused and np.isnan(result.success) and result.n_probed == 0
    assert "plan" in result.error


def test_pair_oracle_is_refused_by_the_default_client(wine_small):
    """The default (rr) answers no query at all: any query is refused."""
    X, y = wine_small
    result = attacks.pair_oracle_attack(PrivateForestClient(n_estimators=1), X[:30], y[:30])
    assert result.refused and result.n_probed == 0
    assert "answers none" in result.error


def test_pair_oracle_positive_control_without_the_plan_check(wine_small):
    """The crafted query is what the paper's protocol leaks through: decrypted with the
    client's key and decided by the paper's rule (choose_splits, no plan replay), the
    answers are "leaf" exactly for the rows that share the reference row's label."""
    X, y = wine_small
    X, y = X[:30], y[:30]
    oracle = attacks.PairOracleServer(PrivateForestServer(), reference_row=0)
    client = _paper_client(n_estimators=1, server=oracle)
    with pytest.raises(ProtocolError, match="plan"):
        client.fit(X, y)
    query = oracle.crafted_query
    engine = client.client_session_
    squares = query_squares(engine.he, engine.layout, query)  # what the client would decrypt
    choice = choose_splits(squares, query.arrays["weight"], query.arrays["tree_weight"],
                           query.arrays["n_candidates"], query.arrays["left_weight"],
                           len(client.classes_))
    rows = query.arrays["node"]
    assert rows.tolist() == list(range(1, 30))
    truth = y[rows] == y[0]
    assert np.array_equal(choice < 0, truth)  # 100 % (issue #9), baseline below
    assert max(truth.mean(), 1 - truth.mean()) < 0.8


def test_known_label_success_averages_the_draws(cancer):
    X, y = cancer
    C = _ciphers(X, y, "paper")
    proximity = np.eye(len(y)) + (y[:, None] == y[None, :]) * 0.5  # a proximity of labels
    shared, nearest = [], []
    for draw in range(3):
        rows, labels = attacks.one_known_per_class(y, 5 + draw)
        shared.append(attacks.score_labels(
            "s", attacks.shared_cipher_labels(C, rows, labels, np.bincount(y)), y,
            rows).success)
        nearest.append(attacks.score_labels(
            "n", attacks.proximity_nearest_labels(proximity, rows, labels), y, rows).success)
    got = attacks.known_label_success(C, proximity, y, draws=3, seed=5)
    assert got == pytest.approx((np.mean(shared), np.mean(nearest)))
    assert got[1] == pytest.approx(1.0)  # the label proximity names every row


# ---------------------------------------------------------------------- selective failure
@pytest.fixture(scope="module")
def cancer_90(cancer):
    X, y = cancer
    return X[:90], y[:90]


@pytest.mark.parametrize("params", [{"split_selection": "gini"},
                                    {"split_selection": "dp", "label_epsilon": 1.0}],
                         ids=["gini", "dp"])
def test_selective_failure_reads_labels_in_the_papers_flow(cancer_90, params):
    """Positive control: a client that refuses wrong counts answers exactly when the swapped
    rows share a label, one bit per round and per retried fit."""
    X, y = cancer_90
    client = PrivateForestClient(3, random_state=0, scheme="bfv", decide_from="server",
                                 **params)
    result = attacks.selective_failure_attack(client, X, y, n_targets=8, max_fits=10)
    assert result.n_probed == 8 and result.accuracy == 1.0 > result.baseline
    assert result.refusals >= 1 and result.reported == 0


@pytest.mark.parametrize("params", [{"split_selection": "gini"},
                                    {"split_selection": "dp", "label_epsilon": 1.0}],
                         ids=["gini", "dp"])
def test_selective_failure_has_nothing_to_swap_by_default(cancer_90, params):
    """The default client's rounds carry the plan alone (no label ciphertext uploaded, no
    count asked for): the attacker finds no row to swap, probes nothing in a whole fit and
    stops; the client never refuses and reports nothing."""
    X, y = cancer_90
    client = PrivateForestClient(3, random_state=0, scheme="bfv", **params)
    result = attacks.selective_failure_attack(client, X, y, n_targets=8, max_fits=10)
    assert result.refusals == 0 and result.n_fits == 1
    assert result.n_probed == 0 and result.guesses == {}
    assert result.reported == 0


# ---------------------------------------------------------------------- forced refits
def test_forced_refits_average_fresh_draws_away(cancer, monkeypatch):
    """Positive control: fresh randomized labels per fit, majority over 7 failed fits."""
    X, y = cancer
    # Each fit's draw is seeded (0, 1, ...) instead of the OS's: from the OS the majority's
    # gain over one fit (0.18 on average at ε = 1) falls to 0.1 in about 1 run in 50,000.
    seeds = itertools.count()
    monkeypatch.setattr(secrets, "SystemRandom", lambda: random.Random(next(seeds)))
    with attacks.fresh_randomized_labels():
        result = attacks.forced_refit_attack(PrivateForestClient(3, label_epsilon=1.0), X, y)
    assert result.n_fits == 7 and result.distinct_draws == 7
    assert result.majority > result.single_fit + 0.1


def test_forced_refits_see_one_draw_with_permanent_randomized_response(cancer,
                                                                      fixed_secret_ledger):
    X, y = cancer
    # A fixed ledger secret: with the OS's, one fit's accuracy (0.731 ± 0.019 at ε = 1)
    # passes 0.8 in about 1 run in 10,000.
    client = PrivateForestClient(3, label_epsilon=1.0, privacy_ledger=fixed_secret_ledger)
    result = attacks.forced_refit_attack(client, X, y)
    assert result.n_fits == 7 and result.distinct_draws == 1
    assert result.majority == result.single_fit < 0.8


# ---------------------------------------------------------------------- prediction oracle
@pytest.mark.parametrize(("scheme", "reply"), [("ckks", "leaves"), ("bfv", "leaves")])
def test_prediction_oracle_reads_labels_from_the_papers_replies(cancer, scheme, reply):
    """Positive control: a doctored leaf makes the paper's checks fail exactly when the two
    training rows' labels differ."""
    X, y = cancer
    client = PrivateForestClient(3, random_state=0, scheme=scheme, prediction_reply=reply)
    result = attacks.prediction_oracle_attack(client, X[:150], y[:150], X[150:160],
                                              n_pairs=8)
    assert result.accuracy == 1.0 > result.baseline and result.failures >= 1


@pytest.mark.parametrize("scheme", ["ckks", "bfv"])
def test_prediction_oracle_reads_nothing_from_leaf_ids(cancer, scheme):
    X, y = cancer
    client = PrivateForestClient(3, random_state=0, scheme=scheme)
    result = attacks.prediction_oracle_attack(client, X[:150], y[:150], X[150:160],
                                              n_pairs=8)
    assert result.failures == 0
    assert result.accuracy == pytest.approx(1 - result.baseline) or result.accuracy == (
        pytest.approx(result.baseline))  # the constant "same" guess
