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

from .config import PAPER_DATASETS, ExperimentConfig, full_config, quick_config
from .datasets import Dataset, load_bundled, load_csv, load_csv_folder, load_openml
from .run import ExperimentResult, load_datasets, run_experiments

__all__ = [
    "PAPER_DATASETS",
    "Dataset",
    "ExperimentConfig",
    "ExperimentResult",
    "full_config",
    "load_bundled",
    "load_csv",
    "load_csv_folder",
    "load_datasets",
    "load_openml",
    "quick_config",
    "run_experiments",
]
