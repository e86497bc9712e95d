"""``cipherforest experiments``: the paper's evaluation as a report folder."""

from __future__ import annotations

import argparse

__all__ = ["add_experiments_parser", "run_experiments_command"]


def add_experiments_parser(sub) -> None:
    p = sub.add_parser("experiments", help="the paper's evaluation as a report folder",
                       description="Cross-validate every method on every dataset, measure "
                       "bitwise leakage, write Markdown + HTML + CSV + PNG to --out. Every "
                       "(method, dataset, fold) result is cached: rerun to resume.")
    p.add_argument("--out", required=True, help="report folder (created)")
    p.add_argument("--quick", action="store_true",
                   help="small run: 2 bundled datasets, 1 x 3-fold CV, 10 trees")
    p.add_argument("--datasets", nargs="+", default=None,
                   help="bundled names, CSV names from --data-dir, or openml:NAME_OR_ID")
    p.add_argument("--data-dir", default=None, help="folder of CSV datasets (label last)")
    p.add_argument("--openml-cache", default=None, help="OpenML cache folder")
    p.add_argument("--cache", default=None, help="result cache (default OUT/cache)")
    p.add_argument("--methods", nargs="+", default=None, help="method keys to run")
    for name, kind, text in (
            ("trials", int, "CV repetitions (paper 5)"), ("folds", int, "CV folds (paper 5)"),
            ("trees", int, "trees per forest (paper 100)"),
            ("max-rows", int, "stratified subsample of each dataset"),
            ("protocol-trees", int, "trees of the encrypted protocol runs"),
            ("protocol-rows", int, "training rows per fold of the protocol runs"),
            ("protocol-trials", int, "run the protocol (and simulations) in the first N "
             "trials only"),
            ("sim-trees", int, "trees of the simulated encrypted forests"),
            ("sim-rows", int, "training rows per fold of the simulated encrypted forests"),
            ("reference", str, "method key for win/tie/loss (default gipe_ckks_gini)"),
            ("jobs", int, "n_jobs of the forests (default 1)")):
        p.add_argument(f"--{name}", type=kind, default=None, help=text)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_experiments_command(args, parser: argparse.ArgumentParser) -> int:
    from ..experiments import ExperimentConfig, quick_config, run_experiments

    changes = {k: v for k, v in {
        "datasets": tuple(args.datasets) if args.datasets else None,
        "csv_dir": args.data_dir, "openml_cache": args.openml_cache,
        "methods": tuple(args.methods) if args.methods else None,
        "trials": args.trials, "folds": args.folds, "n_estimators": args.trees,
        "max_rows": args.max_rows, "protocol_trees": args.protocol_trees,
        "protocol_max_train_rows": args.protocol_rows,
        "protocol_trials": args.protocol_trials, "reference": args.reference,
        "simulated_trees": args.sim_trees, "simulated_max_train_rows": args.sim_rows,
        "n_jobs": args.jobs}.items() if v is not None}
    try:
        config = quick_config(**changes) if args.quick else ExperimentConfig(**changes)
        result = run_experiments(config, args.out, cache_dir=args.cache,
                                 progress=not args.no_progress)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        parser.error(str(exc))
    print(f"report: {result.folder / 'report.md'} and {result.folder / 'report.html'}")
    return 0
