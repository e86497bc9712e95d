"""The private forest's parameters, in one table used by every side of the protocol.

:data:`PARAMETERS` lists each parameter of :class:`~cipherforest.privacy.PrivateForestClient`
once: its default, its scikit-learn constraint, and, for the forest parameters the server
must know, its range on the wire. From the table come

* the estimators' ``_parameter_constraints`` (client and simulator: :func:`constraints`),
* the ``setup`` message's forest fields (:func:`forest_meta`, resolved for the data),
* the server's and the client's validation of those fields (:meth:`ForestSpec.from_meta`),

so a range changes in one place. :func:`check_selection_params` holds the rules that tie
parameters together (``label_epsilon`` with ``split_selection``).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from sklearn.utils.validation import check_random_state

from ..._sklearn_compat import Interval, RealNotInt, StrOptions
from ...core import resolve_max_features, resolve_n_draws
from ..dp import DEFAULT_LABEL_DELTA
from ..he.schemes import SCHEMES
from .messages import ProtocolError
from .selections import SELECTIONS, selection

__all__ = ["CLASSIFIER_SELECTIONS", "DECIDE_FROM", "DEFAULT_RR_EPSILON",
           "DEFAULT_SPLIT_SELECTION", "LEARNERS",
           "NOISE_CORRECTIONS", "PARAMETERS",
           "SPLIT_SELECTIONS", "ForestSpec", "Parameter", "check_selection_params",
           "constraints", "forest_meta", "forest_seed", "label_epsilon"]

#: How a node's split is chosen: by the client from its counts ("gini", "dp") or target
#: sums ("paper", regressors), by the server from randomized-response labels ("rr"), or at
#: random by the server ("blind"); one object each (:mod:`.selections`).
SPLIT_SELECTIONS = tuple(SELECTIONS)
#: Those a classifier takes (``"paper"`` is the regressor's exact variance rule).
CLASSIFIER_SELECTIONS = ("gini", "dp", "rr", "blind")
#: The default mode and its ε per row for the whole fit (docs/threat_model.md: the accuracy
#: and attack curves it was chosen from).
DEFAULT_SPLIT_SELECTION = "rr"
DEFAULT_RR_EPSILON = SELECTIONS["rr"].default_epsilon
#: Where the client's split choices ("gini", "dp") come from: its own class counts (the
#: server's decrypted counts only audited, a difference recorded and reported after the
#: fit) or the server's decrypted counts (the paper's flow: a difference refuses the round,
#: which a malicious server reads as one label bit; kept for the evaluation).
DECIDE_FROM = ("own", "server")

#: What a session trains (``setup``'s ``learner``; absent: a classifier): a forest of
#: classification trees, of regression trees ("rr", "blind", "paper" only), or
#: gradient-boosted regression trees on randomized-response labels (log loss) or on
#: privatised targets (squared error), "rr" only; a boosting server's ``n_estimators`` is
#: its number of trees, rounds × trees per round.
#: The server's growth per learner is in :mod:`.server.learners`.
LEARNERS = ("classifier", "regressor", "gradient_boosting", "gradient_boosting_regressor")
#: What a ``"gradient_boosting"`` session's server boosts on (:mod:`..boosting_kernels`).
NOISE_CORRECTIONS = ("none", "unbiased")

MAX_ESTIMATORS = 10_000
MIN_ROUND_BYTES = 1 << 18
MAX_BINS = 255
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class Parameter:
    """One parameter: its default and scikit-learn constraint list."""

    default: Any
    constraint: list | str


PARAMETERS: dict[str, Parameter] = {
    # The forest (RandomForestClassifier's meaning; sent in setup, resolved for the data).
    "n_estimators": Parameter(100, [Interval(Integral, 1, MAX_ESTIMATORS, closed="both")]),
    "max_features": Parameter("sqrt", [Interval(Integral, 1, None, closed="left"),
                                       Interval(RealNotInt, 0.0, 1.0, closed="right"),
                                       StrOptions({"sqrt", "log2"}), None]),
    "max_depth": Parameter(None, [Interval(Integral, 1, None, closed="left"), None]),
    "min_samples_split": Parameter(2, [Interval(Integral, 2, None, closed="left")]),
    "min_samples_leaf": Parameter(1, [Interval(Integral, 1, None, closed="left")]),
    "bootstrap": Parameter(True, ["boolean"]),
    "max_samples": Parameter(None, [None, Interval(RealNotInt, 0.0, 1.0, closed="right"),
                                    Interval(Integral, 1, None, closed="left")]),
    "max_bins": Parameter(None, [Interval(Integral, 2, MAX_BINS, closed="both"), None]),
    "random_state": Parameter(None, ["random_state"]),
    "split_selection": Parameter(DEFAULT_SPLIT_SELECTION,
                                 [StrOptions(set(CLASSIFIER_SELECTIONS))]),
    # What the server may learn (the client's side only).
    "security_parameter": Parameter(6.4, [Interval(Real, 1.0, None, closed="left")]),
    "gipe_mode": Parameter("quantile", [StrOptions({"quantile", "order", "paper"})]),
    "gipe_bins": Parameter(32, [Interval(Integral, 2, None, closed="left")]),
    "reveal_leaves": Parameter(False, ["boolean"]),
    "decide_from": Parameter("own", [StrOptions(set(DECIDE_FROM))]),
    "label_epsilon": Parameter(None, [Interval(Real, 0.0, None, closed="neither"), None]),
    "label_delta": Parameter(DEFAULT_LABEL_DELTA, [Interval(Real, 0.0, 1.0, closed="neither")]),
    "privacy_ledger": Parameter(None, [str, None]),
    "max_total_epsilon": Parameter(None, [Interval(Real, 0.0, None, closed="left"), None]),
    # The homomorphic layer and the rounds.
    "scheme": Parameter("ckks", [StrOptions(set(SCHEMES))]),
    "max_round_bytes": Parameter(None, [Interval(Integral, MIN_ROUND_BYTES, None,
                                                 closed="left"), None]),
    "label_chunk": Parameter(2, [Interval(Integral, 1, 64, closed="both")]),
    "label_pack_rows": Parameter(None, [Interval(Integral, 1, None, closed="left"), None]),
    "prediction_reply": Parameter("ids", [StrOptions({"ids", "sums", "leaves"})]),
    # Where the server is.
    "server": Parameter(None, "no_validation"),
    "n_jobs": Parameter(None, [Integral, None]),
    "verbose": Parameter(0, ["verbose"]),
    "progress": Parameter(None, ["boolean", None]),
    "server_key": Parameter(None, [str, None]),
    "timeout": Parameter(120.0, [Interval(Real, 0.0, None, closed="left")]),
}

#: Parameters a simulated fit (no homomorphic layer, no transport) takes.
SIMULATED_PARAMETERS = ("n_estimators", "max_features", "max_depth", "min_samples_split",
                        "min_samples_leaf", "bootstrap", "max_samples", "max_bins",
                        "random_state", "security_parameter", "gipe_mode", "gipe_bins",
                        "reveal_leaves", "split_selection", "label_epsilon", "label_delta")


def constraints(names=None) -> dict[str, list | str]:
    """``_parameter_constraints`` for the parameters ``names`` (all by default)."""
    names = PARAMETERS if names is None else names
    return {name: PARAMETERS[name].constraint for name in names}


def check_selection_params(params: Mapping[str, Any]) -> None:
    """The rules between parameters that constraints cannot say; ``ValueError`` naming the
    parameter otherwise."""
    name = params["split_selection"]
    chosen = selection(name)
    epsilon = params["label_epsilon"]
    if chosen.epsilon == "required" and epsilon is None:
        raise ValueError(f'split_selection="{name}" needs label_epsilon (ε per choice)')
    if chosen.epsilon != "unused" and epsilon is not None and not (
            isinstance(epsilon, Real) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"label_epsilon must be a finite number > 0 for "
                         f"split_selection={name!r}, got {epsilon!r}")
    if chosen.epsilon == "unused" and epsilon is not None:
        takes = " or ".join(repr(s.name) for s in sorted(  # those with a default ε first
            (s for s in SELECTIONS.values() if s.epsilon != "unused"),
            key=lambda s: s.default_epsilon is None))
        raise ValueError(f"label_epsilon is used only with split_selection={takes}, "
                         f"not {name!r}")
    delta = params.get("label_delta", DEFAULT_LABEL_DELTA)
    if not (isinstance(delta, Real) and 0.0 < delta < 1.0):
        raise ValueError(f"label_delta must lie in (0, 1), got {delta!r}")
    if params["reveal_leaves"] and not chosen.has_leaf_rule:
        raise ValueError("reveal_leaves=True is the paper's rule for "
                         "split_selection='gini' only")


def label_epsilon(params: Mapping[str, Any]) -> float | None:
    """The ε a fit uses: ``label_epsilon``, or its selection's default ε (``"rr"``: 2)."""
    if params["label_epsilon"] is None:
        return selection(params["split_selection"]).default_epsilon
    return params["label_epsilon"]


def forest_seed(random_state) -> int:
    """The forest's seed, as RandomForestClassifier reads ``random_state`` (None: the OS)."""
    if random_state is None:
        return secrets.randbits(32)
    if isinstance(random_state, Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(MAX_SEED))


def forest_meta(params: Mapping[str, Any], n_samples: int, n_features: int) -> dict:
    """The forest fields of a ``setup`` message: ``params`` (an estimator's
    ``get_params()``) resolved for data of ``n_samples × n_features``."""
    bootstrap = bool(params["bootstrap"])
    return {
        "n_estimators": int(params["n_estimators"]),
        "max_features": resolve_max_features(params["max_features"], n_features),
        "max_depth": None if params["max_depth"] is None else int(params["max_depth"]),
        "min_samples_split": int(params["min_samples_split"]),
        "min_samples_leaf": int(params["min_samples_leaf"]),
        "bootstrap": bootstrap,
        "n_draws": resolve_n_draws(params["max_samples"], n_samples) if bootstrap
        else n_samples,
        "max_bins": None if params["max_bins"] is None else int(params["max_bins"]),
        "random_state": forest_seed(params["random_state"]),
        "split_selection": params["split_selection"],
        "max_round_bytes": None if params.get("max_round_bytes") is None
        else int(params["max_round_bytes"]),
    }


@dataclass(frozen=True)
class ForestSpec:
    """Validated forest parameters of a ``setup`` message (what server and client plan by)."""

    n_estimators: int
    max_features: int
    max_depth: int  # -1: unlimited
    min_samples_split: int
    min_samples_leaf: int
    bootstrap: bool
    n_draws: int
    max_bins: int | None
    random_state: int
    max_round_bytes: int | None  # None: one round per tree level for the whole forest
    split_selection: str  # "gini" or "dp": the client chooses; "blind": the server draws
    learner: str = "classifier"  # one of LEARNERS
    # Boosting learners: the server's shrinkage; "gradient_boosting" also what it boosts on
    # and the ε of the randomized response (which the unbiased correction inverts).
    learning_rate: float | None = None
    noise_correction: str | None = None
    rr_epsilon: float | None = None

    @classmethod
    def from_meta(cls, meta: dict, n_samples: int, n_features: int) -> ForestSpec:
        """Validate the forest fields of ``meta``; :class:`ProtocolError` names a bad one."""
        def integer(name, low, high=None, allow_none=False):
            value = meta.get(name)
            if value is None and allow_none:
                return None
            if isinstance(value, bool) or not isinstance(value, int):
                raise ProtocolError(f"setup: {name} must be an integer, got {value!r}")
            if value < low or (high is not None and value > high):
                raise ProtocolError(f"setup: {name}={value} must be in [{low}, {high}]")
            return value

        if not isinstance(meta.get("bootstrap"), bool):
            raise ProtocolError("setup: bootstrap must be true or false")
        if meta.get("split_selection") not in SPLIT_SELECTIONS:
            raise ProtocolError(f"setup: split_selection must be one of {SPLIT_SELECTIONS}, "
                                f"got {meta.get('split_selection')!r}")
        learner = meta.get("learner", "classifier")
        if learner not in LEARNERS:
            raise ProtocolError(f"setup: learner must be one of {LEARNERS}, got {learner!r}")
        max_depth = integer("max_depth", 1, allow_none=True)
        min_samples_leaf = integer("min_samples_leaf", 1, n_samples)
        boosting = _boosting_fields(meta, learner) if learner.startswith("gradient") else {}
        return cls(
            n_estimators=integer("n_estimators", 1, MAX_ESTIMATORS),
            max_features=integer("max_features", 1, n_features),
            max_depth=-1 if max_depth is None else max_depth,
            min_samples_split=max(integer("min_samples_split", 2), 2 * min_samples_leaf),
            min_samples_leaf=min_samples_leaf,
            bootstrap=meta["bootstrap"],
            n_draws=integer("n_draws", 1, n_samples),
            max_bins=integer("max_bins", 2, MAX_BINS, allow_none=True),
            random_state=integer("random_state", 0, MAX_SEED),
            max_round_bytes=integer("max_round_bytes", MIN_ROUND_BYTES, allow_none=True),
            split_selection=meta["split_selection"],
            learner=learner,
            **boosting,
        )

    def to_meta(self) -> dict:
        """The ``setup`` fields this spec was read from (inverse of :meth:`from_meta`)."""
        return {
            "n_estimators": self.n_estimators, "max_features": self.max_features,
            "max_depth": None if self.max_depth < 0 else self.max_depth,
            "min_samples_split": self.min_samples_split,
            "min_samples_leaf": self.min_samples_leaf, "bootstrap": self.bootstrap,
            "n_draws": self.n_draws, "max_bins": self.max_bins,
            "random_state": self.random_state, "max_round_bytes": self.max_round_bytes,
            "split_selection": self.split_selection,
            **({} if self.learner == "classifier" else {"learner": self.learner}),
            **{name: getattr(self, name) for name in ("learning_rate", "noise_correction",
                                                       "rr_epsilon")
               if getattr(self, name) is not None},
        }


def _boosting_fields(meta: dict, learner: str) -> dict:
    """The boosting fields of a ``setup`` message for ``learner``, validated."""
    fields = {}
    if learner == "gradient_boosting_regressor":
        names = ("learning_rate",)
    else:
        names = ("learning_rate", "rr_epsilon")
        if meta.get("noise_correction") not in NOISE_CORRECTIONS:
            raise ProtocolError(f"setup: noise_correction must be one of "
                                f"{NOISE_CORRECTIONS}, got {meta.get('noise_correction')!r}")
        fields["noise_correction"] = meta["noise_correction"]
    for name in names:
        value = meta.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value > 0):
            raise ProtocolError(f"setup: {name} must be a finite number > 0, got {value!r}")
        fields[name] = float(value)
    return fields
