"""The paper's evaluation (section 5, appendices D–E), reproducible: accuracy, time, leakage.

* :func:`run_experiments` — cross-validate every method on every dataset (results cached per
  fold on disk, resumable), measure bitwise leakage per scheme, write a report folder
  (Markdown, self-contained HTML, CSV tables, PNG figures).
* :class:`ExperimentConfig` / :func:`quick_config` — the paper's protocol, and a small run.
* :mod:`.datasets` — scikit-learn's bundled sets, CSV folders, OpenML with a local cache.
* :mod:`.methods` — the compared methods, one module each.

Command line: ``cipherforest experiments [--quick] --out DIR``.
"""

from .config import PAPER_DATASETS, ExperimentConfig, quick_config
from .datasets import Dataset, load_bundled, load_csv, load_csv_folder, load_openml
from .run import ExperimentResult, load_datasets, run_experiments

__all__ = [
    "PAPER_DATASETS",
    "Dataset",
    "ExperimentConfig",
    "ExperimentResult",
    "load_bundled",
    "load_csv",
    "load_csv_folder",
    "load_datasets",
    "load_openml",
    "quick_config",
    "run_experiments",
]
