"""scikit-learn's estimator API checks on the gradient boosting estimators.

Runs ``sklearn.utils.estimator_checks.parametrize_with_checks`` over
``GradientBoostingClassifier`` and ``GradientBoostingRegressor`` with few rounds, in both split
modes (exact, and ``max_bins=64`` histograms) and with stochastic boosting (``subsample``).
Passing proves the estimators honour scikit-learn's contract: parameter handling, input
validation, fitted attributes, cloning, pickling, sample-weight semantics, NaN handling and
error messages.
"""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from cipherforest.ensemble._gradient_boosting import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
)

ESTIMATORS = [
    GradientBoostingClassifier(n_estimators=5, random_state=0),
    GradientBoostingRegressor(n_estimators=5, random_state=0),
    GradientBoostingClassifier(n_estimators=5, random_state=0, max_bins=64),
    # Robust losses move by bounded steps: a larger learning rate lets 5 rounds fit the
    # checks' toy problems (check_regressors_train asks for R^2 > 0.5).
    GradientBoostingRegressor(n_estimators=5, random_state=0, max_bins=64, loss="huber",
                              learning_rate=0.5),
    GradientBoostingClassifier(n_estimators=5, random_state=0, subsample=0.7,
                               max_leaf_nodes=4, max_depth=None),
    GradientBoostingRegressor(n_estimators=5, random_state=0, subsample=0.7,
                              loss="absolute_error", learning_rate=0.5),
    GradientBoostingRegressor(n_estimators=5, random_state=0, loss="quantile", alpha=0.5,
                              learning_rate=0.5),
]

_SAMPLE_WEIGHT_CHECK = "check_sample_weight_equivalence_on_dense_data"


def expected_failed_checks(estimator) -> dict[str, str]:
    """Checks that fail for a documented, deliberate reason (none are bugs)."""
    params = estimator.get_params()
    failed = {}
    if params["subsample"] < 1.0:
        failed[_SAMPLE_WEIGHT_CHECK] = (
            "subsampling draws rows: k repeated rows are not drawn like one row of weight k")
    elif params["loss"] != "quantile":
        # On the check's 15 x 30 data many splits tie exactly (they separate the
        # positive-weight rows identically); the gradient sums of "weight k" and "k repeated
        # rows" differ in the last bit, so rounding picks another of the tied features and the
        # zero-weight rows land elsewhere. scikit-learn lists the same expected failure for its
        # GradientBoosting* estimators. (Quantile gradients are +-alpha constants whose sums
        # are exact, so that model passes.)
        failed[_SAMPLE_WEIGHT_CHECK] = (
            "exact ties between splits are broken by last-bit rounding of gradient sums")
    if _SAMPLE_WEIGHT_CHECK in failed:  # the same check on sparse X (densified: same fit)
        failed["check_sample_weight_equivalence_on_sparse_data"] = failed[_SAMPLE_WEIGHT_CHECK]
    if params["loss"] == "quantile":
        # The check sets ``alpha = 0.01`` on any regressor that has an ``alpha`` (meant for
        # linear models); a 1 % quantile regressor cannot reach the R^2 > 0.5 it asks for.
        for suffix in ("", "(readonly_memmap=True)", "(readonly_memmap=True,X_dtype=float32)"):
            failed["check_regressors_train" + suffix] = (
                "the check sets alpha=0.01: a 1% quantile model has a poor R^2 by design")
    return failed


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
