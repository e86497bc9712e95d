"""The package's numba cache is dropped as a whole when its sources change
(``cipherforest._kernel_cache``): a partly recompiled cache crashes the next process."""

from pathlib import Path

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
