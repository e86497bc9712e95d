"""scikit-learn's estimator API checks on the decision tree estimators.

Runs ``sklearn.utils.estimator_checks.parametrize_with_checks`` over
``DecisionTreeClassifier`` and ``DecisionTreeRegressor`` in both split modes (exact and
``max_bins=64`` histograms). Passing proves the estimators honour scikit-learn's contract:
parameter handling, input validation, fitted attributes, cloning, pickling, sample-weight
semantics, NaN handling and error messages. Checks listed in ``EXPECTED_FAILED`` are known,
deliberate differences, each with its reason.
"""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from cipherforest import DecisionTreeClassifier, DecisionTreeRegressor

ESTIMATORS = [
    DecisionTreeClassifier(random_state=0),
    DecisionTreeRegressor(random_state=0),
    DecisionTreeClassifier(random_state=0, max_bins=64),
    DecisionTreeRegressor(random_state=0, max_bins=64),
]

EXPECTED_FAILED: dict[str, str] = {}


def expected_failed_checks(estimator) -> dict[str, str]:
    """Checks that fail for a documented, deliberate reason (none are bugs)."""
    return dict(EXPECTED_FAILED)


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
