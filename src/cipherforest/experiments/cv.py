"""The cross-validation loop: every (method, dataset, trial, fold) once, cached on disk.

Each result is one small JSON file under ``<cache>/<dataset>/<method>-<hash>/``, written
atomically (temporary file, then rename), so an interrupted run resumes at the first missing
file and never reads a half-written one. The hash covers the method's parameters, the shared
forest setting, the dataset's shape and content, the fold layout, the versions of
cipherforest, NumPy and scikit-learn, and a digest of the source of the code the method runs
(:attr:`Method.code`, plus the shared helpers): a changed parameter or a changed line of that
code starts afresh instead of reusing stale numbers. No pickle anywhere.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedKFold

from .common import stratified_subsample
from .datasets import Dataset
from .methods import ForestSetting, Method

__all__ = ["Progress", "code_digest", "run_cross_validation", "subsample_dataset"]

# Code every method's result depends on: the forest setting and the subsampling.
_SHARED_CODE = ("experiments/methods/base.py", "experiments/common.py")


class Progress:
    """A one-line text progress bar on a stream (``enabled=False``: silent)."""

    def __init__(self, total: int, *, stream=None, enabled: bool = True, width: int = 30):
        self.total, self.done, self.width = max(total, 1), 0, width
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.started = time.perf_counter()

    def step(self, what: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        filled = int(self.width * self.done / self.total)
        elapsed = time.perf_counter() - self.started
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] "
                          f"{self.done}/{self.total} {elapsed:6.0f} s  {what[:60]:<60}")
        if self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


def subsample_dataset(data: Dataset, max_rows: int | None, seed: int) -> Dataset:
    """A stratified subsample of at most ``max_rows`` rows (the dataset itself if smaller)."""
    rows = stratified_subsample(data.y, max_rows, seed)
    if rows.shape[0] == data.y.shape[0]:
        return data
    return Dataset(data.name, data.X[rows], data.y[rows],
                   f"{data.source}, stratified subsample of {rows.shape[0]} rows")


def _fingerprint(data: Dataset) -> str:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(data.X).tobytes())
    h.update(np.ascontiguousarray(data.y).tobytes())
    return h.hexdigest()[:16]


@functools.cache
def code_digest(paths: tuple[str, ...]) -> str:
    """SHA-256 (16 hex digits) of the named files and folders of the installed package
    (paths relative to the ``cipherforest`` folder; folders: every ``.py`` file below)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for rel in sorted(set(paths)):
        path = root / rel
        if not path.exists():
            raise FileNotFoundError(f"method code {rel!r} not found under {root}")
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(file.relative_to(root).as_posix().encode() + b"\0")
            h.update(file.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _versions() -> dict[str, str]:
    import sklearn

    from .._version import __version__

    return {"cipherforest": __version__, "numpy": np.__version__,
            "scikit-learn": sklearn.__version__}


def _cache_dir(root: Path, data: Dataset, method: Method, setting: ForestSetting,
               folds: int) -> Path:
    key = json.dumps({"method": method.key, "params": method.params,
                      "setting": asdict(setting), "data": _fingerprint(data), "folds": folds,
                      "versions": _versions(),
                      "code": code_digest((*_SHARED_CODE, *method.code))},
                     sort_keys=True, default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return root / data.name / f"{method.key}-{digest}"


def _write_json(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_json(path: Path) -> dict | None:
    try:
        with path.open() as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None  # missing or unreadable: recompute
    return record if isinstance(record, dict) and "accuracy" in record else None


def _runs(method: Method, trial: int, fold: int, simulated_trials: int | None,
          protocol_trials: int | None, protocol_folds: int | None) -> bool:
    """Whether a protocol method (a real run or a simulation) runs in this trial and fold."""
    if not method.time_measured:  # a simulation: its trials only, every fold
        return simulated_trials is None or trial < simulated_trials
    return ((protocol_trials is None or trial < protocol_trials)
            and (protocol_folds is None or fold < protocol_folds))


def run_cross_validation(datasets: list[Dataset], methods: list[Method], *, trials: int,
                         folds: int, n_estimators: int, cache_dir, alpha_rows: dict[str, int],
                         protocol_trials: int | None = None,
                         protocol_folds: int | None = None,
                         simulated_trials: int | None = None, seed: int = 0, n_jobs: int = 1,
                         progress: bool = True, stream=None) -> list[dict]:
    """Run (or read from the cache) every method on every fold; return one record per run.

    ``alpha_rows[name]`` is the dataset's full row count, which decides α (10 or 100).
    The real protocol runs in the first ``protocol_trials`` trials and the first
    ``protocol_folds`` folds of each; its simulations (protocol methods whose time is not
    measured) in the first ``simulated_trials`` trials (None: ``protocol_trials``), every
    fold. None: no limit.
    The order is trial by trial (every dataset's first trial, then the second, ...), so a
    long run stopped early has results for every dataset.
    A record holds dataset, method, trial, fold, accuracy, fit/predict seconds, train/test
    sizes, ``cached`` (read from disk) and the method's extra numbers.
    """
    root = Path(cache_dir)
    sim_trials = protocol_trials if simulated_trials is None else simulated_trials
    plan = []
    for trial in range(trials):  # trial-major: a run cut short has every dataset's trials
        for data in datasets:
            splitter = StratifiedKFold(folds, shuffle=True, random_state=seed + trial)
            for fold, (train, test) in enumerate(splitter.split(data.X, data.y)):
                for method in methods:
                    if method.protocol and not _runs(method, trial, fold, sim_trials,
                                                     protocol_trials, protocol_folds):
                        continue
                    plan.append((data, trial, fold, train, test, method))
    bar = Progress(len(plan), stream=stream, enabled=progress)
    records = []
    for data, trial, fold, train, test, method in plan:
        setting = ForestSetting.for_dataset(alpha_rows.get(data.name, data.y.shape[0]),
                                            n_estimators=n_estimators,
                                            random_state=seed + 1000 * trial + fold,
                                            n_jobs=n_jobs)
        path = _cache_dir(root, data, method, setting, folds) / f"t{trial}-f{fold}.json"
        record = _read_json(path)
        if record is None:
            out = method.run(data.X[train], data.y[train], data.X[test], setting)
            pred = np.asarray(out.predictions)
            if pred.shape != test.shape:
                raise RuntimeError(f"{method.key} returned {pred.shape} predictions for "
                                   f"{test.shape[0]} test rows")
            record = {"dataset": data.name, "method": method.key, "trial": trial,
                      "fold": fold, "accuracy": float(np.mean(pred == data.y[test])),
                      "fit_seconds": float(out.fit_seconds),
                      "predict_seconds": float(out.predict_seconds),
                      "n_train": int(train.shape[0]), "n_test": int(test.shape[0]),
                      "min_samples_split": setting.min_samples_split,
                      "extra": out.extra}
            _write_json(path, record)
            record = dict(record, cached=False)
        else:
            record = dict(record, cached=True)
        records.append(record)
        bar.step(f"{data.name} {method.key} t{trial} f{fold}")
    return records
