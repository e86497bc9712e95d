"""The paper's evaluation (section 5, appendices D–E), reproducible: accuracy, time, leakage.

* :func:`run_experiments` — cross-validate every method on every dataset (results cached per
  fold on disk, resumable), measure bitwise leakage per scheme, write a report folder
  (Markdown, self-contained HTML, CSV tables, PNG figures).
* :class:`ExperimentConfig` / :func:`full_config` / :func:`quick_config` — the paper's
  protocol, the run docs/results.md reports, and a small run.
* :mod:`.datasets` — sets bundled in installable packages, CSV folders, OpenML with a cache.
* :mod:`.methods` — the compared methods, one module each; :mod:`.heldp` and
  :mod:`.heldp_ckks` — HEldpRFs in the clear and through CKKS, with its cost model.

Command line: ``cipherforest experiments [--quick | --full] --out DIR`` (:mod:`.command`).
"""

from .._lazy import lazy_exports

_EXPORTS = {"PAPER_DATASETS": ".config", "ExperimentConfig": ".config",
            "full_config": ".config", "quick_config": ".config", "Dataset": ".datasets",
            "load_bundled": ".datasets", "load_csv": ".datasets",
            "load_csv_folder": ".datasets", "load_openml": ".datasets",
            "ExperimentResult": ".run", "load_datasets": ".run", "run_experiments": ".run"}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
