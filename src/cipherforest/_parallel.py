"""Thread pools for work whose kernels release the GIL: the ensembles' members, the GIPE
encryptor's columns, the encrypted server's worker count."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ._progress import ProgressBar

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["effective_n_jobs", "map_in_threads", "pool_size"]


def effective_n_jobs(n_jobs: int | None) -> int:
    """Threads to use: None → 1, -1 → all cores, -k → all but k-1 cores."""
    cores = os.cpu_count() or 1
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        return max(1, cores + 1 + n_jobs)
    return max(1, int(n_jobs))


def pool_size(pool: ThreadPoolExecutor) -> int:
    """Most threads ``pool`` runs (its ``max_workers``)."""
    return pool._max_workers


def map_in_threads(fn: Callable[[T], R], items: Sequence[T], n_jobs: int | None,
                   verbose: int = 0, desc: str = "fitting") -> list[R]:
    """``[fn(x) for x in items]`` on a thread pool; results keep the order of ``items``.

    The tree kernels release the GIL, so threads run them in parallel without copying data.
    """
    n_threads = min(effective_n_jobs(n_jobs), max(1, len(items)))
    bar = ProgressBar(len(items), desc) if verbose > 0 else None
    if n_threads == 1:
        out = []
        for item in items:
            out.append(fn(item))
            if bar:
                bar.update()
    else:
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            futures = [pool.submit(fn, item) for item in items]
            out = []
            for future in futures:
                out.append(future.result())
                if bar:
                    bar.update()
    if bar:
        bar.close()
    return out
