"""Gini-impurity-preserving encryption (GIPE) of numeric features, as a scikit-learn transformer.

The paper's scheme (``mode="paper"``) is the one of Xie et al. (NeurIPS 2023), section 3 and
appendices A-B, restated in docs/gipe.md; its per-feature secret state is a
:class:`~.column_state.ColumnState` over the numba kernels of :mod:`.kernels`. The
label-independent modes ``"order"`` and ``"quantile"`` (docs/threat_model.md) build their
states in :mod:`.codebook`; cipher2, one authenticated ciphertext per row, is
:mod:`.cipher2`; the state file container is :mod:`cipherforest.privacy.state_file`. This
module holds the estimator, its constants and warnings, and its state files.
"""

from __future__ import annotations

import math
import os
import secrets
import warnings
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from ..._parallel import map_in_threads
from ..._sklearn_compat import Interval, StrOptions, _fit_context
from ..state_file import StateFileError, read_state_file, write_state_file
from .cipher2 import Cipher2, GipeDecryptionError, pack_payload, payload_size, unpack_payload
from .codebook import build_state, encrypt_column
from .column_state import ColumnState, WordSource, typed_state_arrays
from .kernels import GRID

__all__ = [
    "DEFAULT_MODE",
    "DEFAULT_N_BINS",
    "MAX_CIPHER",
    "MODES",
    "GiniPreservingEncryptor",
    "GipeRekeyWarning",
    "cipher_max",
]

#: Largest c_max: every cipher, and every midpoint of two node ciphers, is exact in float64.
MAX_CIPHER = 2**53
#: Format name and version of the secret-state file (version 1: paper mode only, still read).
STATE_FORMAT = "cipherforest-gipe-state"
STATE_FORMAT_VERSION = 2
READABLE_STATE_VERSIONS = (1, 2)
#: The encryption modes: the paper's label-dependent scheme, and two that depend on X alone.
MODES = ("paper", "order", "quantile")
#: Default mode and number of quantile bins (``n_bins`` is used by ``"quantile"`` only).
DEFAULT_MODE = "quantile"
DEFAULT_N_BINS = 32


class GipeRekeyWarning(UserWarning):
    """``fit`` had to re-key columns (their ciphers come from the re-key's distribution)."""


def cipher_max(n_samples: int, security_parameter: float) -> int:
    """c_max for ``n_samples`` training rows: ``2**(λ·log2 n)``, capped at ``MAX_CIPHER``.

    Rounded down to a multiple of GRID (4) and raised to at least ``64·(n + 1)`` so that a
    re-key always has room (this floor only matters when ``λ·log2 n < log2(64·(n+1))``).
    """
    bits = security_parameter * math.log2(max(n_samples, 2))
    c_max = MAX_CIPHER if bits >= 53 else int(2.0**bits)
    c_max = min(max(c_max, 64 * (n_samples + 1)), MAX_CIPHER)
    return c_max - c_max % GRID


# ------------------------------------------------------------------------------ estimator
class GiniPreservingEncryptor(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Gini-impurity-preserving encryption of numeric features (Xie et al., NeurIPS 2023).

    Each feature gets a secret state: a binary search tree whose nodes hold training values
    and one random integer cipher (the paper's cipher1); ciphers increase with the values.
    Three modes decide what a node is:

    * ``"paper"``: the paper's scheme. A node holds samples of one label (a run of the sorted
      feature) or of one value. The minimum Gini impurity (and entropy) over thresholds on
      cipher1 is the minimum over the plaintext thresholds, at the root and in every subset
      of rows (Theorem 1), so a forest on ciphers grows the plaintext partitions. But which
      rows share a cipher depends on the labels: along a feature, consecutive distinct
      ciphers alternate labels, which gives the labels away (docs/threat_model.md). Kept to
      reproduce the paper; it needs ``y``.
    * ``"order"``: one node per distinct training value, ciphers an ideal random
      order-preserving map (sorted distinct uniform draws). Which rows share a cipher and
      their order are a function of ``X`` alone; every split of every subset is preserved,
      so a forest grows exactly the plaintext partitions. Leaks the order and equality of
      the training values of each feature.
    * ``"quantile"`` (default): each feature is cut into at most ``n_bins`` quantile bins
      computed from the training ``X`` (edges at midpoints between distinct values, as
      ``max_bins`` bins), and each bin gets one cipher, increasing with the bins. A forest on
      ciphers splits on bins, like a histogram forest with ``max_bins=n_bins``. Leaks only
      the bin order (``n_bins`` levels) of each value.

    In ``"order"`` and ``"quantile"`` mode ``y`` is ignored (``fit(X)`` is enough).

    The paper's formal scheme (appendix A.3) maps onto the methods as follows:

    * ``KeyGen`` + ``Encrypt`` of the training samples: :meth:`fit`. It builds one state
      per feature (``"paper"``: by inserting the labelled rows in a random order), draws the
      256-bit key of cipher2, and computes c_max (below).
    * ``Encrypt`` of any rows, training or unseen, without labels: :meth:`transform` gives
      cipher1, :meth:`encrypt` gives ``(cipher1, cipher2)``. Values are encrypted by search
      only, the state is not changed (docs/gipe.md): inside a node's value range → the
      node's cipher. A value in the gap between in-order nodes A < x < B (plaintext
      splitter midpoint ``t = v_A/2 + v_B/2``) gets, in ``"paper"`` mode, an odd cipher
      strictly between theirs, interpolated; in ``"order"`` mode a fresh odd cipher drawn
      uniformly (from the OS) in ``(c_A, (c_A+c_B)/2)`` if ``x <= t``, else in
      ``((c_A+c_B)/2, c_B)``; in ``"quantile"`` mode the cipher of its bin (A's if
      ``x <= t``, else B's). Either way a threshold at the two ciphers' midpoint routes the
      value as the plaintext midpoint does. Beyond the extremes: inside ``(0, c_first)`` /
      ``(c_last, c_max)`` (``"paper"``: squashed distance; ``"order"``: uniform), or the
      first / last bin's cipher (``"quantile"``). Encryption is non-decreasing except for
      the random draws of ``"order"``, which are only ordered relative to training values.
    * ``Decrypt``: :meth:`inverse_transform` (needs the state and cipher2). As in appendix
      A.2 the node is found by cipher1 and the value read at the position cipher2 holds.
      cipher2 is one authenticated ciphertext per row (SHAKE-256 stream, HMAC-SHA256 tag,
      standard library only) instead of CKKS; it carries, per feature, the position (in
      its node's insertion-ordered list) of a stored sample equal to the value, or the value
      itself when none is stored (unseen values).

    Ciphers are int64 in ``(0, c_max)``, ``c_max = 2**(λ·log2 n)`` capped at 2**53 so that
    float64 (what the tree estimators validate ``X`` to) holds every cipher and every
    midpoint of two node ciphers exactly; node ciphers are multiples of 4 and unseen values
    get odd ciphers. The effective λ is therefore ``min(λ, 53 / log2 n)`` (attribute
    ``effective_security_parameter_``): 5.8 for 569 rows, 4.0 for 10**4, 2.7 for 10**6.

    When a new node finds no free integer between its neighbours' ciphers, the column is
    re-keyed: all its ciphers are redrawn in order, spread evenly by rank with jitter (a new
    epoch, ``epochs_[j] += 1``), and the insertion resumes. Nothing has been handed out
    during :meth:`fit`, so no cipher goes stale, but the column's ciphers then follow the
    re-key's distribution rather than the paper's, so :meth:`fit` warns with
    :class:`GipeRekeyWarning`. With c_max = 2**53 this does not happen below millions of
    rows; a small ``security_parameter`` makes it frequent. Every :meth:`fit` draws a new
    state and key: ciphers and tokens of an earlier fit do not decrypt any more.

    Parameters
    ----------
    security_parameter : float, default=6.4
        λ of the paper (it asks for λ > 6.4); c_max = 2**(λ·log2 n) before the cap.
    mode : {"paper", "order", "quantile"}, default=DEFAULT_MODE ("quantile")
        Which rows share a cipher (see above). Only ``"paper"`` needs ``y``.
    n_bins : int >= 2, default=DEFAULT_N_BINS (32)
        Quantile bins per feature in ``"quantile"`` mode (features with fewer distinct
        training values get one bin per value); ignored by the other modes.
    random_state : int, RandomState instance or None, default=None
        None (the right choice for real data) draws the insertion orders and node ciphers
        from the operating system's CSPRNG. An integer makes the ciphers of training values
        reproducible (PCG64 streams), for experiments only. The cipher2 key and nonces, and
        the ciphers ``"order"`` draws for unseen values, always come from the OS.
    n_jobs : int or None, default=None
        Threads over features (the kernels release the GIL). None means 1, -1 all cores.

    Attributes
    ----------
    classes_ : ndarray
        Labels seen during fit, in the order their codes were assigned (``"paper"`` only).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had string column names.
    n_samples_seen_ : int
    cipher_max_ : int
        c_max: every cipher lies in ``(0, c_max)``.
    effective_security_parameter_ : float
        ``log2(c_max) / log2(n)`` for the ``n`` rows of the first fit.
    epochs_ : ndarray of int64, shape (n_features,)
        Re-keys per feature during fit (always 0 outside ``"paper"`` mode).
    n_nodes_ : ndarray of int64, shape (n_features,)
        Nodes per feature state (the number of distinct cipher1 values of training rows).
    column_states_ : list of ColumnState
        Each feature's secret state (its cipher tree and key); :meth:`save_state` writes them.

    Notes
    -----
    NaN and infinite values are rejected (no encoding is defined for them); impute first.
    The state is the secret: persist it with :meth:`save_state` (a 0600, pickle-free file),
    never with pickle.
    """

    _parameter_constraints: dict = {
        "security_parameter": [Interval(Real, 1.0, None, closed="left")],
        "mode": [StrOptions(set(MODES))],
        "n_bins": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
    }

    def __init__(self, security_parameter=6.4, *, mode=DEFAULT_MODE, n_bins=DEFAULT_N_BINS,
                 random_state=None, n_jobs=None):
        self.security_parameter = security_parameter
        self.mode = mode
        self.n_bins = n_bins
        self.random_state = random_state
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self.mode == "paper"  # there the labels shape the ciphers
        tags.transformer_tags.preserves_dtype = []  # ciphers are int64 whatever X was
        return tags

    # ------------------------------------------------------------------ fitting
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Build the secret state of every feature from the training rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Finite numeric features.
        y : array-like of shape (n_samples,), default=None
            Class labels (any number of classes): required in ``"paper"`` mode, ignored in
            the others.

        Returns
        -------
        self : GiniPreservingEncryptor
        """
        self._fit(X, y)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None):
        """Fit, and return cipher1 of the training rows (int64, shape (n_samples, n_features)).

        Equal to ``fit(X, y).transform(X)``, without the searches.
        """
        return self._fit(X, y)

    def _fit(self, X, y) -> np.ndarray:
        if self.mode != "paper":
            return self._fit_label_free(X)
        if y is None:
            raise ValueError("GiniPreservingEncryptor(mode='paper') requires y to be passed, "
                             "but the target y is None: the paper's mode needs the class "
                             "labels; the modes 'order' and 'quantile' do not")
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=False,
                             y_numeric=False)
        _check_finite(X, "X")
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        n_samples, n_features = X.shape
        seed = _seed_from(self.random_state)
        self.classes_, codes = np.unique(y, return_inverse=True)
        codes = codes.astype(np.int64)
        self._start_fit(n_samples)
        states = [ColumnState(self.cipher_max_) for _ in range(n_features)]

        def build(j: int) -> np.ndarray:
            source = WordSource(None if seed is None else [seed, j])
            ids, _ = states[j].insert(X[:, j], codes, source)
            return states[j].sample_ciphers(ids)

        out = np.empty((n_samples, n_features), dtype=np.int64)
        for j, ciphers in enumerate(map_in_threads(build, range(n_features), self.n_jobs)):
            out[:, j] = ciphers
        self.column_states_ = states
        self._refresh_attributes()
        rekeyed = np.flatnonzero(self.epochs_)
        if rekeyed.size:
            warnings.warn(
                f"fit re-keyed feature(s) {rekeyed.tolist()} ({self.epochs_[rekeyed].tolist()} "
                f"time(s)): the cipher space c_max={self.cipher_max_} ran out of free integers "
                "between neighbouring ciphers; their ciphers are spread by rank rather than "
                "drawn by the paper's process. A larger security_parameter avoids this.",
                GipeRekeyWarning, stacklevel=3)
        return out

    def _fit_label_free(self, X) -> np.ndarray:
        """``"order"`` / ``"quantile"``: states from the training values alone."""
        X = validate_data(self, X, dtype=np.float64, ensure_all_finite=False)
        _check_finite(X, "X")
        n_samples, n_features = X.shape
        seed = _seed_from(self.random_state)
        self._start_fit(n_samples)
        if hasattr(self, "classes_"):
            del self.classes_  # a refit in another mode: no labels are held
        n_bins = None if self.mode == "order" else int(self.n_bins)

        def build(j: int) -> ColumnState:
            source = WordSource(None if seed is None else [seed, j])
            return build_state(X[:, j], n_bins, self.cipher_max_, source)

        self.column_states_ = list(map_in_threads(build, range(n_features), self.n_jobs))
        self._refresh_attributes()
        return self._encrypt1(X)[0]

    def _start_fit(self, n_samples: int) -> None:
        """What every mode's fit sets first: c_max, the row count, the key, the mode."""
        self.cipher_max_ = cipher_max(n_samples, self.security_parameter)
        self.effective_security_parameter_ = (
            math.log2(self.cipher_max_) / math.log2(max(n_samples, 2)))
        self.n_samples_seen_ = n_samples
        self._key = secrets.token_bytes(32)
        self._mode = self.mode

    def _refresh_attributes(self) -> None:
        self.epochs_ = np.array([s.epoch for s in self.column_states_], dtype=np.int64)
        self.n_nodes_ = np.array([s.n_nodes for s in self.column_states_], dtype=np.int64)

    # ------------------------------------------------------------------ encryption
    def transform(self, X):
        """cipher1 of any rows (training or unseen), by search only; labels are not needed.

        Returns
        -------
        cipher1 : ndarray of int64, shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=False)
        _check_finite(X, "X")
        return self._encrypt1(X)[0]

    def _encrypt1(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n_samples, n_features = X.shape
        cipher1 = np.empty((n_samples, n_features), dtype=np.int64)
        rank = np.empty((n_samples, n_features), dtype=np.int64)

        mode = self._mode

        def one(j: int) -> int:
            if mode == "paper":
                cipher1[:, j], rank[:, j] = self.column_states_[j].encrypt(X[:, j])
            else:
                cipher1[:, j], rank[:, j] = encrypt_column(self.column_states_[j], X[:, j],
                                                           snap=mode == "quantile")
            return j

        map_in_threads(one, range(n_features), self.n_jobs)
        return cipher1, rank

    def encrypt(self, X):
        """Full ciphertexts ``(cipher1, cipher2)`` of any rows (appendix A.3's Encrypt).

        Returns
        -------
        cipher1 : ndarray of int64, shape (n_samples, n_features)
            As :meth:`transform`.
        cipher2 : ndarray of uint8, shape (n_samples, token_size)
            One authenticated token per row, bound to its cipher1 row (see the class doc).
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=False)
        _check_finite(X, "X")
        n_samples, n_features = X.shape
        cipher1, rank = self._encrypt1(X)
        words = np.empty((n_samples, n_features), dtype=np.int64)
        inline = np.empty((n_samples, n_features), dtype=bool)
        for j, state in enumerate(self.column_states_):
            position = state.positions(X[:, j], rank[:, j])
            inline[:, j] = position < 0
            words[:, j] = np.where(inline[:, j], X[:, j].view(np.int64), position)
        return cipher1, Cipher2(self._key).seal(cipher1, pack_payload(words, inline))

    def inverse_transform(self, X, cipher2=None):
        """Decrypt ``(cipher1, cipher2)`` back to the plaintext values (appendix A.3's Decrypt).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            cipher1, as returned by :meth:`encrypt` (integers; float64 holding them exactly
            is accepted).
        cipher2 : ndarray of uint8, shape (n_samples, token_size)
            The tokens :meth:`encrypt` returned with those cipher1 rows.

        Returns
        -------
        X_plain : ndarray of float64, shape (n_samples, n_features)

        Raises
        ------
        GipeDecryptionError
            If a token does not authenticate (tampered, another key or state, or another
            cipher1 row) or a cipher1 entry names no stored sample.
        """
        check_is_fitted(self)
        if cipher2 is None:
            raise ValueError("decryption needs cipher2 (the tokens returned by encrypt() with "
                             "these cipher1 rows): cipher1 alone does not determine the value")
        cipher1 = _as_cipher_matrix(X, self.n_features_in_)
        n_samples, n_features = cipher1.shape
        tokens = check_array(cipher2, dtype=None, ensure_2d=True,
                             ensure_min_samples=0, ensure_all_finite=False)
        if tokens.dtype != np.uint8 or tokens.shape[0] != n_samples:
            raise GipeDecryptionError(
                f"cipher2 must be a uint8 array with one row per cipher1 row ({n_samples}), "
                f"got dtype {tokens.dtype} and shape {tokens.shape}")
        payload = Cipher2(self._key).open(cipher1, tokens, payload_size(n_features))
        words, inline = unpack_payload(payload, n_features)
        out = np.empty((n_samples, n_features), dtype=np.float64)
        for j, state in enumerate(self.column_states_):
            position = np.where(inline[:, j], -1, words[:, j])
            values = np.empty(n_samples, dtype=np.float64)
            bad = state.decrypt(np.ascontiguousarray(cipher1[:, j]), position, values)
            if bad >= 0:
                raise GipeDecryptionError(f"cipher1[{bad}, {j}] names no sample of feature "
                                          f"{j}'s state")
            rows = np.flatnonzero(inline[:, j])  # unseen values travel inside cipher2
            values[rows] = np.ascontiguousarray(words[rows, j]).view(np.float64)
            out[:, j] = values
        return out

    # ------------------------------------------------------------------ state files
    def save_state(self, path) -> None:
        """Write the secret state to ``path``: pickle-free, versioned, mode 0600, atomic.

        The file holds every feature's tree with its samples, the labels (``"paper"`` mode)
        and the cipher2 key: whoever reads it can decrypt. Format: a zip of ``.npy`` arrays
        plus ``meta.json`` (``"format": "cipherforest-gipe-state"``, ``"format_version": 2``,
        ``params`` with the mode), arrays ``key``, ``classes`` (``"paper"`` mode only) and,
        per feature ``j``, ``feature{j}.{left,right,label,cipher,vmin,vmax}`` by node id and
        ``feature{j}.{node_ptr,sample_value,sample_label}`` (the samples grouped by node, in
        insertion order). Version 1 files (paper mode, before the modes existed) are read.
        """
        check_is_fitted(self)
        meta = {
            "params": {"security_parameter": float(self.security_parameter),
                       "mode": self._mode, "n_bins": int(self.n_bins),
                       "n_jobs": self.n_jobs},
            "n_features_in": int(self.n_features_in_),
            "feature_names_in": (self.feature_names_in_.tolist()
                                 if hasattr(self, "feature_names_in_") else None),
            "cipher_max": int(self.cipher_max_),
            "effective_security_parameter": float(self.effective_security_parameter_),
            "n_samples_seen": int(self.n_samples_seen_),
            "epochs": self.epochs_.tolist(),
        }
        arrays = {"key": np.frombuffer(self._key, dtype=np.uint8)}
        if self._mode == "paper":
            classes = self.classes_
            if classes.dtype.kind == "O":
                if not all(isinstance(c, str) for c in classes):
                    raise TypeError("save_state supports labels that are numbers or strings")
                classes = classes.astype(str)
            arrays["classes"] = classes
        for j, state in enumerate(self.column_states_):
            for name, array in state.to_arrays().items():
                arrays[f"feature{j}.{name}"] = array
        write_state_file(path, STATE_FORMAT, STATE_FORMAT_VERSION, meta, arrays)

    @classmethod
    def load_state(cls, path) -> GiniPreservingEncryptor:
        """Read a state written by :meth:`save_state`.

        Raises
        ------
        StateFileError
            If the file is corrupt, foreign, of another format version, or holds a state
            that violates the invariants. The message names the file and the problem.
        """
        meta, arrays = read_state_file(path, STATE_FORMAT, READABLE_STATE_VERSIONS)
        try:
            return cls._from_state(meta, arrays)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, StateFileError):
                raise
            detail = f"missing entry {exc}" if isinstance(exc, KeyError) else str(exc)
            raise StateFileError(f"{os.fspath(path)}: invalid state ({detail})") from None

    @classmethod
    def _from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]):
        params = meta["params"]
        if not isinstance(params, dict):
            raise ValueError("params is not an object")
        # format version 1 predates the modes: it is always the paper's scheme
        if meta["format_version"] >= 2:
            mode, n_bins = params["mode"], _json_int(params["n_bins"], "n_bins")
        else:
            mode, n_bins = "paper", DEFAULT_N_BINS
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        enc = cls(security_parameter=float(params["security_parameter"]), mode=mode,
                  n_bins=n_bins, n_jobs=params["n_jobs"])
        n_features = _json_int(meta["n_features_in"], "n_features_in")
        c_max = _json_int(meta["cipher_max"], "cipher_max")
        if not 0 < c_max <= MAX_CIPHER:
            raise ValueError(f"cipher_max {c_max} out of range")
        epochs = meta["epochs"]
        if not isinstance(epochs, list) or len(epochs) != n_features:
            raise ValueError("epochs do not match n_features_in")
        key = arrays["key"]
        if key.dtype != np.uint8 or key.shape != (32,):
            raise ValueError("the key is not 32 bytes")
        states = []
        for j in range(n_features):
            prefix = f"feature{j}."
            part = {name[len(prefix):]: array for name, array in arrays.items()
                    if name.startswith(prefix)}
            try:
                part = typed_state_arrays(part)
                states.append(ColumnState.from_arrays(c_max, _json_int(epochs[j], "epoch"),
                                                      part))
            except KeyError as exc:
                raise ValueError(f"feature {j}: missing array {exc.args[0]!r}") from None
            except ValueError as exc:
                raise ValueError(f"feature {j}: {exc}") from None
        enc.column_states_ = states
        enc._key = key.tobytes()
        enc._mode = mode
        if mode == "paper":
            enc.classes_ = arrays["classes"]
        enc.n_features_in_ = n_features
        if meta.get("feature_names_in") is not None:
            enc.feature_names_in_ = np.asarray(meta["feature_names_in"], dtype=object)
        enc.cipher_max_ = c_max
        enc.effective_security_parameter_ = float(meta["effective_security_parameter"])
        enc.n_samples_seen_ = _json_int(meta["n_samples_seen"], "n_samples_seen")
        enc._refresh_attributes()
        return enc


# ------------------------------------------------------------------------------ helpers
def _json_int(value: Any, name: str) -> int:
    if type(value) is not int:
        raise ValueError(f"{name} is not an integer")
    return value


def _seed_from(random_state) -> int | None:
    if random_state is None:
        return None
    if isinstance(random_state, Integral):
        return int(random_state)
    return int(random_state.randint(np.iinfo(np.int32).max))


def _check_finite(X: np.ndarray, name: str) -> None:
    if not np.isfinite(X).all():
        what = "NaN" if np.isnan(X).any() else "infinite values"
        raise ValueError(f"{name} contains {what}; GiniPreservingEncryptor has no encoding for "
                         "missing or infinite values: impute them before encrypting")


def _as_cipher_matrix(X, n_features: int) -> np.ndarray:
    """cipher1 as int64; float input must hold integers exactly."""
    array = check_array(X, dtype=None, ensure_all_finite=True)
    if array.shape[1] != n_features:
        raise ValueError(f"X has {array.shape[1]} features, but the state has {n_features}")
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    as_int = array.astype(np.int64)
    if array.dtype.kind != "f" or not np.array_equal(as_int, array):
        raise ValueError("cipher1 must hold integers")
    return as_int
