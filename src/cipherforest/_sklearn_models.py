"""The scikit-learn classes a model file may hold, and the fitted state each one needs.

:func:`cipherforest.io.save_model` saves cipherforest's estimators and, around them,
scikit-learn ``Pipeline``\\ s and ``ColumnTransformer``\\ s whose steps are cipherforest
estimators or one of the well-known scikit-learn transformers listed in :data:`SKLEARN_MODELS`
— an explicit allow-list, since without pickle every class must be rebuilt from its
parameters and fitted attributes. A scikit-learn class keeps part of its fitted state in
private attributes (``OneHotEncoder._n_features_outs``, ``ColumnTransformer._columns``);
each entry names those its ``transform`` reads (checked with scikit-learn 1.9 by
``tests/io/test_io_sklearn.py``), and a file records
the scikit-learn version it was written with, since that private state is not a stable
interface: :func:`check_sklearn_version` refuses a file from another minor version.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

#: Private attribute every scikit-learn transformer may hold: its ``set_output`` choice.
OUTPUT_CONFIG = "_sklearn_output_config"


@dataclass(frozen=True)
class SklearnModel:
    """One allow-listed scikit-learn class.

    Attributes
    ----------
    path : str
        Public import path (``"sklearn.preprocessing.StandardScaler"``), the class's name in
        model files.
    private_state : tuple of str
        Private fitted attributes to save (when the object has them) besides the public ones
        (names ending with ``_``).
    fitted_params : tuple of str
        Parameters that hold fitted estimators (``Pipeline.steps``): saved with the fitted
        state of the estimators in them, not as unfitted templates.
    """

    path: str
    private_state: tuple[str, ...] = ()
    fitted_params: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[1]

    def load_class(self) -> type:
        module, name = self.path.rsplit(".", 1)
        return getattr(importlib.import_module(module), name)


_ENCODER_STATE = ("_infrequent_enabled", "_infrequent_indices",
                  "_default_to_infrequent_mappings")

#: The allow-list, by public path.
SKLEARN_MODELS: dict[str, SklearnModel] = {model.path: model for model in (
    SklearnModel("sklearn.pipeline.Pipeline", fitted_params=("steps",)),
    SklearnModel("sklearn.compose.ColumnTransformer",
                 ("_columns", "_transformer_to_input_indices", "_remainder", "_n_features")),
    SklearnModel("sklearn.preprocessing.StandardScaler"),
    SklearnModel("sklearn.preprocessing.MinMaxScaler"),
    SklearnModel("sklearn.preprocessing.MaxAbsScaler"),
    SklearnModel("sklearn.preprocessing.RobustScaler"),
    SklearnModel("sklearn.preprocessing.Normalizer"),
    SklearnModel("sklearn.preprocessing.Binarizer"),
    SklearnModel("sklearn.preprocessing.OneHotEncoder",
                 (*_ENCODER_STATE, "_drop_idx_after_grouping", "_n_features_outs")),
    SklearnModel("sklearn.preprocessing.OrdinalEncoder", (*_ENCODER_STATE, "_missing_indices")),
    SklearnModel("sklearn.preprocessing.PolynomialFeatures",
                 ("_min_degree", "_max_degree", "_n_out_full")),
    SklearnModel("sklearn.preprocessing.KBinsDiscretizer", ("_encoder",)),
    SklearnModel("sklearn.preprocessing.QuantileTransformer"),
    SklearnModel("sklearn.preprocessing.PowerTransformer", ("_scaler",)),
    # Only without functions (the identity: ColumnTransformer's fitted remainder="passthrough").
    SklearnModel("sklearn.preprocessing.FunctionTransformer"),
    SklearnModel("sklearn.impute.SimpleImputer", ("_fit_dtype", "_fill_dtype")),
    SklearnModel("sklearn.impute.MissingIndicator", ("_precomputed", "_n_features")),
    SklearnModel("sklearn.decomposition.PCA", ("_fit_svd_solver",)),
)}


def sklearn_model_of(obj: Any) -> SklearnModel | None:
    """The allow-list entry of ``obj``'s class, or None when it is not allow-listed (or not
    a scikit-learn class at all)."""
    cls = type(obj)
    if not cls.__module__.startswith("sklearn."):
        return None
    for model in SKLEARN_MODELS.values():
        if model.name == cls.__name__ and model.load_class() is cls:
            return model
    return None


def check_saveable(model: SklearnModel, obj: Any) -> None:
    """Refuse an allow-listed object whose parameters hold code (``FunctionTransformer``
    with a function): a file without pickle cannot hold a Python function."""
    if model.name == "FunctionTransformer" and (
            obj.func is not None or obj.inverse_func is not None
            or obj.feature_names_out not in (None, "one-to-one")):
        raise TypeError("cannot save a FunctionTransformer with a function (func, "
                        "inverse_func or a callable feature_names_out): model files hold no "
                        "code; only the identity FunctionTransformer() is supported")


def private_state(model: SklearnModel, obj: Any) -> dict[str, Any]:
    """The private fitted attributes of ``obj`` that its entry lists, as far as it has them."""
    names = (*model.private_state, OUTPUT_CONFIG)
    return {name: vars(obj)[name] for name in names if name in vars(obj)}


def allowed_private_names(model: SklearnModel) -> frozenset[str]:
    """The private attribute names a model file may set on an instance of ``model``."""
    return frozenset((*model.private_state, OUTPUT_CONFIG))


def sklearn_version() -> str:
    """The installed scikit-learn version."""
    import sklearn

    return sklearn.__version__


def _minor(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:2])


def check_sklearn_version(saved: Any) -> str | None:
    """None when a file written with scikit-learn ``saved`` may be loaded here, else the
    reason it may not (another minor version: the private state may mean other things)."""
    installed = sklearn_version()
    if not isinstance(saved, str) or _minor(saved) != _minor(installed):
        return (f"the model holds scikit-learn classes saved with scikit-learn {saved}, and "
                f"this environment has {installed}: their fitted state is only read with the "
                "same minor version (refit the model, or load it with that version)")
    return None


def supported_message() -> str:
    """What model files can hold, for the error raised when a class is not supported."""
    names = ", ".join(model.name for model in SKLEARN_MODELS.values()
                      if model.name not in ("Pipeline", "ColumnTransformer"))
    return ("model files hold cipherforest's estimators, and scikit-learn Pipelines and "
            "ColumnTransformers whose steps are those or one of the scikit-learn transformers "
            f"{names} (the identity FunctionTransformer only); a class of your own can be "
            "registered with cipherforest.io.register_model_class")
