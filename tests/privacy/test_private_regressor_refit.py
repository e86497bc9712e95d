"""The private regressor's ``leaf_refit="ridge"``: the client's global ridge refit of the
leaf values of all trees from its own true targets.

Proves: LSQR's weights are the dense ridge solve; the cross-validated penalty follows the
signal (small when the leaves explain the targets, the largest for pure noise); the fitted
estimator predicts the dense refit of the leaves the server named; the protocol and the
simulator agree with it; save/load keeps the refitted values and refuses inconsistent ones;
a leaf no training row reaches is refused, one tree and a constant target work; and on a
set with signal the refit beats the leaf means at ε = 2 with the same ỹ. The same for the
boosting regressor's ridge over all rounds' leaves. ``leaf_refit="ridge_to_means"``: the
shrinkage toward the leaf means is the dense solve toward them, a large penalty gives the
forest of leaf means, and the out-of-bag cross-validation is the dense one written out.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.metrics import r2_score

from cipherforest.privacy import (
    GiniPreservingEncryptor,
    PrivateForestRegressor,
    PrivateForestRegressorSimulator,
    PrivateForestServer,
    PrivateGradientBoostingRegressor,
    ProtocolError,
    StateFileError,
    leaf_refit,
    ridge_leaf_values,
)
from cipherforest.privacy.leaf_refit import (
    BOOSTING_PENALTIES,
    MEANS_PENALTIES,
    PENALTIES,
    choose_penalty,
    leaf_indicators,
    mean_weights,
    ridge_leaf_weights,
)
from cipherforest.privacy.package import CLIENT_FORMAT, CLIENT_VERSION
from cipherforest.privacy.regressor import LeafMeans
from cipherforest.privacy.state_file import read_state_file, write_state_file


@pytest.fixture(scope="module")
def data():
    X, y = load_diabetes(return_X_y=True)
    idx = np.random.RandomState(1).permutation(X.shape[0])
    return X[idx[:300]], y[idx[:300]], X[idx[300:]], y[idx[300:]]


def _seeded_encryptor():
    return GiniPreservingEncryptor(mode="quantile", random_state=0).set_output(
        transform="default")


def _random_leaves(rng, n_rows, leaves_per_tree):
    """Table rows of ``n_rows`` rows in trees of the given numbers of leaves (every leaf
    reached), numbered across the trees."""
    offsets = np.concatenate([[0], np.cumsum(leaves_per_tree)])
    columns = []
    for t, n_leaves in enumerate(leaves_per_tree):
        column = np.concatenate([np.arange(n_leaves), rng.integers(0, n_leaves,
                                                                   n_rows - n_leaves)])
        columns.append(rng.permutation(column) + offsets[t])
    return np.stack(columns, axis=1), int(offsets[-1])


def _dense_refit(rows, n_leaves, y, penalty):
    """Per-leaf values ``mean + T · w`` of the ridge solve written densely."""
    phi = np.zeros((rows.shape[0], n_leaves))
    np.put_along_axis(phi, rows, 1.0, axis=1)
    w = np.linalg.solve(phi.T @ phi + penalty * np.eye(n_leaves), phi.T @ (y - y.mean()))
    return y.mean() + rows.shape[1] * w


@pytest.mark.parametrize("penalty", [0.01, 0.3, 5.0])
def test_lsqr_weights_are_the_dense_ridge_solve(penalty):
    rng = np.random.default_rng(0)
    rows, n_leaves = _random_leaves(rng, 40, [6, 9, 4])
    y = rng.normal(size=40) + rows[:, 0] % 3
    intercept, weights = ridge_leaf_weights(leaf_indicators(rows, n_leaves), y, penalty)
    np.testing.assert_allclose(intercept + 3 * weights,
                               _dense_refit(rows, n_leaves, y, penalty), atol=1e-8)


def test_refit_values_are_the_dense_solve_at_the_chosen_penalty():
    rng = np.random.default_rng(1)
    rows, n_leaves = _random_leaves(rng, 60, [8, 8, 8, 8])
    y = rows[:, 0] * 0.5 + rng.normal(scale=0.1, size=60)
    penalty = choose_penalty(leaf_indicators(rows, n_leaves), y, [4 * p for p in PENALTIES])
    np.testing.assert_allclose(ridge_leaf_values(rows, n_leaves, y),
                               _dense_refit(rows, n_leaves, y, penalty), atol=1e-8)


def test_the_cross_validated_penalty_follows_the_signal():
    """Targets the leaves explain get the smallest penalty; targets independent of the
    leaves the largest (the refit then shrinks to the mean)."""
    rng = np.random.default_rng(2)
    rows, n_leaves = _random_leaves(rng, 200, [10] * 5)
    design = leaf_indicators(rows, n_leaves)
    penalties = [5 * p for p in PENALTIES]
    explained = (rows % 10).sum(axis=1).astype(float)
    assert choose_penalty(design, explained, penalties) == penalties[0]
    assert choose_penalty(design, rng.normal(size=200), penalties) == penalties[-1]
    assert choose_penalty(design, explained, [7.0]) == 7.0


#: LSQR stops at a relative residual of 1e-10; the leaf values it reaches differ from the
#: dense solve's by that times the system's condition number (2e-9 relative seen on the
#: boosting regressor's shallow, large leaves), far below any difference of refits.
SOLVER_RTOL = 1e-7


def _dense_prediction(model, y, X_test, n_trees, penalties):
    """The mean over the trees of the dense refit's values of the leaves the server names
    for the test rows, the leaves numbered across the trees."""
    session = model.server_.session(model.session_)
    train_leaves = session.route(session.X)
    test_leaves = session.route(model.encryptor_.transform(X_test).astype(float))
    shift = 10**6 * np.arange(n_trees)
    ids = np.unique(train_leaves + shift)
    rows = np.searchsorted(ids, train_leaves + shift)
    penalty = choose_penalty(leaf_indicators(rows, ids.shape[0]), y,
                             [n_trees * p for p in penalties])
    values = _dense_refit(rows, ids.shape[0], y, penalty)
    return values[np.searchsorted(ids, test_leaves + shift)].mean(axis=1)


def test_the_estimator_predicts_the_dense_refit_of_the_servers_leaves(data):
    X, y, X_test, _ = data
    model = PrivateForestRegressor(n_estimators=4, random_state=3, max_features=0.5,
                                   leaf_refit="ridge").fit(X, y)
    np.testing.assert_allclose(model.predict(X_test),
                               _dense_prediction(model, y, X_test, 4, PENALTIES),
                               rtol=SOLVER_RTOL)
    assert model.privacy_report_["epsilon"] == 2.0  # the refit spends nothing


def test_the_boosting_regressor_predicts_the_dense_refit_of_all_rounds(data, tmp_path):
    """Its intercept and leaf values become the ridge refit over every round's leaves (the
    rounds' own refit only shapes nothing after it); saved and loaded, it predicts the
    same."""
    X, y, X_test, _ = data
    model = PrivateGradientBoostingRegressor(n_estimators=5, random_state=0,
                                             leaf_refit="ridge").fit(X, y)
    predicted = model.predict(X_test)
    np.testing.assert_allclose(predicted,
                               _dense_prediction(model, y, X_test, 5, BOOSTING_PENALTIES),
                               rtol=SOLVER_RTOL)
    model.save(tmp_path / "boosting")
    loaded = PrivateGradientBoostingRegressor.load(tmp_path / "boosting")
    np.testing.assert_array_equal(loaded.predict(X_test), predicted)


def test_protocol_and_simulator_predict_the_same(data, tmp_path):
    X, y, X_test, _ = data
    ledger = str(tmp_path / "ledger")
    model = PrivateForestRegressor(n_estimators=6, random_state=5, privacy_ledger=ledger,
                                   server=PrivateForestServer(), leaf_refit="ridge")
    model.new_encryptor = _seeded_encryptor
    simulated = PrivateForestRegressorSimulator(n_estimators=6, random_state=5,
                                                privacy_ledger=ledger, leaf_refit="ridge")
    simulated.new_encryptor = _seeded_encryptor
    np.testing.assert_array_equal(simulated.fit(X, y).predict(X_test),
                                  model.fit(X, y).predict(X_test))
    assert simulated.leaf_means_.values is not None


def test_save_load_keeps_the_refitted_values(data, tmp_path):
    X, y, X_test, _ = data
    model = PrivateForestRegressor(n_estimators=4, random_state=1, leaf_refit="ridge",
                                   target_bounds=(0.0, 400.0)).fit(X, y)
    means = PrivateForestRegressor(n_estimators=4, random_state=1, leaf_refit="mean",
                                   target_bounds=(0.0, 400.0)).fit(X, y)
    assert not np.allclose(model.predict(X_test), means.predict(X_test))
    path = tmp_path / "model"
    model.save(path)
    assert oct(os.stat(path / "client.npz").st_mode & 0o777) == "0o600"
    loaded = PrivateForestRegressor.load(path)
    assert loaded.leaf_refit == "ridge"
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
    meta, arrays = read_state_file(path / "client.npz", CLIENT_FORMAT, CLIENT_VERSION)
    arrays["leaf_values"] = arrays["leaf_values"][:-1]
    write_state_file(path / "client.npz", CLIENT_FORMAT, CLIENT_VERSION,
                     {k: v for k, v in meta.items()
                      if k not in ("format", "format_version", "library_version")}, arrays)
    with pytest.raises(StateFileError, match="leaf values"):
        PrivateForestRegressor.load(path)


def test_a_leaf_no_training_row_reaches_is_refused(data):
    X, y, _, _ = data
    model = PrivateForestRegressorSimulator(n_estimators=3, random_state=0,
                                            leaf_refit="ridge").fit(X, y)
    table = model.leaf_means_.table
    reached = table.leaf_ids[table.offsets[:-1]][None, :].copy()
    assert np.isfinite(model.leaf_means_.predict(reached)).all()
    reached[0, 1] = 10**9
    with pytest.raises(ProtocolError, match="not a leaf"):
        model.leaf_means_.predict(reached)


def test_one_tree_and_a_constant_target(data):
    X, y, X_test, _ = data
    one = PrivateForestRegressor(n_estimators=1, random_state=0, leaf_refit="ridge").fit(X, y)
    assert np.isfinite(one.predict(X_test)).all()
    with pytest.warns(UserWarning, match="single value"):
        constant = PrivateForestRegressor(n_estimators=3, leaf_refit="ridge").fit(
            X, np.full(X.shape[0], 4.5))
    np.testing.assert_array_equal(constant.predict(X_test), 4.5)


def test_an_unknown_refit_is_refused(data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="leaf_refit"):
        PrivateForestRegressor(n_estimators=2, leaf_refit="lasso").fit(X, y)


def test_the_refit_beats_the_leaf_means_on_the_same_trees(tmp_path):
    """Friedman #1 at ε = 2 (the same ledger, so the same ỹ and trees): the refit's R² is
    above the leaf means' by a margin (0.04-0.05 measured over the benchmark's folds)."""
    X, y = make_friedman1(600, noise=1.0, random_state=0)
    scores = {}
    for refit in ("mean", "ridge"):
        model = PrivateForestRegressorSimulator(
            n_estimators=30, random_state=0, privacy_ledger=str(tmp_path / "ledger"),
            leaf_refit=refit)
        model.new_encryptor = _seeded_encryptor
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model.fit(X[:400], y[:400])
        scores[refit] = r2_score(y[400:], model.predict(X[400:]))
    assert scores["ridge"] > scores["mean"] + 0.01


def test_the_boosting_ridge_beats_the_rounds_refit_on_the_same_trees(tmp_path):
    """Friedman #1 at ε = 2, the same ỹ and trees: the global refit's R² is above the
    round-by-round refit's (0.06 measured over the benchmark's folds)."""
    X, y = make_friedman1(600, noise=1.0, random_state=0)
    scores = {}
    for refit in ("mean", "ridge"):
        model = PrivateGradientBoostingRegressor(
            n_estimators=50, random_state=0, privacy_ledger=str(tmp_path / "ledger"),
            leaf_refit=refit)
        model.new_encryptor = _seeded_encryptor
        scores[refit] = r2_score(y[400:], model.fit(X[:400], y[:400]).predict(X[400:]))
    assert scores["ridge"] > scores["mean"] + 0.01


def _dense_design(rows, n_leaves):
    phi = np.zeros((rows.shape[0], n_leaves))
    np.put_along_axis(phi, rows, 1.0, axis=1)
    return phi


def _dense_toward_means(rows, n_leaves, y, penalty):
    """Per-leaf values ``b + T · w`` of ``min ‖y − b − Φw‖² + λ‖w − w₀‖²`` written densely,
    ``w₀`` from each leaf's mean target over the rows reaching it (0 where none does)."""
    phi = _dense_design(rows, n_leaves)
    n_trees, b = rows.shape[1], y.mean()
    counts = phi.sum(axis=0)
    means = np.divide(phi.T @ y, counts, out=np.full(n_leaves, b), where=counts > 0)
    w0 = (means - b) / n_trees
    w = np.linalg.solve(phi.T @ phi + penalty * np.eye(n_leaves),
                        phi.T @ (y - b) + penalty * w0)
    return b + n_trees * w


@pytest.mark.parametrize("penalty", [0.01, 0.3, 5.0])
def test_toward_means_is_the_dense_solve(penalty):
    rng = np.random.default_rng(4)
    rows, n_leaves = _random_leaves(rng, 50, [7, 5, 9])
    y = rng.normal(size=50) + rows[:, 1] % 4
    intercept, weights = ridge_leaf_weights(leaf_indicators(rows, n_leaves), y, penalty,
                                            toward_means=True)
    np.testing.assert_allclose(intercept + 3 * weights,
                               _dense_toward_means(rows, n_leaves, y, penalty),
                               rtol=SOLVER_RTOL)


def test_a_large_penalty_keeps_the_leaf_means_and_a_leaf_without_rows_its_mean():
    """``b + Σ_t w₀[leaf_t]`` is the mean over the trees of the leaves' target means; a
    penalty far above ΦᵀΦ's scale leaves the refit there."""
    rng = np.random.default_rng(5)
    rows, n_leaves = _random_leaves(rng, 40, [6, 8])
    n_leaves += 1  # a leaf no row reaches: weight 0
    y = rng.normal(size=40)
    design = leaf_indicators(rows, n_leaves)
    intercept, prior = mean_weights(design, y)
    means = [np.array([y[rows[:, t] == leaf].mean() for leaf in rows[:, t]])
             for t in range(2)]
    np.testing.assert_allclose(intercept + design @ prior, (means[0] + means[1]) / 2)
    assert prior[-1] == 0.0
    _, weights = ridge_leaf_weights(design, y, 1e12, toward_means=True)
    np.testing.assert_allclose(weights, prior, atol=1e-9)


def _dense_out_of_bag_choice(rows, n_leaves, y, in_bag, penalties):
    """choose_penalty's cross-validation written densely: the same folds, the dense solve
    toward the kept rows' leaf means, a held-out row scored through the trees that did not
    draw it (all trees if every tree drew it)."""
    n_rows, n_trees = rows.shape
    fold = np.empty(n_rows, dtype=np.int64)
    fold[np.random.default_rng(0).permutation(n_rows)] = np.arange(n_rows) % 5
    errors = np.zeros(len(penalties))
    for k in range(5):
        held, kept = fold == k, fold != k
        for j, penalty in enumerate(penalties):
            values = _dense_toward_means(rows[kept], n_leaves, y[kept], penalty)
            b = y[kept].mean()
            contribution = (values[rows[held]] - b) / n_trees
            outside = ~in_bag[held]
            n_out = outside.sum(axis=1)
            through_out = n_trees * (contribution * outside).sum(axis=1) / np.maximum(n_out, 1)
            predicted = b + np.where(n_out > 0, through_out, contribution.sum(axis=1))
            errors[j] += np.sum((y[held] - predicted) ** 2)
    return penalties[int(np.argmin(errors))], errors


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_out_of_bag_cross_validation_is_the_dense_one(seed):
    rng = np.random.default_rng(seed)
    rows, n_leaves = _random_leaves(rng, 80, [6, 7, 5, 8])
    y = (rows % 3).sum(axis=1) + rng.normal(scale=2.0, size=80)
    in_bag = rng.random((80, 4)) < 0.63
    in_bag[:5] = True  # rows every tree drew: scored through all of them
    penalties = [4 * p for p in MEANS_PENALTIES]
    expected, errors = _dense_out_of_bag_choice(rows, n_leaves, y, in_bag, penalties)
    assert np.sort(errors)[1] > np.sort(errors)[0] * (1 + 1e-6)  # a clear winner
    design = leaf_indicators(rows, n_leaves)
    out_of_bag = leaf_indicators(rows, n_leaves, ~in_bag)
    assert choose_penalty(design, y, penalties, toward_means=True,
                          out_of_bag=out_of_bag) == expected


def test_leaf_means_ridge_to_means_is_the_dense_refit_with_bootstrap_out_of_bag():
    """LeafMeans.from_rows passes every tree's undrawn rows to the cross-validation and
    stores the dense refit at the chosen penalty."""
    rng = np.random.default_rng(6)
    n_rows, n_trees = 90, 5
    reached = np.column_stack([rng.integers(0, 6, n_rows) * 2 + 1 for _ in range(n_trees)])
    draws = rng.multinomial(n_rows, np.full(n_rows, 1 / n_rows), size=n_trees).T
    y = (reached % 5).sum(axis=1) + rng.normal(size=n_rows)
    leaves = LeafMeans.from_rows(reached, y, lambda t: draws[:, t], "ridge_to_means")
    rows = leaves.table.rows(reached)
    n_leaves = leaves.table.leaf_ids.shape[0]
    penalty, _ = _dense_out_of_bag_choice(rows, n_leaves, y, draws > 0,
                                          [n_trees * p for p in MEANS_PENALTIES])
    np.testing.assert_allclose(leaves.values, _dense_toward_means(rows, n_leaves, y, penalty),
                               rtol=SOLVER_RTOL)


def test_the_estimator_shrinks_toward_its_leaf_means(data, monkeypatch):
    """At one penalty (no cross-validation) the fitted estimator predicts the dense
    solve toward the leaf means of the leaves the server named."""
    X, y, X_test, _ = data
    monkeypatch.setattr(leaf_refit, "MEANS_PENALTIES", (0.3,))
    model = PrivateForestRegressor(n_estimators=4, random_state=2, max_features=0.5,
                                   leaf_refit="ridge_to_means").fit(X, y)
    session = model.server_.session(model.session_)
    train_leaves = session.route(session.X)
    test_leaves = session.route(model.encryptor_.transform(X_test).astype(float))
    shift = 10**6 * np.arange(4)
    ids = np.unique(train_leaves + shift)
    values = _dense_toward_means(np.searchsorted(ids, train_leaves + shift), ids.shape[0],
                                 y, 4 * 0.3)
    np.testing.assert_allclose(model.predict(X_test),
                               values[np.searchsorted(ids, test_leaves + shift)].mean(axis=1),
                               rtol=SOLVER_RTOL)
    assert model.privacy_report_["epsilon"] == 2.0
