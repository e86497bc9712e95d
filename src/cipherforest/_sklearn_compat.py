"""scikit-learn's private names that the estimators build on, imported in this module only.

Parameter validation (``_param_validation``), the fit context that runs it (``_fit_context``),
``_check_sample_weight``, ``_safe_indexing`` and two names of ``sklearn.tree._tree`` are
private in scikit-learn and may move between its releases; keeping every such import here
leaves one file to change when they do. Public scikit-learn names are imported where they
are used.
"""

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, Interval, RealNotInt, StrOptions
from sklearn.utils.validation import _check_sample_weight

__all__ = ["HasMethods", "Interval", "RealNotInt", "StrOptions", "_check_sample_weight",
           "_fit_context", "_safe_indexing", "restore_tree_dtype_names"]


def restore_tree_dtype_names() -> None:
    """Put back ``sklearn.tree._tree.DTYPE`` and ``DOUBLE``, which scikit-learn 1.9 removed.

    diffprivlib (the DiffPrivRFs baseline of the evaluation) imports them, so without them
    ``import diffprivlib`` fails.
    """
    import sklearn.tree._tree as sk_tree

    if not hasattr(sk_tree, "DOUBLE"):
        sk_tree.DOUBLE = np.float64
    if not hasattr(sk_tree, "DTYPE"):
        sk_tree.DTYPE = np.float32
