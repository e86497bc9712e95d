"""``cipherforest experiments``: the paper's evaluation as a report folder (the options and
their meaning live in :mod:`cipherforest.experiments.command`)."""

from __future__ import annotations

import argparse

__all__ = ["add_experiments_parser", "run_experiments_command"]


def add_experiments_parser(sub) -> None:
    from ..experiments.command import DESCRIPTION, add_arguments

    parser = sub.add_parser("experiments", help="the paper's evaluation as a report folder",
                            description=DESCRIPTION)
    add_arguments(parser)


def run_experiments_command(args, parser: argparse.ArgumentParser) -> int:
    from ..experiments.command import run_command

    return run_command(args, parser)
