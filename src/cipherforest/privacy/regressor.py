"""The private regression forest: :class:`PrivateForestRegressor`.

The classifier's default flow (:class:`~cipherforest.privacy.PrivateForestClient`) for a
real-valued target: the client sends GIPE ciphers and *privatised targets* ỹ; the server grows
regression trees (squared error) on the ciphers and ỹ with the compiled grower and names the
leaf each training row reaches; the client computes every leaf's value from the TRUE targets —
by default one ridge regression over the leaves of all trees shrunk toward the leaves'
target means (:mod:`.leaf_refit`), or each leaf's bootstrap-weighted mean — and keeps it;
predictions ask the server only for the leaves the test rows reach. ỹ is a function of the
targets through an ε-label-DP mechanism (:mod:`.target_dp`), drawn once per data set from
the privacy ledger's PRF (permanent, as the classifier's randomized labels) and charged
there, so everything the server sees is post-processing of an ε-DP release.

:class:`RegressionSession` is the protocol engine: :class:`~.protocol.ClientSession` with
the regressor's release, leaf means and predictions (``setup``'s ``learner`` is
``"regressor"``; the server's side is :mod:`.protocol.server.learners`).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._sklearn_compat import Interval, RealNotInt, StrOptions, _fit_context
from .client import new_transport
from .dp import DEFAULT_LABEL_DELTA, format_privacy_report
from .gipe import GiniPreservingEncryptor
from .he import BlockLayout, SecretContext
from .leaf_refit import ridge_leaf_values
from .ledger import PrivacyLedger, default_ledger_path
from .protocol import ClientSession, Message, ProtocolError, ProtocolStats, constraints
from .protocol.decisions import target_statistics
from .protocol.leaf_table import LeafTable
from .protocol.params import DEFAULT_RR_EPSILON, forest_meta
from .protocol.replies import CKKS_TARGET_TOLERANCE, query_sums
from .protocol.selections import selection
from .protocol.session import new_gipe_encryptor
from .target_dp import (
    BinnedResponse,
    duchi_targets,
    laplace_targets,
    noisy_quantile_bounds,
    piecewise_targets,
)

__all__ = ["LeafMeans", "PrivateForestRegressor", "RegressionModelMixin", "RegressionSession",
           "check_target_bounds"]

#: Split selections of the regressor: trees on the privatised targets, label-blind, or the
#: exact variance rule on the true targets (no guarantee).
REGRESSOR_SELECTIONS = ("rr", "blind", "paper")
#: How the client sets the leaf values from the true targets (:mod:`.leaf_refit`): the
#: boosting regressor's, and the forest's (which also shrinks toward its leaf means).
LEAF_REFITS = ("mean", "ridge")
FOREST_LEAF_REFITS = (*LEAF_REFITS, "ridge_to_means")
#: How ``"rr"`` privatises the targets.
TARGET_MECHANISMS = ("bins", "laplace", "duchi", "piecewise")
#: The unbiased mechanisms: each row's report from its clipped target and one uniform.
UNBIASED_MECHANISMS = {"duchi": duchi_targets, "piecewise": piecewise_targets}
#: The unbiased mechanisms clip the targets to the noisy prior's quantiles CLIP_SHARE and
#: 1 - CLIP_SHARE (benchmarks/label_privacy_regression.py; docs/private_forest.md).
CLIP_SHARE = 0.1
#: ``privacy_report_``'s words for each mechanism.
_MECHANISM_WORDS = {
    "laplace": "clipped targets plus Laplace noise",
    "duchi": "Duchi et al.'s unbiased two-valued report of the targets",
    "piecewise": "Wang et al.'s unbiased piecewise mechanism on the targets"}

# What the engine needs of the classifier's parameters, fixed for a regressor: no label
# ciphertexts (the client computes the leaves), prediction by leaf ids.
_ENGINE_DEFAULTS = {"scheme": "ckks", "label_chunk": 2, "label_pack_rows": None,
                    "prediction_reply": "ids", "reveal_leaves": False, "decide_from": "own",
                    "label_delta": DEFAULT_LABEL_DELTA, "max_round_bytes": None}


@dataclass(frozen=True)
class LeafMeans:
    """Per tree, the leaves training rows reach, their bootstrap draws and target sums, and
    (``leaf_refit`` ``"ridge"`` or ``"ridge_to_means"``) the refitted leaf values.

    Attributes
    ----------
    table : LeafTable
        The leaves (ids per tree) with one count column: the bootstrap draws in each.
    sums : ndarray of shape (n_leaves,)
        The draws-weighted sum of the true targets of each leaf's rows (secret).
    values : ndarray of shape (n_leaves,) or None
        The leaf values of :func:`~.leaf_refit.ridge_leaf_values` (secret); None: each
        leaf's value is its mean ``sums / counts``.
    """

    table: LeafTable
    sums: np.ndarray
    values: np.ndarray | None = None

    @classmethod
    def from_rows(cls, reached: np.ndarray, targets: np.ndarray,
                  weights_of: Callable[[int], np.ndarray], refit: str = "mean") -> LeafMeans:
        """The leaves of training rows ``reached[i, t]``, each row weighing its bootstrap
        draws ``weights_of(t)[i]``; ``refit="ridge"`` also refits the leaf values of all
        trees at once from every training row's leaves, ``"ridge_to_means"`` shrinking
        them toward the leaves' means and cross-validating through the trees that did not
        draw the held-out row (:mod:`.leaf_refit`)."""
        reached = np.asarray(reached, dtype=np.int64)
        targets = np.asarray(targets, dtype=np.float64)
        table = LeafTable.from_rows(reached, np.zeros(targets.shape[0], dtype=np.int64),
                                    weights_of, 1)
        sums = []
        for t in range(reached.shape[1]):
            weights = np.asarray(weights_of(t), dtype=np.float64)
            rows = np.flatnonzero(weights > 0)
            _, where = np.unique(reached[rows, t], return_inverse=True)
            sums.append(np.bincount(where, weights[rows] * targets[rows]))
        values = None
        if refit == "ridge":
            values = ridge_leaf_values(table.rows(reached), table.leaf_ids.shape[0], targets)
        elif refit == "ridge_to_means":
            in_bag = np.column_stack([np.asarray(weights_of(t)) > 0
                                      for t in range(reached.shape[1])])
            values = ridge_leaf_values(table.rows(reached), table.leaf_ids.shape[0], targets,
                                       toward_means=True, in_bag=in_bag)
        return cls(table, np.concatenate(sums), values)

    def predict(self, reached: np.ndarray) -> np.ndarray:
        """Mean over the trees of the values of the leaves ``reached``; a leaf no training
        row reaches is refused (:class:`ProtocolError`)."""
        rows = self.table.rows(reached)
        if self.values is not None:
            return self.values[rows].mean(axis=1)
        return (self.sums[rows] / self.table.counts[rows, 0]).mean(axis=1)

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {**self.table.to_arrays(), "leaf_target_sums": self.sums}
        if self.values is not None:
            arrays["leaf_values"] = self.values
        return arrays

    @classmethod
    def from_arrays(cls, arrays) -> LeafMeans | None:
        """The leaves saved by :meth:`to_arrays`, or None if ``arrays`` holds none."""
        table = LeafTable.from_arrays(arrays)
        if table is None:
            return None
        sums = np.asarray(arrays.get("leaf_target_sums", np.zeros(0)), dtype=np.float64)
        values = arrays.get("leaf_values")
        if values is not None:
            values = np.asarray(values, dtype=np.float64)
        if (table.counts.shape[1] != 1 or sums.shape != (table.counts.shape[0],)
                or not np.all(np.isfinite(sums))):
            raise ValueError("the saved leaf target sums are inconsistent")
        if values is not None and (values.shape != sums.shape
                                   or not np.all(np.isfinite(values))):
            raise ValueError("the saved leaf values are inconsistent")
        return cls(table, sums, values)


#: The forest regressor's ``min_samples_leaf`` under ``"rr"`` and ``"blind"`` with
#: ``"ridge_to_means"`` when none is given.
RR_MIN_SAMPLES_LEAF = 5


def default_min_samples_leaf(params: Mapping[str, Any]) -> int:
    """``min_samples_leaf`` of a regressor given None: :data:`RR_MIN_SAMPLES_LEAF` for
    trees grown on ỹ (``"rr"``) or label-blind (``"blind"``) whose leaves the client refits
    by ``"ridge_to_means"``, RandomForestRegressor's 1 otherwise (measured to lose with
    leaf means)."""
    if (params["split_selection"] in ("rr", "blind")
            and params.get("leaf_refit") == "ridge_to_means"):
        return RR_MIN_SAMPLES_LEAF
    return 1


class RegressionSession(ClientSession):
    """The regressor's protocol engine (see the module docstring).

    Parameters
    ----------
    params : mapping
        :class:`PrivateForestRegressor`'s parameters (its ``get_params()``).
    transport : Transport or None

    Attributes
    ----------
    labels : ndarray of float64 or None
        The true targets (secret), until the leaves are computed from them.
    mechanism : BinnedResponse or None
        The RR-on-bins mechanism of the last ``"rr"`` release (``target_mechanism="bins"``).
    release : dict
        What the last release spent and how (``privacy_report_``'s numbers).
    """

    leaf_table_type = LeafMeans

    def __init__(self, params: Mapping[str, Any], transport=None):
        params = {**_ENGINE_DEFAULTS, **params}
        if params.get("min_samples_leaf") is None:
            params["min_samples_leaf"] = default_min_samples_leaf(params)
        super().__init__(params, transport)
        self.mechanism: BinnedResponse | None = None
        self.release: dict = {}

    @property
    def n_classes(self) -> int:
        """The label width of the slot layout, which the server makes for every session
        (2 for a learner without classes: ``"paper"``'s rows ``(y', y'²)``; the other
        selections send no label ciphertexts)."""
        return 2

    @property
    def round_counts(self) -> bool:
        """``"paper"``'s rounds carry the server's encrypted target sums (the paper's flow:
        checked, a difference refuses the round); the other selections have no rounds."""
        return self.asks_rounds

    def label_rows(self) -> np.ndarray:
        """The scaled targets' statistics ``(y', y'²)`` per row
        (:func:`~.protocol.decisions.target_statistics`): what ``"paper"``'s queries sum."""
        return target_statistics(self.labels)

    def encrypt_label_rows(self, rows: slice) -> list[bytes]:
        return self.he.encrypt_packed_rows(self.label_rows()[rows], self.layout)

    def read_counts(self, query: Message) -> tuple[np.ndarray, float]:
        """The decrypted target sums of a ``"paper"`` round and how far they may differ
        from the client's own: :data:`~.protocol.replies.CKKS_TARGET_TOLERANCE` times the
        round's ``2^shift`` (the scale the server divided its heaviest nodes' sums by)."""
        sums = query_sums(self.he, self.layout, query)
        return sums, CKKS_TARGET_TOLERANCE * 2.0 ** query.value("shift", int)

    def decision_blocks(self, counts: np.ndarray, own: np.ndarray,
                        n_candidates: np.ndarray) -> np.ndarray:
        """The client's own exact sums: the decrypted ones equal them within the CKKS
        tolerance (checked), so noise cannot flip a near-tie and the trees are the plaintext
        grower's."""
        return own

    def restore(self, classes, encryptor, he, n_draws, rows_per_pack, session_id,
                labels=None, leaf_table=None, row_keys=None, release_digest=None):
        super().restore(np.zeros(0), encryptor, he, n_draws, rows_per_pack, session_id,
                        None, leaf_table, row_keys, release_digest)
        self.classes = None
        self.labels = None if labels is None else np.asarray(labels, dtype=np.float64)
        return self

    def encrypt(self, X: np.ndarray, y: np.ndarray,
                encryptor: GiniPreservingEncryptor | None = None) -> tuple[Message, Any]:
        """Offline: privatise the targets (charged in the ledger), fit GIPE on ``X``, and
        return the ``setup`` message (and no labels messages)."""
        params = self.params
        n_samples, n_features = X.shape
        meta = {**forest_meta(params, n_samples, n_features), "learner": "regressor",
                "label_ciphertexts": self.sends_labels, "label_pack_rows": None}
        y = np.asarray(y, dtype=np.float64)
        y_private = self._release(X, y, meta["n_draws"])
        if encryptor is None:
            encryptor = new_gipe_encryptor(params)
        self.encryptor = encryptor
        X_cipher = np.asarray(encryptor.fit_transform(X), dtype=np.float64)
        self.layout = layout = BlockLayout("ckks", SecretContext.slot_count("ckks"),
                                           self.n_classes, n_samples, None)
        if self.sends_labels:  # "paper": the server expands and sums target ciphertexts
            self.he = SecretContext("ckks", rotation_step=layout.stride,
                                    extra_rotations=layout.rotation_steps()[2:])
        else:
            self.he = SecretContext("ckks")  # names the session's messages; no key is used
        self.n_draws = meta["n_draws"]
        self.labels = y
        arrays = {"X": X_cipher}
        if y_private is not None:
            arrays["y_rr"] = y_private
        setup = Message("setup", meta, arrays, {"context": [self.he.public_bytes()]})
        return setup, (self._label_messages() if self.sends_labels else iter(()))

    def _release(self, X: np.ndarray, y: np.ndarray, n_draws: int) -> np.ndarray | None:
        """Open the ledger, privatise ``y`` (``"rr"``), refuse a release past
        ``max_total_epsilon`` and charge it; None for ``"blind"`` (nothing to release) and
        ``"paper"`` (checked against the ledger now with its infinite ε, charged when its
        rounds end, as the classifier's ``"gini"``)."""
        params = self.params
        self.ledger = PrivacyLedger(params.get("privacy_ledger") or default_ledger_path())
        self.row_keys = self.ledger.row_keys(X)
        self.mechanism = None
        if params["split_selection"] == "blind":
            self.release_digest = f"blind:{secrets.token_hex(16)}"
            self.release = {"epsilon": 0.0}
            return None
        if self.asks_rounds:
            self._ledger_release(X, y, n_draws)
            self.release = {"epsilon": math.inf, "constant": not np.ptp(y) > 0}
            return None
        epsilon = float(params["label_epsilon"] or DEFAULT_RR_EPSILON)
        bounds = params["target_bounds"]
        low, high = (float(y.min()), float(y.max())) if bounds is None else map(float, bounds)
        kind = params["target_mechanism"]
        if kind == "laplace":
            y_private = laplace_targets(y, low, high, epsilon,
                                        self.ledger.row_uniforms(b"laplace", X, y))
            self.release = {"epsilon": epsilon, "rr_epsilon": epsilon, "prior_epsilon": 0.0}
        elif kind != "bins":
            # The unbiased mechanisms' noise scales with the clipping range: clip to the
            # noisy prior's central quantiles (its ε spent apart), not to the bounds.
            prior_epsilon = epsilon * float(params["prior_share"])
            rr_epsilon = epsilon - prior_epsilon
            n_bins = int(params["target_bins"])
            clip = noisy_quantile_bounds(
                y, low, high, n_bins, CLIP_SHARE, prior_epsilon,
                self.ledger.data_uniforms(kind.encode() + b"-prior", X, y, n_bins))
            if not clip[1] > clip[0]:
                clip = (low, high)
            y_private = UNBIASED_MECHANISMS[kind](
                y, clip[0], clip[1], rr_epsilon, self.ledger.row_uniforms(kind.encode(), X, y))
            self.release = {"epsilon": epsilon, "rr_epsilon": rr_epsilon,
                            "prior_epsilon": prior_epsilon, "clip_low": clip[0],
                            "clip_high": clip[1]}
        else:
            prior_epsilon = epsilon * float(params["prior_share"])
            rr_epsilon = epsilon - prior_epsilon
            n_bins = int(params["target_bins"])
            self.mechanism = mechanism = BinnedResponse.fit(
                y, low, high, n_bins, rr_epsilon, prior_epsilon,
                self.ledger.data_uniforms(b"rr-bins-prior", X, y, n_bins),
                params["target_outputs"])
            codes = mechanism.codes(y)
            if mechanism.n_outputs > 1:
                codes = self.ledger.randomized_labels(X, codes, rr_epsilon,
                                                      mechanism.n_outputs)
            y_private = mechanism.values[codes]
            self.release = {"epsilon": epsilon, "rr_epsilon": rr_epsilon,
                            "prior_epsilon": prior_epsilon,
                            "n_outputs": mechanism.n_outputs,
                            "keep_probability": mechanism.keep_probability}
        self.release.update(target_mechanism=kind, bounds=(low, high),
                            bounds_from_data=bounds is None)
        if not high > low:  # a constant target: ỹ is that constant
            self.release["n_outputs"] = 1
        self.release_digest = hashlib.sha256(
            f"regressor:{kind}".encode() + np.float64(epsilon).tobytes()
            + self.row_keys.tobytes() + y_private.tobytes()).hexdigest()
        self.ledger.check(self.row_keys, epsilon, self.release_digest,
                          params.get("max_total_epsilon"))
        self.ledger.charge(f"regressor-{kind}", epsilon, 0.0, self.row_keys,
                           self.release_digest)
        return y_private

    def count_leaves(self, reached: np.ndarray, weights_of) -> LeafMeans:
        """Every leaf's draws and sum of the true targets, and the leaf values of
        ``leaf_refit`` (the client's own)."""
        return LeafMeans.from_rows(reached, self.labels, weights_of,
                                   self.params.get("leaf_refit", "mean"))

    def predict(self, X: np.ndarray, stats: ProtocolStats) -> np.ndarray:
        """The forest's prediction for the rows ``X`` (validated float64): the server names
        the leaves they reach, the client averages its own leaf values."""
        started = time.perf_counter()
        if self.leaf_table is None:
            raise ValueError("this client holds no leaf values: fit it again")
        X_cipher = np.asarray(self.encryptor.transform(X), dtype=np.float64)
        reply = self.exchange(Message("predict", self._meta({"reply": "ids"}),
                                      {"X": X_cipher}), "scores", stats)
        n_trees = int(self.params["n_estimators"])
        if (reply.value("n_rows", int) != X.shape[0] or reply.value("n_trees", int) != n_trees
                or reply.value("reply", str) != "ids"):
            raise ProtocolError(f"scores: expected the leaf ids of {X.shape[0]} rows × "
                                f"{n_trees} trees")
        values = self.leaf_table.predict(reply.array("leaf", "int32", 2))
        stats.client_seconds = time.perf_counter() - started - stats.server_seconds
        stats.reply = "ids"
        return values


def regression_report(split_selection: str, release: Mapping[str, Any], gipe_mode: str,
                      cumulative: tuple[float, float] | None) -> dict:
    """What a regressor's fit guarantees about the targets against the server, as a dict
    of the shape :func:`~cipherforest.privacy.dp.privacy_report` gives (its text form is
    :func:`~cipherforest.privacy.dp.format_privacy_report`'s)."""
    epsilon = float(release["epsilon"])
    saw = ["the GIPE cipher matrix (its order and equalities are functions of X alone)",
           "the trees it grew, and the leaf each training and test row reaches"]
    if split_selection == "blind":
        guarantee = "nothing the server sees depends on the targets (ε = 0)"
        saw.append("random trees drawn from the ciphers and the forest seed alone")
    elif split_selection == "paper":
        guarantee = ("none: the paper's mode (splits by the exact variance rule on the true "
                     "targets); the trees reveal which rows have close targets "
                     "(docs/private_forest.md measures it)")
        saw.extend(["CKKS ciphertexts of the scaled targets and the public homomorphic "
                    "keys (no secret key)", *selection("paper").server_saw])
    else:
        how = ("randomized response on bins (Ghazi et al., ICLR 2023): "
               f"{release['n_outputs']} output values, ε = {release['rr_epsilon']:.4g}, "
               f"prior ε = {release['prior_epsilon']:.4g}"
               if release["target_mechanism"] == "bins"
               else f"{_MECHANISM_WORDS['laplace']} at ε = {epsilon:.4g}"
               if release["target_mechanism"] == "laplace"
               else f"{_MECHANISM_WORDS[release['target_mechanism']]} clipped to "
                    f"[{release['clip_low']:.4g}, {release['clip_high']:.4g}] (the prior's "
                    f"{CLIP_SHARE:.0%} and {1 - CLIP_SHARE:.0%} quantiles), "
                    f"ε = {release['rr_epsilon']:.4g}, prior ε = {release['prior_epsilon']:.4g}")
        guarantee = (f"ε = {epsilon:.4g}-label-DP per row for the whole fit ({how}): any "
                     f"attack's posterior odds on a property of a row's target are at most "
                     f"e^ε = {math.exp(min(epsilon, 700.0)):.3g} times its prior odds")
        if release["bounds_from_data"]:
            guarantee += ("; the target bounds were taken from the data (its minimum and "
                          "maximum are not covered by ε: give target_bounds)")
        saw.append("the privatised target of every row (permanent: the same on every fit)")
    return {"learner": "regressor", "split_selection": split_selection,
            "target_mechanism": release.get("target_mechanism"), "epsilon": epsilon,
            "delta": 0.0, "rr_epsilon": release.get("rr_epsilon", 0.0),
            "prior_epsilon": release.get("prior_epsilon", 0.0),
            "n_outputs": release.get("n_outputs"), "bounds": release.get("bounds"),
            "bounds_from_data": release.get("bounds_from_data", False),
            "guarantee": guarantee, "server_saw": saw, "server_honest": True,
            "server_deviations": [],
            "cumulative_epsilon": None if cumulative is None else cumulative[0],
            "cumulative_delta": None if cumulative is None else cumulative[1],
            "server_did_not_see": ["the targets", "the feature values", "any secret key",
                                   "the leaf values", "the predictions"]}


class SessionModelMixin:
    """What the private estimators built on a :class:`RegressionSession`-style client share:
    a fit's GIPE encryptor, the one-shot fit through a server, the session's end, and saving
    and loading (the private forest's model directory)."""

    def new_encryptor(self) -> GiniPreservingEncryptor:
        """The unfitted GIPE encryptor a fit uses (keys and jitter from the OS; tests may
        override it)."""
        return new_gipe_encryptor(self.get_params())

    def _fit_through_server(self, X, y):
        """The one-shot fit: the offline stage (``encrypt``), then upload and train through
        the embedded server or ``server=URL``, and the fitted attributes (``_fitted``)."""
        stats = ProtocolStats()
        started = time.perf_counter()
        setup, labels = self.encrypt(X, y)
        engine = self.client_session_
        engine.transport, self.server_ = new_transport(self.server, self.n_jobs,
                                                       self.server_key, self.timeout)
        engine.upload(setup, labels, stats, started)
        self.session_ = engine.session_id
        engine.train(setup, stats, started)
        return self._fitted(stats)

    def close(self) -> None:
        """Ask the server to forget this model's session."""
        check_is_fitted(self, "session_")
        self.client_session_.close()
        del self.session_

    def save(self, path) -> None:
        """Save the fitted model (keys, GIPE state, leaf values, server session,
        ``privacy_report_``) to the directory ``path`` (0600 files, no pickle), as
        :meth:`PrivateForestClient.save <cipherforest.privacy.PrivateForestClient.save>`."""
        from .package import save_client

        check_is_fitted(self, "session_")
        save_client(self, path)

    @classmethod
    def load(cls, path, *, server=None, server_key=None):
        """A model saved by :meth:`save`, connected to its server session again."""
        from .package import load_client

        return load_client(cls, path, server=server, server_key=server_key)


def check_target_bounds(bounds) -> None:
    """Refuse ``target_bounds`` that are not None or two finite numbers ``low < high``."""
    if bounds is not None and not (
            len(bounds) == 2 and all(isinstance(b, Real) and math.isfinite(b)
                                     for b in bounds) and bounds[0] < bounds[1]):
        raise ValueError(f"target_bounds must be two finite numbers (low, high) with "
                         f"low < high, got {bounds!r}")


class RegressionModelMixin(SessionModelMixin):
    """The fit of the private regressors in its two stages, :meth:`encrypt` (offline) and
    :meth:`train` (an uploaded session), as the staged CLI runs them; a class gives its
    ``engine_type``, ``_check_params()`` and ``_report(engine)``."""

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Encrypt ``X``, privatise ``y``, let the server grow the trees, and compute the
        leaf values from the true targets.

        Raises
        ------
        ValueError
            ``y`` holds NaN or inf, ``label_epsilon`` is not a finite number > 0, or
            ``target_bounds`` are not two finite numbers ``low < high``.
        """
        return self._fit_through_server(X, y)

    def encrypt(self, X, y) -> tuple[Message, Any]:
        """The offline stage of :meth:`fit`: validate, privatise the targets (charged in the
        ledger now), fit GIPE, and return the ``setup`` message and an empty iterator of
        ``labels`` messages (nothing is sent). ``cipherforest client encrypt --learner
        regressor`` saves what this returns, the release record with it."""
        self._validate_params()
        self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        max_samples = getattr(self, "max_samples", None)
        if isinstance(max_samples, Integral) and max_samples > X.shape[0]:
            raise ValueError(f"max_samples={max_samples} exceeds the {X.shape[0]} "
                             "training rows")
        engine = self.engine_type(self.get_params())
        setup, labels = engine.encrypt(X, y, self.new_encryptor())
        self.encryptor_ = engine.encryptor
        self.client_session_ = engine
        return setup, labels

    def train(self, setup: Message, transport, *, answered=(), on_answer=None):
        """The training stage of :meth:`fit` for an uploaded session (the staged CLI): ask
        the server to grow the trees through ``transport`` and compute the leaf values.
        ``answered`` and ``on_answer`` are the classifier's (``"paper"``'s rounds; the
        other selections have none)."""
        check_is_fitted(self, "client_session_")
        stats = ProtocolStats()
        engine = self.client_session_
        engine.transport = transport
        engine.train(setup, stats, answered=answered, on_answer=on_answer)
        return self._fitted(stats)

    def _fitted(self, stats: ProtocolStats):
        """Fitted attributes once the engine has trained (its ``release`` says what the
        fit spent, also after a staged encrypt)."""
        engine = self.client_session_
        engine.labels = None  # the leaf values hold what predictions need
        self.session_ = engine.session_id
        self.privacy_report_ = self._report(engine)
        self.epsilon_spent_ = self.privacy_report_["epsilon"]
        self.fit_stats_ = stats
        if engine.release.get("n_outputs") == 1:
            warnings.warn("the privatised targets hold a single value (a constant target): "
                          "every tree is one leaf and predicts the training mean",
                          UserWarning, stacklevel=3)
        elif engine.release.get("constant"):
            warnings.warn("the targets hold a single value (a constant target): every split "
                          "was drawn at random and every prediction is that value",
                          UserWarning, stacklevel=3)
        if self.verbose:
            print(format_privacy_report(self.privacy_report_), file=sys.stderr, flush=True)
        return self


class PrivateForestRegressor(RegressionModelMixin, RegressorMixin, BaseEstimator):
    """Random regression forest trained by a server on encrypted features and privatised
    targets; leaf values from the true targets, computed by the client only.

    The server holds GIPE ciphers of ``X`` and (``split_selection="rr"``) one privatised
    target per row, grows :class:`~cipherforest.ensemble.RandomForestRegressor`'s trees on
    them (squared error, same bootstrap and feature draws for the same ``random_state``; ties
    in the privatised targets broken by a jitter from the seed, so trees go on splitting
    where those few values are equal), and names the leaf every training row reaches. The
    client sets the leaf values from the true targets and keeps them (``leaf_refit``: by
    default a ridge regression of the targets on the leaf indicators of all trees; with
    ``"mean"`` each leaf's bootstrap-weighted mean, so predictions are averages of training
    targets, within their range); :meth:`predict` asks the server for the leaves the test
    rows reach.

    ``split_selection``:

    - ``"rr"`` (default, ε = 2 per row for the whole fit): with ``target_mechanism="bins"``,
      randomized response on bins (Ghazi et al., ICLR 2023): a share ``prior_share`` of ε
      estimates the targets' distribution over ``target_bins`` equal-width bins of
      ``target_bounds`` (Laplace histogram); the rest is the ε of a k-ary randomized response
      over the ``k`` consecutive groups of bins and output values that minimise the expected
      squared error of the reported value under that prior. ``"laplace"``: the clipped target
      plus Laplace noise of scale ``(high - low) / ε``. ``"duchi"``, ``"piecewise"``: an
      unbiased report of the target clipped to the prior's central quantiles. Either way the
      privatised targets are permanent (the privacy ledger's PRF of a client secret and the
      row) and charged in the ledger.
    - ``"blind"``: label-free random splits (the classifier's ``"blind"`` trees): nothing the
      server sees depends on the targets (ε = 0).
    - ``"paper"``: the exact variance rule on the true targets, the classifier's ``"gini"``
      for regression (no guarantee: for reproduction and as the accuracy ceiling). The
      client uploads CKKS ciphertexts of every row's target scaled to [0, 1] with its
      square; each level, the server sends the encrypted sums of every candidate's left
      rows; the client decrypts them, refuses the round if any differs from its own sums by
      more than the CKKS tolerance (a forged ciphertext), and answers with the candidate
      maximising ``S_l²/W_l + S_r²/W_r``; nodes stop by public rules only (a node of
      constant targets gets a random candidate). One round per tree level.

    Parameters
    ----------
    n_estimators : int, default=100
    max_features : {"sqrt", "log2"}, int, float or None, default=1.0
    max_depth : int or None, default=None
    min_samples_split : int, default=2
    min_samples_leaf : int or None, default=None
        None: 5 (:data:`RR_MIN_SAMPLES_LEAF`) under ``"rr"`` and ``"blind"`` with
        ``leaf_refit="ridge_to_means"``, else 1 (RandomForestRegressor's). With the default
        refit, leaves of at least 5 rows scored higher than leaves of one on all five
        benchmark sets (``"rr"`` at ε = 1 and 2, and ``"blind"``), and lower on most with
        leaf means (docs/private_forest.md).
        It is a rule of the server's growth on ỹ, public: ε is the same.
    bootstrap : bool, default=True
    max_samples : int, float or None, default=None
    max_bins : int or None, default=None
        Histogram thresholds on the ciphers (at most ``max_bins - 1`` per feature).
    random_state : int, RandomState instance or None, default=None
        Seeds the forest only (sent to the server); keys and noise never come from it.
    security_parameter : float, default=6.4
        GIPE's λ.
    gipe_mode : {"quantile", "order"}, default="quantile"
        Feature encryption (the paper's label-dependent mode is for classes).
    gipe_bins : int, default=32
    split_selection : {"rr", "blind", "paper"}, default="rr"
    label_epsilon : float or None, default=None
        ``"rr"``: ε of the whole release, prior included (None: 2).
    target_mechanism : {"bins", "laplace", "duchi", "piecewise"}, default="bins"
        ``"duchi"`` and ``"piecewise"``: the unbiased mechanisms of
        :mod:`~cipherforest.privacy.target_dp` on the targets clipped to the 10 % and 90 %
        quantiles of a prior estimated as RR-on-bins' (``prior_share``, ``target_bins``).
    target_bounds : (float, float) or None, default=None
        Public bounds of the targets; targets outside are clipped for the mechanism (the
        leaf values use the true targets). None: the training targets' minimum and maximum,
        which the guarantee then does not cover (``privacy_report_`` says so).
    target_bins : int, default=32
        Fine bins of RR-on-bins.
    target_outputs : int or None, default=None
        Output values of RR-on-bins. None: the paper's choice, the number that minimises the
        expected squared error of the reported value (two at ε = 2 on the benchmark's
        sets); an int fixes it (the best intervals and values for that many).
    prior_share : float, default=0.1
        Share of ε that RR-on-bins, ``"duchi"`` and ``"piecewise"`` spend on the prior.
    leaf_refit : {"ridge_to_means", "ridge", "mean"}, default="ridge_to_means"
        How the client sets the leaf values from the true targets: ``"mean"``, each leaf's
        bootstrap-weighted mean (tree by tree); ``"ridge"``, a ridge regression of the
        targets on the leaf indicators of all trees at once, over every training row, its
        penalty chosen by the client's 5-fold cross-validation; ``"ridge_to_means"``, the
        same regression shrunk toward the forest of the leaves' target means instead of
        toward the mean target, its penalty cross-validated through the trees that did not
        draw the held-out row (:mod:`~cipherforest.privacy.leaf_refit`). Each is computed
        on the client and never sent: ε is the same. ``"ridge_to_means"`` scored above
        ``"ridge"`` on most benchmark sets at ε = 1 and 2 (docs/private_forest.md); the
        ridge refits' predictions may leave the targets' range.
    privacy_ledger : str or None, default=None
        The privacy ledger's directory (as :class:`~cipherforest.privacy.PrivateForestClient`'s).
    max_total_epsilon : float or None, default=None
        Refuse a fit (before anything is sent) that would bring a row's cumulative ε above
        this; a repeated release of the same data adds nothing.
    server : str, Transport or None, default=None
        None: an embedded server; ``"http://host:port"``: a ``cipherforest serve`` process;
        or a transport/server object.
    n_jobs : int or None, default=None
        Threads of the embedded server.
    verbose : int, default=0
        1: print the privacy report after the fit on stderr.
    server_key : str or None, default=None
    timeout : float, default=120

    Attributes
    ----------
    encryptor_ : GiniPreservingEncryptor
    session_ : str
    server_ : PrivateForestServer or Transport
    client_session_ : RegressionSession
    epsilon_spent_ : float
    privacy_report_ : dict
        The guarantee in words and numbers (ε, its split between prior and randomized
        response, the number of output values, the bounds and where they came from, what
        the server saw) and the ledger's ``cumulative_epsilon``.
    fit_stats_, predict_stats_ : ProtocolStats
    """

    engine_type = RegressionSession

    _parameter_constraints: dict = {
        **constraints(["n_estimators", "max_depth", "min_samples_split", "min_samples_leaf",
                       "bootstrap", "max_samples", "max_bins", "random_state",
                       "security_parameter", "gipe_bins", "privacy_ledger",
                       "max_total_epsilon", "server", "n_jobs", "verbose", "server_key",
                       "timeout", "max_features"]),
        "gipe_mode": [StrOptions({"quantile", "order"})],
        "split_selection": [StrOptions(set(REGRESSOR_SELECTIONS))],
        "label_epsilon": [Interval(Real, 0.0, None, closed="neither"), None],
        "target_mechanism": [StrOptions(set(TARGET_MECHANISMS))],
        "target_bounds": [tuple, list, None],
        "target_bins": [Interval(Integral, 2, 1024, closed="both")],
        "target_outputs": [Interval(Integral, 2, 1024, closed="both"), None],
        "prior_share": [Interval(RealNotInt, 0.0, 1.0, closed="neither")],
        "leaf_refit": [StrOptions(set(FOREST_LEAF_REFITS))],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, n_estimators=100, *, max_features=1.0, max_depth=None,
                 min_samples_split=2, min_samples_leaf=None, bootstrap=True, max_samples=None,
                 max_bins=None, random_state=None, security_parameter=6.4,
                 gipe_mode="quantile", gipe_bins=32, split_selection="rr", label_epsilon=None,
                 target_mechanism="bins", target_bounds=None, target_bins=32,
                 target_outputs=None, prior_share=0.1, leaf_refit="ridge_to_means",
                 privacy_ledger=None, max_total_epsilon=None, server=None, n_jobs=None,
                 verbose=0, server_key=None, timeout=120.0):
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.max_bins = max_bins
        self.random_state = random_state
        self.security_parameter = security_parameter
        self.gipe_mode = gipe_mode
        self.gipe_bins = gipe_bins
        self.split_selection = split_selection
        self.label_epsilon = label_epsilon
        self.target_mechanism = target_mechanism
        self.target_bounds = target_bounds
        self.target_bins = target_bins
        self.target_outputs = target_outputs
        self.prior_share = prior_share
        self.leaf_refit = leaf_refit
        self.privacy_ledger = privacy_ledger
        self.max_total_epsilon = max_total_epsilon
        self.server = server
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.server_key = server_key
        self.timeout = timeout

    def _check_params(self) -> None:
        """The rules between parameters that constraints cannot say."""
        epsilon = self.label_epsilon
        if self.split_selection != "rr" and epsilon is not None:
            raise ValueError("label_epsilon is used only with split_selection='rr'")
        if epsilon is not None and not math.isfinite(epsilon):
            raise ValueError(f"label_epsilon must be a finite number > 0, got {epsilon!r}")
        check_target_bounds(self.target_bounds)

    def _report(self, engine: RegressionSession) -> dict:
        return regression_report(self.split_selection, engine.release, self.gipe_mode,
                                 engine.cumulative_spent())

    # ------------------------------------------------------------------ predict
    def predict(self, X) -> np.ndarray:
        """Mean over the trees of the leaf values of the leaves the rows reach."""
        check_is_fitted(self, "session_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        stats = ProtocolStats()
        values = self.client_session_.predict(X, stats)
        self.predict_stats_ = stats
        return values
