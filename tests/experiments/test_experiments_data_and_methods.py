"""Evaluation suite pieces: dataset loaders, baseline methods, statistics, leakage schemes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ttest_rel

from cipherforest.experiments.baselines import (
    OrderPreservingEncryptor,
    generalise,
    mondrian_partition,
)
from cipherforest.experiments.common import stratified_subsample
from cipherforest.experiments.cv import run_cross_validation
from cipherforest.experiments.datasets import (
    Dataset,
    load_bundled,
    load_csv,
    load_csv_folder,
    load_openml,
)
from cipherforest.experiments.methods import (
    ForestSetting,
    Method,
    MethodOutput,
    diffpriv,
)
from cipherforest.experiments.security import (
    dp_leakage,
    grouped_range_leakage,
    scheme_security,
)
from cipherforest.experiments.stats import compare_to_reference, win_tie_loss
from cipherforest.privacy.leakage import bitwise_leakage_matrix

# --- datasets ---------------------------------------------------------------------------

def test_csv_header_detected_and_id_column_dropped(tmp_path):
    path = tmp_path / "cancer.csv"
    path.write_text("0,1,2,3\n9001,0.5,1.5,1\n9002,0.25,2.5,0\n9003,0.75,3.5,1\n")
    data = load_csv(path, drop_first_column=True)
    np.testing.assert_array_equal(data.X, [[0.5, 1.5], [0.25, 2.5], [0.75, 3.5]])
    np.testing.assert_array_equal(data.y, [1, 0, 1])
    # In a folder, the paper's cancer.csv drops its id column by name; a named header is
    # skipped, a first row of data is kept, labels are coded 0..k-1.
    (tmp_path / "plain.csv").write_text("1,2,7\n3,4,5\n")
    (tmp_path / "named.csv").write_text("a,b,label\n1,2,7\n3,4,5\n")
    sets = {d.name: d for d in load_csv_folder(tmp_path)}
    assert sets["cancer"].X.shape == (3, 2)
    np.testing.assert_array_equal(sets["plain"].X, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(sets["plain"].y, [1, 0])
    np.testing.assert_array_equal(sets["named"].X, [[1, 2], [3, 4]])


def test_csv_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_csv(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,0\n3,x,1\n")
    with pytest.raises(ValueError, match="not a numeric CSV"):
        load_csv(bad)
    one_class = tmp_path / "one.csv"
    one_class.write_text("1,2,0\n3,4,0\n")
    with pytest.raises(ValueError, match="two classes"):
        load_csv(one_class)
    with pytest.raises(ValueError, match="unknown bundled dataset"):
        load_bundled("mnist")


def test_openml_fetches_once_then_reads_the_cache(tmp_path):
    calls = []

    def fake_fetch(**kwargs):
        calls.append(kwargs)
        X = np.arange(12, dtype=float).reshape(6, 2)
        return X, np.array(["yes", "no", "yes", "no", "yes", "no"], dtype=object)

    first = load_openml("credit-g", cache_dir=tmp_path, fetch=fake_fetch)
    assert calls == [{"name": "credit-g", "version": "active", "return_X_y": True,
                      "as_frame": False}]
    np.testing.assert_array_equal(first.y, [1, 0, 1, 0, 1, 0])

    def offline(**kwargs):
        raise AssertionError("network touched on a cache hit")

    again = load_openml("credit-g", cache_dir=tmp_path, fetch=offline)
    np.testing.assert_array_equal(again.X, first.X)
    np.testing.assert_array_equal(again.y, first.y)
    load_openml(31, cache_dir=tmp_path, fetch=fake_fetch)
    assert calls[-1]["data_id"] == 31
    assert not list(tmp_path.glob("*.tmp"))


# --- methods ----------------------------------------------------------------------------

def test_diffprivlib_shim_still_imports_and_trains():
    """Fails loudly when diffprivlib or scikit-learn change so that the shim stops working."""
    import sklearn

    models = diffpriv.import_diffprivlib()
    assert hasattr(models, "RandomForestClassifier"), sklearn.__version__
    data = load_bundled("breast_cancer")
    out = diffpriv.method(epsilon=10.0).run(data.X[:400], data.y[:400], data.X[400:],
                                            ForestSetting(n_estimators=10))
    assert out.predictions.shape == (169,)
    assert np.mean(out.predictions == data.y[400:]) > 0.7


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 60), st.integers(0, 2**16))
def test_mondrian_groups_have_at_least_k_rows(k, n_extra, seed):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 5, size=(k + n_extra, 3)).astype(float)
    part = mondrian_partition(X, k)
    assert np.bincount(part).min() >= k
    G = generalise(X, part)
    for p in np.unique(part):  # one released row per group, inside the group's ranges
        rows = part == p
        assert (G[rows] == G[rows][0]).all()
        assert (G[rows][0] >= X[rows].min(0)).all() and (G[rows][0] <= X[rows].max(0)).all()


def test_mondrian_splits_when_it_can():
    X = np.arange(40, dtype=float)[:, None]
    part = mondrian_partition(X, 5)
    assert np.unique(part).shape[0] == 8  # 40 rows, groups of 5: every median cut allowed


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-4000, 4000), min_size=2, max_size=40), st.integers(0, 2**16))
def test_ope_is_strictly_increasing_on_seen_and_unseen_values(values, seed):
    # quarter steps: far above float64 resolution (see OrderPreservingEncryptor's note)
    x = np.array(values, dtype=float)[:, None] / 4
    ope = OrderPreservingEncryptor(random_state=seed).fit(x)
    probe = np.sort(np.concatenate([x[:, 0], x[:, 0] + 0.125, [-2e3, 2e3]]))[:, None]
    c = ope.transform(probe)[:, 0]
    assert np.all(np.diff(c)[np.diff(probe[:, 0]) > 0] > 0)
    assert np.all(np.diff(c)[np.diff(probe[:, 0]) == 0] == 0)


def test_stratified_subsample_keeps_every_class():
    y = np.array([0] * 90 + [1] * 9 + [2] * 1)
    rows = stratified_subsample(y, 20, seed=0)
    assert set(y[rows]) == {0, 1, 2} and rows.shape[0] <= 21
    np.testing.assert_array_equal(stratified_subsample(y, None, 0), np.arange(100))


# --- statistics -------------------------------------------------------------------------

def _records(dataset, method, accs):
    return [{"dataset": dataset, "method": method, "trial": 0, "fold": i, "accuracy": a}
            for i, a in enumerate(accs)]


def test_comparison_matches_scipy_and_counts_outcomes():
    ref = [0.90, 0.92, 0.91, 0.93, 0.90]
    worse = [0.80, 0.81, 0.83, 0.80, 0.82]
    same = ref
    noisy = [0.91, 0.90, 0.92, 0.92, 0.91]
    recs = (_records("a", "ref", ref) + _records("a", "worse", worse)
            + _records("a", "same", same) + _records("a", "noisy", noisy)
            + _records("b", "ref", worse) + _records("b", "worse", ref)
            + _records("b", "same", worse) + _records("b", "noisy", noisy))
    rows = {(r["dataset"], r["method"]): r for r in compare_to_reference(recs, "ref")}
    assert rows[("a", "worse")]["outcome"] == "win"
    assert rows[("b", "worse")]["outcome"] == "loss"
    assert rows[("a", "same")]["outcome"] == "tie" and rows[("a", "same")]["p_value"] == 1.0
    assert rows[("a", "noisy")]["p_value"] == pytest.approx(ttest_rel(ref, noisy).pvalue)
    counts = {w["method"]: w for w in win_tie_loss(list(rows.values()))}
    for c in counts.values():
        assert c["win"] + c["tie"] + c["loss"] + c["n/a"] == 2
    assert (counts["worse"]["win"], counts["worse"]["loss"]) == (1, 1)


# --- leakage ----------------------------------------------------------------------------

def test_full_ranges_reduce_to_the_bitwise_leakage_matrix():
    rng = np.random.default_rng(0)
    d = rng.dirichlet(np.ones(16))
    ciphers = np.sort(rng.integers(0, 6, size=30))
    groups = np.unique(ciphers, return_inverse=True)[1]
    full = grouped_range_leakage(groups, np.zeros(30, int), np.full(30, 15), d)
    np.testing.assert_allclose(full, bitwise_leakage_matrix(ciphers, d))


def test_known_ranges_leak_more_and_dp_noise_interpolates():
    rng = np.random.default_rng(1)
    d = rng.dirichlet(np.ones(32))
    groups = np.zeros(20, int)
    hidden = grouped_range_leakage(groups, np.zeros(20, int), np.full(20, 31), d)
    exact = grouped_range_leakage(np.arange(20), np.full(20, 7), np.full(20, 7), d)
    np.testing.assert_allclose(exact, 1.0)  # the value itself is public: every bit known
    assert (hidden <= 1.0).all() and (hidden >= 0.5 - 1e-12).all()
    np.testing.assert_allclose(dp_leakage(20, d, epsilon=1e6), 1.0, atol=1e-9)
    weak, strong = dp_leakage(20, d, 0.1), dp_leakage(20, d, 20.0)
    assert weak.mean() < strong.mean()


def test_scheme_security_shapes_and_order_of_he_and_ope():
    data = load_bundled("wine")
    sec = scheme_security(data.X[:, 0], data.y, n_samples=80, random_state=0)
    assert set(sec) >= {"gipe_paper", "ope", "dp", "kanon", "he"}
    for m in sec.values():
        assert m.shape == (80, 7) and np.isfinite(m).all()
    assert sec["he"].mean() > sec["ope"].mean()  # HE hides the order OPE reveals


# --- cross-validation loop -------------------------------------------------------------


def _majority_method(calls: list) -> Method:
    def run(X_train, y_train, X_test, setting):
        calls.append(setting.random_state)
        label = np.bincount(y_train).argmax()
        return MethodOutput(np.full(X_test.shape[0], label), 0.0, 0.0)

    return Method("majority", "majority class", run)


def test_cv_runs_trial_by_trial_and_resumes_from_the_cache(tmp_path):
    rng = np.random.default_rng(0)
    sets = [Dataset(name, rng.normal(size=(n, 3)), np.arange(n) % 2, "synthetic")
            for name, n in (("a", 20), ("b", 24))]
    calls: list[int] = []
    kwargs = {"trials": 3, "folds": 2, "n_estimators": 1, "cache_dir": tmp_path,
              "alpha_rows": {"a": 20, "b": 24}, "progress": False}
    records = run_cross_validation(sets, [_majority_method(calls)], **kwargs)
    order = [(r["trial"], r["dataset"]) for r in records]
    assert order == [(t, d) for t in range(3) for d in ("a", "b") for _ in range(2)]
    # accuracy of the constant guess on each test fold (classes alternate, folds stratified)
    assert all(r["accuracy"] == pytest.approx(0.5) for r in records)
    again = run_cross_validation(sets, [_majority_method(calls)], **kwargs)
    assert len(calls) == 12 and all(r["cached"] for r in again)
    assert [r["accuracy"] for r in again] == [r["accuracy"] for r in records]


def test_protocol_runs_and_simulations_have_their_own_trials_and_folds(tmp_path):
    rng = np.random.default_rng(0)
    sets = [Dataset("a", rng.normal(size=(30, 3)), np.arange(30) % 2, "synthetic")]
    base = _majority_method([])
    plain = Method("plain", "plaintext", base.run)
    real = Method("real", "protocol", base.run, protocol=True)
    sim = Method("sim", "simulation", base.run, protocol=True, time_measured=False)
    kwargs = {"trials": 3, "folds": 3, "n_estimators": 1, "alpha_rows": {"a": 30},
              "progress": False}

    def ran(**limits):
        records = run_cross_validation(sets, [plain, real, sim], cache_dir=tmp_path,
                                       **kwargs, **limits)
        return {key: {(r["trial"], r["fold"]) for r in records if r["method"] == key}
                for key in ("plain", "real", "sim")}

    every = {(t, f) for t in range(3) for f in range(3)}
    out = ran(protocol_trials=1, protocol_folds=2, simulated_trials=3)
    assert out["plain"] == out["sim"] == every
    assert out["real"] == {(0, 0), (0, 1)}
    # without simulated_trials the simulations follow protocol_trials (every fold)
    out = ran(protocol_trials=2, protocol_folds=1)
    assert out["sim"] == {(t, f) for t in range(2) for f in range(3)}
    assert out["real"] == {(0, 0), (1, 0)} and out["plain"] == every


# --- distinct datasets and a cache that follows the code --------------------------------


def test_bundled_datasets_load_and_are_pairwise_distinct():
    from cipherforest.experiments.datasets import BUNDLED, same_content

    sets = [load_bundled(name) for name in BUNDLED]
    shapes = {d.name: (d.X.shape, d.n_classes) for d in sets}
    assert shapes["shuttle"] == ((49097, 9), 2) and shapes["mnist_5k"] == ((5000, 784), 10)
    assert shapes["acsf1"] == ((200, 1460), 10) and shapes["segment"][1] == 7
    assert len(sets) >= 9
    for i, a in enumerate(sets):
        for b in sets[i + 1:]:
            assert not same_content(a, b), (a.name, b.name)


def test_a_permuted_relabelled_copy_is_the_same_data_and_is_refused(tmp_path):
    from cipherforest.experiments import ExperimentConfig, load_datasets
    from cipherforest.experiments.datasets import same_content

    data = load_bundled("breast_cancer")
    rng = np.random.default_rng(0)
    rows, cols = rng.permutation(569), np.roll(np.arange(30), 1)  # as the paper's cancer.csv
    copy = Dataset("copy", data.X[rows][:, cols], 1 - data.y[rows], "test")
    assert same_content(data, copy)
    changed = Dataset("changed", copy.X.copy(), copy.y, "test")
    changed.X[5, 3] += 1.0
    assert not same_content(data, changed)
    ids = np.arange(569)[:, None]
    np.savetxt(tmp_path / "cancer.csv", np.hstack([ids, copy.X, copy.y[:, None]]),
               delimiter=",")
    config = ExperimentConfig(datasets=("breast_cancer", "cancer"), csv_dir=str(tmp_path))
    with pytest.raises(ValueError, match="'breast_cancer' and 'cancer' hold the same rows"):
        load_datasets(config)


def test_cache_key_follows_the_code_the_method_runs(tmp_path):
    from cipherforest.experiments.cv import code_digest

    assert code_digest(("experiments/heldp.py",)) != code_digest(("experiments/baselines.py",))
    assert code_digest(("tree",)) == code_digest(("tree",))
    with pytest.raises(FileNotFoundError, match="not found"):
        code_digest(("no/such/module.py",))
    rng = np.random.default_rng(0)
    sets = [Dataset("a", rng.normal(size=(20, 3)), np.arange(20) % 2, "synthetic")]
    calls: list[int] = []
    kwargs = {"trials": 1, "folds": 2, "n_estimators": 1, "cache_dir": tmp_path,
              "alpha_rows": {"a": 20}, "progress": False}

    def method(code):
        m = _majority_method(calls)
        return Method(m.key, m.label, m.run, code=code)

    run_cross_validation(sets, [method(("experiments/heldp.py",))], **kwargs)
    run_cross_validation(sets, [method(("experiments/heldp.py",))], **kwargs)
    assert len(calls) == 2  # same code: read back
    run_cross_validation(sets, [method(("experiments/baselines.py",))], **kwargs)
    assert len(calls) == 4  # other code: recomputed
