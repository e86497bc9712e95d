"""Pieces every ensemble shares: bootstrap draws, out-of-bag bookkeeping, members fitted in
threads or on Dask. Thread pools and the progress bar, which the privacy layer uses too, are
in :mod:`cipherforest._parallel` and :mod:`cipherforest._progress`."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from .._parallel import map_in_threads

T = TypeVar("T")
R = TypeVar("R")

#: Seeds handed to sub-estimators are drawn below this bound (as scikit-learn does).
SEED_BOUND = np.iinfo(np.int32).max


def seeded_stream(seed: int) -> np.random.RandomState:
    """The calling thread's ``RandomState``, reseeded with ``seed``: the stream of
    ``np.random.RandomState(seed)``, without building a generator: NumPy builds a new one
    from operating-system entropy before reseeding it, far slower than a reseed, and a
    100-tree forest or 100-round boosting fit built one per tree or round.

    Draw from it at once: the thread's next call reseeds the same object.
    """
    stream = getattr(_SEEDED_STREAMS, "stream", None)
    if stream is None:
        stream = _SEEDED_STREAMS.stream = np.random.RandomState(0)
    stream.seed(seed)
    return stream


_SEEDED_STREAMS = threading.local()


def draw_seeds(random_state: np.random.RandomState, n: int) -> np.ndarray:
    """``n`` sub-estimator seeds from the ensemble's generator (order defines the ensemble)."""
    return random_state.randint(SEED_BOUND, size=n)


def resolve_n_draws(max_samples, n_samples: int, sample_weight: np.ndarray | None = None, *,
                    at_most_n_samples: bool = True) -> int:
    """Bootstrap size from scikit-learn's ``max_samples`` (None, int or fraction).

    A fraction refers to ``n_samples``, or to the sum of ``sample_weight`` when given (as
    scikit-learn 1.9), rounded down, at least 1; a fraction giving fewer than
    ``max(10, n_samples ** (1/3))`` draws warns, as scikit-learn. With ``at_most_n_samples``
    an int larger than ``n_samples`` is an error (scikit-learn's forests and bagging allow
    it).
    """
    if max_samples is None:
        return n_samples
    if isinstance(max_samples, (int, np.integer)):
        if at_most_n_samples and max_samples > n_samples:
            raise ValueError(f"max_samples={max_samples} must be <= n_samples={n_samples}")
        return int(max_samples)
    total = n_samples if sample_weight is None else float(np.sum(sample_weight))
    n_draws = max(1, int(float(max_samples) * total))
    if n_draws < max(10, n_samples ** (1 / 3)):  # scikit-learn's "suspiciously small"
        what = (f"the number of samples is {n_samples}" if sample_weight is None
                else f"the total sum of sample weights is {total}")
        warnings.warn(f"Using the fractional value max_samples={max_samples} when {what} "
                      f"results in a low number ({n_draws}) of bootstrap samples. We "
                      "recommend passing `max_samples` as an integer instead.", UserWarning,
                      stacklevel=3)
    return n_draws


def bootstrap_counts(seed: int, n_samples: int, n_draws: int) -> np.ndarray:
    """How often each of ``n_samples`` rows is drawn in ``n_draws`` draws with replacement."""
    draws = seeded_stream(seed).randint(0, n_samples, n_draws)
    return np.bincount(draws, minlength=n_samples)


def warn_if_oob_missing(n_oob_models: np.ndarray) -> np.ndarray:
    """Mask of rows that have at least one out-of-bag model; warn when some have none.

    The seed's rule: rows that every model saw are left out of the OOB estimate.
    """
    covered = n_oob_models > 0
    if not covered.all():
        warnings.warn(
            "Some inputs do not have OOB scores. This probably means too few estimators were "
            "used to compute any reliable oob estimates. "
            f"({int((~covered).sum())} of {covered.shape[0]} samples were used by every "
            "estimator and have no out-of-bag prediction; they are left out of the OOB score.)",
            UserWarning,
            stacklevel=3,
        )
    return covered


def fit_members(fn: Callable[[T], R], items: Sequence[T], n_jobs: int | None,
                verbose: int = 0, desc: str = "fitting") -> list[R]:
    """``[fn(x) for x in items]`` for an ensemble's members: on the workers of a Dask
    cluster when ``joblib.parallel_config(backend="dask")`` is active (and ``n_jobs`` is
    not 1), else :func:`map_in_threads`.

    On Dask, ``fn`` (with the prepared data its closure holds) is scattered once for the
    whole call, not sent with every member; members come back in order, so the ensemble
    equals a local fit.
    """
    from joblib.parallel import get_active_backend

    backend, _ = get_active_backend()
    if type(backend).__name__ != "DaskDistributedBackend" or n_jobs == 1:
        return map_in_threads(fn, items, n_jobs, verbose, desc)
    from joblib import Parallel, delayed

    shared = _Shared(fn)
    return Parallel(verbose=verbose)(delayed(_call_shared)(shared, item) for item in items)


class _Shared:
    """A callable sent to Dask workers once. It reports a size above the 1 kB from which
    joblib's Dask backend scatters an argument once per call (instead of pickling it into
    every task): its closure holds the prepared training data."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __sizeof__(self) -> int:
        return 1 << 20


def _call_shared(shared: _Shared, item):
    return shared.fn(item)
