"""The install step ``python -m cipherforest.precompile`` compiles every kernel specialisation
that common user fits reach: after it, such fits compile nothing (checked in a fresh process,
by the kernels' loaded signatures, so the disk cache's state does not matter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SPEC_SNAPSHOT = textwrap.dedent("""
    import sys
    from numba.core.dispatcher import Dispatcher

    def loaded_signatures():
        out = {}
        for name, module in list(sys.modules.items()):
            if not name.startswith("cipherforest"):
                continue
            for attr, value in list(vars(module).items()):
                if isinstance(value, Dispatcher):
                    key = value.py_func.__module__ + "." + value.py_func.__qualname__
                    out[key] = sorted(str(sig) for sig in value.signatures)
        return out
""")

USER_FITS = textwrap.dedent("""
    import warnings
    import numpy as np
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.datasets import load_breast_cancer, load_iris, make_regression
    from sklearn.inspection import permutation_importance
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    import cipherforest as cf
    from cipherforest.privacy import GiniPreservingEncryptor

    warnings.simplefilter("ignore")
    X, y = load_breast_cancer(return_X_y=True)
    Xi, yi = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[yi]
    Xr, yr = make_regression(25_000, 8, noise=3.0, random_state=1)
    X_nan = X.copy()
    X_nan[::5, 0] = np.nan
    frame = pd.DataFrame(Xi, columns=list("abcd")).assign(kind=np.where(yi > 0, "u", "v"))
    cf.DecisionTreeClassifier(max_features="sqrt", class_weight="balanced").fit(X, y).score(X, y)
    cf.DecisionTreeClassifier(max_bins=255).fit(X_nan, y).predict_log_proba(X_nan)
    cf.DecisionTreeRegressor(max_bins=128).fit(Xr[:3000], yr[:3000]).predict(Xr)
    cf.ExtraTreeClassifier().fit(Xi, labels).predict(Xi)
    forest = cf.RandomForestClassifier(30, max_bins=255, n_jobs=-1, oob_score=True)
    forest.fit(X.astype(np.float32), y).predict_proba(X)
    forest.feature_importances_
    cf.ExtraTreesRegressor(20, n_jobs=-1).fit(Xr[:2000], yr[:2000]).predict(Xr[:100])
    boost = cf.GradientBoostingClassifier(n_estimators=20, max_bins=255, max_depth=None,
                                          max_leaf_nodes=31).fit(X, y)
    list(boost.staged_decision_function(X))
    cf.GradientBoostingClassifier(n_estimators=10, learning_rate=0.3).fit(Xi, labels)
    cf.GradientBoostingRegressor(n_estimators=10, max_bins=255, n_jobs=-1).fit(Xr, yr)
    cf.GradientBoostingRegressor(n_estimators=10, subsample=0.5, loss="huber").fit(
        Xr[:2000], yr[:2000])
    cf.AdaBoostClassifier(n_estimators=20).fit(X, y).decision_function(X)
    cf.AdaBoostRegressor(n_estimators=10).fit(Xr[:2000], yr[:2000])
    cf.BaggingRegressor(n_estimators=10).fit(Xr[:2000], yr[:2000]).predict(Xr[:50])
    pipe = make_pipeline(ColumnTransformer([("num", StandardScaler(), list("abcd")),
                                            ("cat", OneHotEncoder(), ["kind"])]),
                         cf.RandomForestClassifier(20, random_state=0))
    cross_val_score(pipe, frame, labels, cv=3)
    GridSearchCV(cf.RandomForestClassifier(10), {"max_depth": [3, None]}, cv=3).fit(X, y)
    permutation_importance(pipe.fit(frame, labels), frame, labels, n_repeats=2)
    encryptor = GiniPreservingEncryptor(random_state=0).fit(X, y)
    encryptor.transform(X)
""")


def test_user_fits_compile_nothing_after_the_install_step():
    code = (SPEC_SNAPSHOT + "from cipherforest.precompile import precompile\n"
            "precompile()\nbefore = loaded_signatures()\n" + USER_FITS
            + "after = loaded_signatures()\nimport json\n"
            "print(json.dumps({name: sorted(set(sigs) - set(before.get(name, [])))"
            " for name, sigs in after.items() if set(sigs) - set(before.get(name, []))}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    compiled_later = json.loads(proc.stdout.strip().splitlines()[-1])
    assert compiled_later == {}


def test_precompile_command_reports_each_family():
    proc = subprocess.run([sys.executable, "-m", "cipherforest.precompile"],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("cipherforest: compiling numba kernels")
    for family in ("decision trees", "gradient boosting", "AdaBoost", "GIPE encryptor"):
        assert any(line.strip().startswith(family + ":") for line in lines)
    assert lines[-1].startswith("cipherforest: kernels cached")


@pytest.mark.parametrize("argv", [["--bogus"]])
def test_precompile_rejects_unknown_options(argv):
    proc = subprocess.run([sys.executable, "-m", "cipherforest.precompile", *argv],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr
