"""Command-line interface.

* ``cipherforest demo`` — the encrypted random forest end to end on breast cancer through the
  embedded server: plaintext forest vs forest on GIPE ciphers vs GIPE + CKKS protocol.
* ``cipherforest compare`` — our trees and forests against scikit-learn's on bundled data.
* ``cipherforest compile`` — compile the numba kernels into the cache before the first fit.
* ``cipherforest serve`` — the private-forest server as an HTTP service (``service`` extra).
* ``cipherforest client encrypt | upload | train | predict | status`` — the data owner's side
  against a server (encrypt offline, upload resumably, train, predict).
* ``cipherforest experiments`` — the paper's evaluation (accuracy, time, leakage) as a report
  folder; ``--quick`` for a run of a few minutes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .client import add_client_parser, run_client
from .demo import (
    COMPARE_DATASETS,
    add_compare_parser,
    add_demo_parser,
    run_compare_command,
    run_comparison,
    run_demo_command,
    run_private_demo,
)
from .experiments import add_experiments_parser, run_experiments_command
from .serve import add_serve_parser, run_serve_command

__all__ = ["COMPARE_DATASETS", "build_parser", "main", "run_comparison", "run_private_demo"]

# Plain text for ``--help`` (the module docstring is reStructuredText for the API docs).
_DESCRIPTION = ("cipherforest: scikit-learn compatible decision trees and tree ensembles, "
                "and a random forest trained on encrypted data.")

def _add_compile_parser(sub) -> None:
    compile_ = sub.add_parser("compile", help="compile the numba kernels into the cache now "
                              "(the install step of make; a changed installation needs it "
                              "again)")
    compile_.add_argument("-q", "--quiet", action="store_true", help="print nothing")


def _run_compile_command(args, parser: argparse.ArgumentParser) -> int:
    from ..precompile import main as precompile

    return precompile(["--quiet"] if args.quiet else [])


_COMMANDS = {"demo": run_demo_command, "compare": run_compare_command,
             "compile": _run_compile_command,
             "serve": run_serve_command, "client": run_client,
             "experiments": run_experiments_command}


def build_parser() -> argparse.ArgumentParser:
    """The ``cipherforest`` argument parser with every command."""
    from .._version import __version__

    parser = argparse.ArgumentParser(prog="cipherforest", description=_DESCRIPTION)
    parser.add_argument("-V", "--version", action="version",
                        version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="command")
    add_demo_parser(sub)
    add_compare_parser(sub)
    _add_compile_parser(sub)
    add_serve_parser(sub)
    add_client_parser(sub)
    add_experiments_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cipherforest`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # no command: the overview, not an error
        parser.print_help(sys.stdout)
        return 0
    return _COMMANDS[args.command](args, parser)


if __name__ == "__main__":
    raise SystemExit(main())
