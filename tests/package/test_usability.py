"""What a new user meets first: a cheap ``import cipherforest`` with every public name still
importable, one line while numba compiles, the CLI's ``--version``/help/options, and clear
errors from ``export_text``/``plot_tree`` on ensembles and from ``save_model`` into a missing
folder; the GIPE encryptor's feature names and ``set_output``."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_iris

import cipherforest
from cipherforest import _compile_notice
from cipherforest.cli import COMPARE_DATASETS, main, run_comparison

SRC = str(Path(cipherforest.__file__).resolve().parents[1])
PACKAGES = ("cipherforest", "cipherforest.tree", "cipherforest.ensemble",
            "cipherforest.privacy")
# The module that defines each public name today (the lazy tables must agree).
DEFINED_IN = {
    "cipherforest.tree": {"DecisionTreeClassifier": "_classes", "DecisionTreeRegressor":
                          "_classes", "Tree": "_tree", "export_text": "_export",
                          "plot_tree": "_export"},
    "cipherforest.privacy": {"GiniPreservingEncryptor": "gipe", "PrivateForestClient":
                             "client", "PrivateForestServer": "protocol.server.server", "HEError":
                             "he.schemes", "ProtocolError": "protocol.messages",
                             "StateFileError": "state_file"},
}


def run_python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    return proc.stdout


# ------------------------------------------------------------------------- lazy imports
def test_import_loads_neither_sklearn_nor_numba_nor_seal():
    out = run_python("import sys, cipherforest, cipherforest.tree, cipherforest.ensemble, "
                     "cipherforest.privacy\n"
                     "print(sorted(m for m in ('sklearn', 'numba', 'seal', 'scipy') "
                     "if m in sys.modules))")
    assert out.strip() == "[]"


def test_first_use_of_a_name_imports_only_what_it_needs():
    out = run_python("import sys, cipherforest\n"
                     "cipherforest.DecisionTreeClassifier\n"
                     "print('seal' in sys.modules, 'cipherforest.ensemble._forest' in "
                     "sys.modules)")
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_is_listed(package):
    module = importlib.import_module(package)
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        assert name in dir(module)
        if hasattr(value, "__module__") and not isinstance(value, str):
            assert value.__module__.startswith("cipherforest")
    for name, submodule in DEFINED_IN.get(package, {}).items():
        assert getattr(module, name) is getattr(
            importlib.import_module(f"{package}.{submodule}"), name)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        module.NoSuchThing  # noqa: B018


def test_from_imports_and_star_import_still_work():
    namespace: dict = {}
    exec("from cipherforest import *", namespace)
    assert {"RandomForestClassifier", "DecisionTreeRegressor", "__version__"} <= set(namespace)
    from cipherforest.ensemble import RandomForestClassifier as direct
    from cipherforest.ensemble._forest import RandomForestClassifier as defined
    assert direct is defined is cipherforest.RandomForestClassifier
    assert isinstance(cipherforest.__version__, str) and cipherforest.__version__


def test_a_fresh_process_loads_a_model_without_importing_the_estimators(tmp_path):
    path = tmp_path / "forest.cfmodel"
    X, y = load_iris(return_X_y=True)
    from cipherforest.io import save_model
    save_model(cipherforest.RandomForestClassifier(3, random_state=0).fit(X, y), path)
    out = run_python(f"from cipherforest.io import load_model\n"
                     f"from sklearn.datasets import load_iris\n"
                     f"X, y = load_iris(return_X_y=True)\n"
                     f"model = load_model({str(path)!r})\n"
                     f"print(type(model).__name__, (model.predict(X) == y).mean() > 0.9)")
    assert out.split() == ["RandomForestClassifier", "True"]


# ----------------------------------------------------------------------- compile notice
def test_compile_notice_is_one_line_for_our_kernels_only(capfd, monkeypatch):
    from numba import njit

    def ours(x):
        return x + 1

    def theirs(x):
        return x + 2

    ours.__module__ = "cipherforest._notice_test"
    theirs.__module__ = "somebody_else"
    monkeypatch.setattr(_compile_notice.NOTICE, "shown", False)
    njit(theirs)(1)
    assert capfd.readouterr().err == ""
    njit(ours)(1)
    njit(ours)(1.5)  # a second compilation says nothing more
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "compiling numba kernels" in err



def test_compile_notice_lets_functions_without_a_module_compile(capfd, monkeypatch):
    # exec() without __name__ makes functions whose __module__ is None: numba must still
    # compile them in a process that imported cipherforest, silently.
    from numba import njit

    namespace = {}
    exec("def anonymous(x):\n    return x * 3\n", namespace)
    assert namespace["anonymous"].__module__ is None
    monkeypatch.setattr(_compile_notice.NOTICE, "shown", False)
    assert njit(namespace["anonymous"])(2) == 6
    assert capfd.readouterr().err == ""

# --------------------------------------------------------------------------------- CLI
def test_cli_version_and_plain_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"cipherforest {cipherforest.__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text and ":class:" not in text
    assert "demo" in text and "compare" in text


def test_compare_options_select_datasets_trees_and_seed(capsys):
    out = io.StringIO()
    rows = run_comparison(out=out, datasets=["wine"], n_estimators=3, random_state=1)
    assert {row["dataset"] for row in rows} == {"wine"}
    assert len(rows) == 6
    assert all(0.5 < row["accuracy"] <= 1.0 for row in rows)
    assert "breast_cancer" not in out.getvalue()
    with pytest.raises(SystemExit):
        main(["compare", "--datasets", "iris"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", "--trees", "0"])
    assert "--trees must be at least 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown datasets"):
        run_comparison(out=out, datasets=["iris"])
    assert set(COMPARE_DATASETS) == {"breast_cancer", "wine", "digits"}


# --------------------------------------------------------------------------- export
@pytest.mark.parametrize("make", [
    lambda: cipherforest.RandomForestClassifier(3, random_state=0),
    lambda: cipherforest.GradientBoostingClassifier(n_estimators=2, random_state=0),
    lambda: cipherforest.AdaBoostClassifier(n_estimators=2, random_state=0),
])
def test_export_on_an_ensemble_says_to_pass_one_of_its_trees(make):
    from cipherforest.tree import export_text, plot_tree
    X, y = load_iris(return_X_y=True)
    model = make()
    for fitted in (False, True):
        if fitted:
            model.fit(X, y)
        for function in (export_text, plot_tree):
            with pytest.raises(TypeError, match=r"estimators_") as info:
                function(model)
            assert type(model).__name__ in str(info.value)
    # The advice works: one of the forest's trees exports.
    if isinstance(model, cipherforest.RandomForestClassifier):
        assert "class:" in export_text(model.estimators_[0])


# -------------------------------------------------------------------------------- io
def test_save_into_a_missing_folder_names_the_folder(tmp_path):
    from cipherforest.io import save_model
    X, y = load_iris(return_X_y=True)
    model = cipherforest.DecisionTreeClassifier(random_state=0).fit(X, y)
    missing = tmp_path / "no" / "such"
    with pytest.raises(FileNotFoundError, match="folder .*no.*such.* does not exist") as info:
        save_model(model, missing / "tree.cfmodel")
    assert info.value.filename == str(missing)
    assert not (tmp_path / "no").exists()
    assert os.listdir(tmp_path) == []


# -------------------------------------------------------------------------------- GIPE
def test_gipe_feature_names_and_pandas_output():
    from cipherforest.privacy import GiniPreservingEncryptor
    X, y = load_iris(return_X_y=True, as_frame=True)
    plain = GiniPreservingEncryptor(random_state=0)
    expected = plain.fit_transform(X, y)
    assert list(plain.get_feature_names_out()) == list(X.columns)
    assert list(plain.get_feature_names_out(list(X.columns))) == list(X.columns)
    with pytest.raises(ValueError):
        plain.get_feature_names_out(["a", "b", "c", "d"])

    framed = GiniPreservingEncryptor(random_state=0).set_output(transform="pandas")
    out = framed.fit_transform(X, y)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(X.columns)
    np.testing.assert_array_equal(out.to_numpy(), expected)
    again = framed.transform(X.iloc[:10])
    assert isinstance(again, pd.DataFrame)
    np.testing.assert_array_equal(again.to_numpy(), expected[:10])
    np.testing.assert_array_equal(again.index, X.index[:10])
    # Without names, scikit-learn's x0..x3.
    numpy_fit = GiniPreservingEncryptor(random_state=0).fit(X.to_numpy(), y)
    assert list(numpy_fit.get_feature_names_out()) == ["x0", "x1", "x2", "x3"]
