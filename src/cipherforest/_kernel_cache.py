"""Keep numba's disk cache of cipherforest's kernels all-or-nothing.

numba caches each compiled kernel next to its sources (or in ``NUMBA_CACHE_DIR``) and
reuses an entry while its own source file is unchanged. A kernel recompiled in a process
that loaded the kernels it calls from the cache is saved without their code, and the next
process that loads it crashes (a segmentation fault, not an exception). That happens
whenever some source files of the package change and others do not: editing a kernel in
a checkout, or patching an installed copy. Reproduced with numba 0.68 by adding two blank
lines at the top of ``tree/_grower.py`` after a fit had filled the cache: the next fit
recompiles the grower and runs, the one after it crashes.

So the package keeps a fingerprint of all its sources next to its cache entries; at import,
if the sources changed since the entries were written, every cached kernel of the package is
deleted, and the next fit compiles them all in one process (which saves entries that load
fine). A clean cache costs one compilation (~30 s of CPU); a crash costs the user's run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from numba.core import caching

#: File next to the cache entries holding the fingerprint of the sources they came from.
STAMP_NAME = "cipherforest-kernels.stamp"
_LOCATORS = (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator,
             caching.UserWideCacheLocator)


def _probe():  # a function for numba's locators (they read its first line number)
    pass


def sources_fingerprint(package_dir: Path) -> str:
    """SHA-256 over the relative paths and contents of the package's Python files."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(str(path.relative_to(package_dir)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def cache_dir_of(source: Path) -> Path | None:
    """The directory numba caches the kernels of ``source`` in (as numba chooses it), or
    None when it cannot cache them."""
    for locator_class in _LOCATORS:
        locator = locator_class.from_function(_probe, str(source))
        if locator is not None:
            return Path(locator.get_cache_path())
    return None


def clear_stale_kernel_cache(package_dir: Path) -> bool:
    """Delete every cached kernel of the package under ``package_dir`` when its sources
    changed since the cache was written (see the module docstring); returns whether it did.

    Best effort: a cache directory that cannot be read or written is left alone.
    """
    fingerprint = sources_fingerprint(package_dir)
    stems_by_source_dir: dict[Path, set[str]] = {}
    for source in package_dir.rglob("*.py"):
        if "__pycache__" not in source.parts:
            stems_by_source_dir.setdefault(source.parent, set()).add(source.stem)
    sources_by_dir: dict[Path, set[str]] = {}
    for source_dir, stems in stems_by_source_dir.items():
        # numba picks a cache directory per source directory.
        cache_dir = cache_dir_of(source_dir / f"{min(stems)}.py")
        if cache_dir is not None:
            sources_by_dir.setdefault(cache_dir, set()).update(stems)
    stale = [cache_dir for cache_dir in sources_by_dir
             if _read_stamp(cache_dir / STAMP_NAME) != fingerprint]
    if not stale:
        return False
    for cache_dir, stems in sources_by_dir.items():
        for entry in cache_dir.glob("*.nb[ic]"):
            # numba names entries "<module file stem>.<function>-<line>.<python>.nbi|nbc".
            if entry.name.split(".", 1)[0] in stems:
                entry.unlink(missing_ok=True)
        _write_stamp(cache_dir / STAMP_NAME, fingerprint)
    return True


def _read_stamp(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _write_stamp(path: Path, fingerprint: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(fingerprint + "\n")
    temporary.replace(path)  # atomic: another process reads the old or the new stamp


def ensure_consistent_kernel_cache() -> None:
    """``clear_stale_kernel_cache`` for this installed package; never fails an import."""
    try:
        clear_stale_kernel_cache(Path(__file__).resolve().parent)
    except OSError:
        pass


def launch_parallel_runtime() -> None:
    """Load numba's threading layer before any kernel is loaded or compiled.

    Kernels compiled with ``parallel=True`` (the threaded histogram builds) call the
    threading layer's scheduler (``allocate_sched`` and friends). numba loads that layer
    when such a kernel is compiled or called through its own dispatcher, but not when it is
    only linked into a caller (the grower) from the cache: a process that then compiled or
    loaded the grower failed with "LLVM ERROR: Symbol not found: allocate_sched" or a
    segfault (seen after a test process had cached the parallel builds). Loading the layer
    first registers those symbols. With the ``omp`` layer numba picks here it starts no
    thread (the process's thread count is unchanged); threads start at the first threaded
    build, as before. ``_launch_threads`` is numba's own (private) entry for this.
    """
    try:
        from numba.np.ufunc.parallel import _launch_threads

        _launch_threads()
    except Exception:  # noqa: BLE001 - no threading layer: parallel kernels fail as before
        pass
