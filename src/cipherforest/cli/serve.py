"""``cipherforest serve``: the private-forest server as an HTTP service."""

from __future__ import annotations

import argparse
import importlib.util

__all__ = ["add_serve_parser", "run_serve_command"]


def add_serve_parser(sub) -> None:
    serve = sub.add_parser("serve", help="run the private-forest server (HTTP, loopback by "
                           "default)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--data-dir", default="cipherforest-data",
                       help="sessions, uploads and the access key (default ./cipherforest-data)")
    serve.add_argument("--jobs", type=int, default=1,
                       help="worker processes per tree level of a training (trees are split "
                       "among them; default 1, -1 one per core)")
    dask = serve.add_mutually_exclusive_group()
    dask.add_argument("--dask-scheduler", metavar="tcp://HOST:PORT",
                      help="run the label work on this Dask cluster: each session's labels "
                      "in shards on its workers (needs cipherforest[dask])")
    dask.add_argument("--dask-workers", type=int, metavar="N",
                      help="run the label work on a Dask cluster of N worker processes "
                      "started on this machine (needs cipherforest[dask])")


def run_serve_command(args, parser: argparse.ArgumentParser) -> int:
    if not 0 <= args.port <= 65535:
        parser.error("--port must be in [0, 65535]")
    if args.jobs == 0:
        parser.error("--jobs must not be 0 (1 or more processes, or -1 for one per core)")
    dask = args.dask_scheduler is not None or args.dask_workers is not None
    if dask and args.jobs != 1:
        parser.error("--jobs applies without Dask: the Dask workers do the level work")
    if args.dask_workers is not None and args.dask_workers < 1:
        parser.error("--dask-workers must be at least 1")
    if dask and importlib.util.find_spec("distributed") is None:
        parser.error("--dask-scheduler and --dask-workers need dask.distributed: "
                     "pip install 'cipherforest[dask]'")
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        parser.error(f"'cipherforest serve' needs {' and '.join(missing)}: "
                     "pip install 'cipherforest[service]'")
    from ..service.serve import serve as run_server

    try:
        run_server(args.host, args.port, args.data_dir, n_jobs=args.jobs,
                   dask_scheduler=args.dask_scheduler, dask_workers=args.dask_workers)
    except OSError as exc:
        if not dask:
            raise
        parser.exit(2, f"cipherforest serve: {exc}\n")
    return 0
