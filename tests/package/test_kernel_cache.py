"""The package's numba cache is dropped as a whole when its sources change
(``cipherforest._kernel_cache``): a partly recompiled cache crashes the next process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cipherforest._kernel_cache import (
    STAMP_NAME,
    cache_dir_of,
    clear_stale_kernel_cache,
    sources_fingerprint,
)


def make_package(root: Path) -> list[Path]:
    (root / "sub").mkdir(parents=True)
    sources = [root / "__init__.py", root / "kernels.py", root / "sub" / "more.py"]
    for i, source in enumerate(sources):
        source.write_text(f"X = {i}\n")
    return sources


def fake_entries(source: Path) -> list[Path]:
    cache_dir = cache_dir_of(source)
    cache_dir.mkdir(parents=True, exist_ok=True)
    entries = [cache_dir / f"{source.stem}.f-3.py311.nbi",
               cache_dir / f"{source.stem}.f-3.py311.1.nbc"]
    for entry in entries:
        entry.write_bytes(b"entry")
    return entries


def test_changed_sources_drop_every_cached_kernel_of_the_package(tmp_path):
    package = tmp_path / "pkg"
    sources = make_package(package)
    entries = [entry for source in sources[1:] for entry in fake_entries(source)]
    foreign = cache_dir_of(sources[1]) / "elsewhere.g-1.py311.nbi"  # not the package's
    foreign.write_bytes(b"keep")

    assert clear_stale_kernel_cache(package)  # no stamp yet: written by unknown sources
    assert not any(entry.exists() for entry in entries) and foreign.exists()
    stamp = cache_dir_of(sources[1]) / STAMP_NAME
    assert stamp.read_text().strip() == sources_fingerprint(package)

    entries = [entry for source in sources[1:] for entry in fake_entries(source)]
    assert not clear_stale_kernel_cache(package)  # same sources: the cache stays
    assert all(entry.exists() for entry in entries)

    sources[2].write_text("X = 'edited'\n")  # one file changes: every entry goes
    assert clear_stale_kernel_cache(package)
    assert not any(entry.exists() for entry in entries) and foreign.exists()
    assert not clear_stale_kernel_cache(package)


def test_the_fingerprint_follows_contents_and_names(tmp_path):
    package = tmp_path / "pkg"
    sources = make_package(package)
    before = sources_fingerprint(package)
    sources[1].write_text("X = 1\n")  # same content as before
    assert sources_fingerprint(package) == before
    sources[1].rename(package / "renamed.py")
    assert sources_fingerprint(package) != before


_CACHE_PARALLEL_BUILD = """
import numpy as np
from cipherforest.tree._histogram import build_compact_histogram
rng = np.random.RandomState(0)
n = 20_000
X_binned = rng.randint(0, 50, size=(n, 4)).astype(np.uint8)
hist = np.zeros((4, 51, 2))
lo, hi = np.zeros(4, dtype=np.int64), np.zeros(4, dtype=np.int64)
build_compact_histogram(hist, lo, hi, X_binned, np.arange(n, dtype=np.int32), 0, n,
                        rng.normal(size=n), np.ones(n), 2)  # the parallel=True build
"""
_CACHE_SHARD_STEP = """
import numpy as np
from cipherforest.tree._shards import TASK_SIZE, set_task, shard_step
rng = np.random.RandomState(0)
n = 1_000
X_binned = rng.randint(0, 10, size=(n, 3)).astype(np.uint8)
task = np.zeros(TASK_SIZE, dtype=np.int64)
set_task(task, 0, 4, False, 0, n, 0, 0)
hist = np.zeros((3, 10, 2))
lo, hi = np.full(3, 10, dtype=np.int64), np.full(3, -1, dtype=np.int64)
shard_step(task, X_binned, np.asfortranarray(X_binned), np.arange(n, dtype=np.int32),
           np.empty(n, dtype=np.int32), rng.normal(size=n), np.ones(n), hist, lo, hi,
           np.zeros((2, 4)), 1)
"""
_FIT_BOOSTING = """
import numpy as np
from cipherforest.ensemble import GradientBoostingRegressor
rng = np.random.RandomState(0)
X = rng.normal(size=(3_000, 4))
GradientBoostingRegressor(n_estimators=2, max_bins=255).fit(X, X[:, 0])
print("fitted")
"""


@pytest.mark.slow  # compiles the package's kernels in a fresh numba cache
def test_a_grower_compiled_after_a_cached_parallel_build_loads(tmp_path):
    """One process caches the threaded histogram build alone, the next a kernel that calls
    it (a shard's step); the third compiles the grower, which links that kernel from the
    cache, and must find numba's threading layer loaded (before ``launch_parallel_runtime``
    it died: "LLVM ERROR: Symbol not found: allocate_sched")."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    for script in (_CACHE_PARALLEL_BUILD, _CACHE_SHARD_STEP, _FIT_BOOSTING):
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("fitted")


_FIT_GENERAL_GROWER = """
import numpy as np
from cipherforest import DecisionTreeRegressor
rng = np.random.RandomState(0)
X = rng.normal(size=(300, 3))
DecisionTreeRegressor(max_depth=3).fit(X, X[:, :2])  # two outputs: the general grower
DecisionTreeRegressor(criterion="absolute_error", max_depth=3).fit(X, X[:, 0])
print("fitted")
"""


@pytest.mark.slow  # compiles the package's kernels in a fresh numba cache
def test_the_general_grower_compiles_in_a_first_fit(tmp_path):
    """A fresh cache, and the general grower (multi-output, absolute error) as the first fit:
    its node summary calls the weighted median, which sorts (allocates), and numba compiled
    that sort for a caller without reference counting — "Only accept returning of array
    passed into the function" — unless an earlier call had compiled the median on its own
    (as the test suite's order happened to)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", _FIT_GENERAL_GROWER], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("fitted")
