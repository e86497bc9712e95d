"""The ``experiments`` command line: its options and what they run.

The CLI forwards to :func:`add_arguments` and :func:`run_command`; ``python -m
cipherforest.experiments`` is the same command.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

__all__ = ["add_arguments", "main", "run_command"]

DESCRIPTION = ("Cross-validate every method on every dataset, measure bitwise leakage and "
               "attacks, time HEldpRFs through CKKS, write Markdown + HTML + CSV + PNG to "
               "--out. Every (method, dataset, fold) result is cached: rerun to resume.")

_NUMBERS = (
    ("trials", int, "CV repetitions (paper 5)"), ("folds", int, "CV folds (paper 5)"),
    ("trees", int, "trees per forest (paper 100)"),
    ("max-rows", int, "stratified subsample of each dataset"),
    ("protocol-trees", int, "trees of the encrypted protocol runs"),
    ("protocol-rows", int, "training rows per fold of the protocol runs"),
    ("protocol-round-rows", int, "training rows per fold of the protocol runs with query "
     "rounds (gini, dp); default: --protocol-rows"),
    ("protocol-trials", int, "run the protocol (and simulations) in the first N trials only"),
    ("protocol-folds", int, "run the protocol in the first N folds only"),
    ("sim-trees", int, "trees of the simulated encrypted forests"),
    ("sim-rows", int, "training rows per fold of the simulated encrypted forests"),
    ("sim-trials", int, "run the simulated encrypted forests in the first N trials only "
     "(default: --protocol-trials)"),
    ("reference", str, "method key for win/tie/loss"),
    ("jobs", int, "n_jobs of the forests (default 1)"))

_FIELDS = {"trials": "trials", "folds": "folds", "trees": "n_estimators",
           "max_rows": "max_rows", "protocol_trees": "protocol_trees",
           "protocol_rows": "protocol_max_train_rows",
           "protocol_round_rows": "protocol_round_max_train_rows",
           "protocol_trials": "protocol_trials",
           "protocol_folds": "protocol_folds",
           "sim_trees": "simulated_trees", "sim_rows": "simulated_max_train_rows",
           "sim_trials": "simulated_trials",
           "reference": "reference", "jobs": "n_jobs"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the command's options to ``parser``."""
    parser.add_argument("--out", required=True, help="report folder (created)")
    preset = parser.add_mutually_exclusive_group()
    preset.add_argument("--quick", action="store_true",
                        help="small run: 2 bundled datasets, 1 x 3-fold CV, 10 trees")
    preset.add_argument("--full", action="store_true",
                        help="the run of docs/results.md: 11 datasets, 5 x 5-fold CV, 100 "
                        "trees, the protocol reduced as that page says (needs --data-dir "
                        "for breastw and pendigits)")
    parser.add_argument("--datasets", nargs="+", default=None,
                        help="bundled names, CSV names from --data-dir, or openml:NAME_OR_ID")
    parser.add_argument("--data-dir", default=None, help="folder of CSV datasets (label last)")
    parser.add_argument("--openml-cache", default=None, help="OpenML cache folder")
    parser.add_argument("--cache", default=None, help="result cache (default OUT/cache)")
    parser.add_argument("--methods", nargs="+", default=None, help="method keys to run")
    for name, kind, text in _NUMBERS:
        parser.add_argument(f"--{name}", type=kind, default=None, help=text)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run what ``args`` (parsed with :func:`add_arguments`) ask for; print the report path."""
    from . import ExperimentConfig, full_config, quick_config, run_experiments

    changes = {field: getattr(args, option) for option, field in _FIELDS.items()
               if getattr(args, option) is not None}
    changes |= {k: v for k, v in {
        "datasets": tuple(args.datasets) if args.datasets else None,
        "csv_dir": args.data_dir, "openml_cache": args.openml_cache,
        "methods": tuple(args.methods) if args.methods else None}.items() if v is not None}
    preset = quick_config if args.quick else full_config if args.full else ExperimentConfig
    try:
        result = run_experiments(preset(**changes), args.out, cache_dir=args.cache,
                                 progress=not args.no_progress)
    except (ValueError, OSError, ImportError) as exc:  # OSError: files, network (URLError)
        parser.error(str(exc) or type(exc).__name__)
    print(f"report: {result.folder / 'report.md'} and {result.folder / 'report.html'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cipherforest.experiments``."""
    parser = argparse.ArgumentParser(prog="python -m cipherforest.experiments",
                                     description=DESCRIPTION)
    add_arguments(parser)
    return run_command(parser.parse_args(argv), parser)
