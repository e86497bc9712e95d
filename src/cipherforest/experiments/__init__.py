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

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {"PAPER_DATASETS": ".config", "ExperimentConfig": ".config",
            "full_config": ".config", "quick_config": ".config", "Dataset": ".datasets",
            "load_bundled": ".datasets", "load_csv": ".datasets",
            "load_csv_folder": ".datasets", "load_openml": ".datasets",
            "ExperimentResult": ".run", "load_datasets": ".run", "run_experiments": ".run"}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers (and the API reference) see the names
    from .config import PAPER_DATASETS as PAPER_DATASETS
    from .config import ExperimentConfig as ExperimentConfig
    from .config import full_config as full_config
    from .config import quick_config as quick_config
    from .datasets import Dataset as Dataset
    from .datasets import load_bundled as load_bundled
    from .datasets import load_csv as load_csv
    from .datasets import load_csv_folder as load_csv_folder
    from .datasets import load_openml as load_openml
    from .run import ExperimentResult as ExperimentResult
    from .run import load_datasets as load_datasets
    from .run import run_experiments as run_experiments
