"""``cipherforest serve``: the private-forest server as an HTTP service, and
``cipherforest serve keys add | list | revoke``: its users' access keys."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import socket
import sys
import time

__all__ = ["add_serve_parser", "parse_bytes", "run_serve_command"]

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """A byte count from ``text``: an integer, optionally with K, M, G or T (powers of
    1024; ``2G``, ``512MiB``, ``1.5g``)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtKMGT]?)(?:i?[bB])?\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 2G, 512M, 1048576)")
    value = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least one byte")
    return value


def _bytes_or_zero(text: str) -> int:
    """A byte count as :func:`parse_bytes`, or 0."""
    return 0 if text.strip() == "0" else parse_bytes(text)


def _positive_int(text: str) -> int:
    """A whole number of at least 1 (``1e9`` allowed)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value.is_integer() or value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number of at least 1")
    return int(value)


def _add_key_actions(serve) -> None:
    from ..service.limits import Limits

    defaults = Limits()
    keys = serve.add_subparsers(dest="keys_command", metavar="keys", required=False)
    manage = keys.add_parser("keys", help="manage the per-user access keys of a data dir "
                             "(the server need not be stopped)")
    actions = manage.add_subparsers(dest="key_action", required=True)

    def data_dir(parser):
        # SUPPRESS: a --data-dir given before 'keys' is not overwritten by this default.
        parser.add_argument("--data-dir", default=argparse.SUPPRESS,
                            help="the server's data directory (default ./cipherforest-data)")

    add = actions.add_parser("add", help="make a key for a user; it is printed once, only "
                             "its SHA-256 is stored")
    add.add_argument("name", help="who the key is for (letters, digits, '_', '.', '@', '-')")
    add.add_argument("--sessions", type=_positive_int, default=defaults.max_sessions_per_key,
                     help="sessions the key may hold at once (default "
                     f"{defaults.max_sessions_per_key})")
    add.add_argument("--disk-bytes", type=parse_bytes,
                     default=defaults.max_disk_bytes_per_key,
                     help="bytes its sessions may keep on disk, e.g. 20G (default "
                     f"{defaults.max_disk_bytes_per_key >> 30}G)")
    add.add_argument("--rows-x-trees", type=_positive_int,
                     default=defaults.max_rows_x_trees_per_key,
                     help="sum over its sessions of training rows x trees (default "
                     f"{defaults.max_rows_x_trees_per_key:.0e})")
    data_dir(add)
    listing = actions.add_parser("list", help="the keys: id, name, quotas, usage, revoked")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    data_dir(listing)
    revoke = actions.add_parser("revoke", help="revoke a key: it opens no session and its "
                                "sessions' tokens are refused")
    revoke.add_argument("key", help="the key's name or id")
    data_dir(revoke)


#: ``serve`` options that set a field of :class:`~cipherforest.service.limits.Limits`:
#: flag, type, field, help (the default is the field's).
_LIMIT_OPTIONS = (
    ("--memory-limit", parse_bytes, "memory_limit", "estimated bytes the sessions in memory "
     "may hold together, e.g. 4G; the least recently used leave memory beyond it"),
    ("--memory-idle", float, "memory_idle_seconds", "seconds after which an unused session "
     "leaves memory"),
    ("--max-predict-rows", _positive_int, "max_predict_rows", "most rows of one prediction "
     "request"),
    ("--max-large-bodies", _positive_int, "max_large_bodies", "request bodies over 64 KiB "
     "received or processed at once (others wait, then get 503)"),
    ("--max-large-bodies-per-key", _positive_int, "max_large_bodies_per_key", "of these, "
     "the most one access key's sessions may have at once (one more gets 429)"),
    ("--body-timeout", float, "body_read_timeout", "seconds without a byte of a request "
     "body before the request is dropped"),
    ("--header-timeout", float, "header_timeout", "seconds a connection has to send its "
     "request headers before it is closed"),
    ("--max-keyless-per-ip", _positive_int, "max_keyless_per_ip", "connections one address "
     "may hold without a request carrying a key in progress; the oldest beyond it are "
     "closed"),
)


def _shown(value) -> str:
    """A default as the help shows it (sizes in G/M)."""
    if isinstance(value, int) and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 30}G" if value % (1 << 30) == 0 else f"{value >> 20}M"
    return f"{value:g}" if isinstance(value, float) else str(value)


def add_serve_parser(sub) -> None:
    from ..service.limits import Limits

    defaults = Limits()
    serve = sub.add_parser("serve", help="run the private-forest server (HTTP, loopback by "
                           "default); 'serve keys ...' manages per-user access keys")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--data-dir", default="cipherforest-data",
                       help="sessions, uploads and keys (default ./cipherforest-data)")
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
    for flag, kind, field, text in _LIMIT_OPTIONS:
        default = getattr(defaults, field)
        serve.add_argument(flag, type=kind, default=None, dest=field, help=f"{text} (default "
                           f"{'a quarter of the memory' if default is None else _shown(default)})")
    serve.add_argument("--limit-concurrency", type=_positive_int, default=256,
                       help="connections at once beyond which uvicorn answers 503 "
                       "(default 256)")
    serve.add_argument("--no-default-key", action="store_true",
                       help="accept only the per-user keys of 'serve keys', not "
                       "$CIPHERFOREST_SERVER_KEY or the generated access_key file")
    serve.add_argument("--restart-above", type=_bytes_or_zero, default=256 << 20,
                       help="when no session is in memory and no request came for "
                       "--restart-idle seconds, restart the server process (sessions are on "
                       "disk; waiting connections are kept) if it has grown this much since "
                       "its start, e.g. 512M; gives back what the HE library's memory pool "
                       "keeps (Linux; default 256M, 0: never)")
    serve.add_argument("--restart-idle", type=float, default=60.0,
                       help="seconds without a request before --restart-above applies "
                       "(default 60)")
    serve.add_argument("--ssl-certfile", default=None,
                       help="PEM certificate (chain): serve HTTPS through uvicorn's TLS")
    serve.add_argument("--ssl-keyfile", default=None,
                       help="PEM private key of --ssl-certfile (if not inside it)")
    _add_key_actions(serve)


def _unreachable(address: str, timeout: float = 10.0) -> str:
    """Why a TCP connection to a Dask scheduler's ``tcp://HOST:PORT`` fails ("" if it
    opens; other protocols are left to Dask)."""
    match = re.fullmatch(r"tcp://\[?([^\]]+?)\]?:(\d+)", address)
    if match is None:
        return "" if "://" in address else "expected tcp://HOST:PORT"
    try:
        socket.create_connection((match[1], int(match[2])), timeout=timeout).close()
    except OSError as exc:
        return str(exc)
    return ""


def _limits(args):
    from ..service.limits import Limits

    given = {field: getattr(args, field) for _, _, field, _ in _LIMIT_OPTIONS}
    return Limits(**{name: value for name, value in given.items() if value is not None})


def run_serve_command(args, parser: argparse.ArgumentParser) -> int:
    if getattr(args, "keys_command", None) == "keys":
        return _run_keys(args)
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
    if args.dask_scheduler is not None:
        problem = _unreachable(args.dask_scheduler)
        if problem:  # before the supervisor forks: one clear line, exit 2
            parser.exit(2, f"cipherforest serve: cannot reach the Dask scheduler at "
                        f"{args.dask_scheduler}: {problem}\n")
    for flag, field in (("--body-timeout", "body_read_timeout"),
                        ("--memory-idle", "memory_idle_seconds")):
        if getattr(args, field) is not None and not getattr(args, field) > 0:
            parser.error(f"{flag} must be a positive number of seconds")
    if args.ssl_keyfile and not args.ssl_certfile:
        parser.error("--ssl-keyfile goes with --ssl-certfile")
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        parser.error(f"'cipherforest serve' needs {' and '.join(missing)}: "
                     "pip install 'cipherforest[service]'")
    if not args.restart_idle > 0:
        parser.error("--restart-idle must be a positive number of seconds")
    from ..service.supervisor import can_supervise, supervise

    if args.restart_above and can_supervise():
        scheme = "https" if args.ssl_certfile else "http"
        print(f"cipherforest server on {scheme}://{args.host}:{args.port} (data in "
              f"{os.path.abspath(args.data_dir)})", flush=True)
        try:
            return supervise(args.host, args.port, lambda sock: _serve(args, sock))
        except OSError as exc:
            print(f"cipherforest serve: {exc}", file=sys.stderr)
            return 1
    return _serve(args, None)


def _serve(args, sock) -> int:
    """The server process (under the supervisor if ``sock`` is given); the exit code."""
    from ..service.serve import serve as run_server
    from ..service.storage import StorageError

    try:
        return run_server(args.host, args.port, args.data_dir, _limits(args), n_jobs=args.jobs,
                          default_key=not args.no_default_key,
                          ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile,
                          limit_concurrency=args.limit_concurrency, sock=sock,
                          restart_above=args.restart_above, restart_idle=args.restart_idle,
                          dask_scheduler=args.dask_scheduler, dask_workers=args.dask_workers)
    except (StorageError, ValueError, OSError) as exc:
        print(f"cipherforest serve: {exc}", file=sys.stderr)
        return 1


def _run_keys(args, out=None) -> int:
    """``serve keys add | list | revoke`` on the data directory's key file."""
    from ..service.keys import KeyStore
    from ..service.limits import Quotas

    out = sys.stdout if out is None else out
    data_dir = getattr(args, "data_dir", "cipherforest-data")
    try:
        if args.key_action == "add":
            os.makedirs(data_dir, mode=0o700, exist_ok=True)
            key, secret = KeyStore(data_dir).add(args.name, Quotas(
                args.sessions, args.disk_bytes, args.rows_x_trees))
            print(f"added key {key.name!r} (id {key.id}); give this key to its user, it is "
                  f"not shown again:\n{secret}", file=out)
        elif args.key_action == "revoke":
            key = KeyStore(data_dir).revoke(args.key)
            print(f"revoked key {key.name!r} (id {key.id}) at "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(key.revoked))}",
                  file=out)
        else:
            _list_keys(data_dir, args.json, out)
    except (ValueError, OSError) as exc:
        print(f"cipherforest serve keys {args.key_action}: {exc}", file=sys.stderr)
        return 1
    return 0


def _list_keys(data_dir: str, as_json: bool, out) -> None:
    """The keys of ``data_dir`` with their quotas and, if the index is there, usage."""
    from ..service.index import INDEX_FILE, IndexDamaged, SessionIndex
    from ..service.keys import KeyStore

    keys = KeyStore(data_dir).keys()
    usage = {}
    if os.path.exists(os.path.join(data_dir, INDEX_FILE)):
        try:
            index = SessionIndex(data_dir)
        except IndexDamaged as exc:  # the server rebuilds it at its next start
            print(f"note: usage unknown, {exc}", file=sys.stderr)
        else:
            try:
                usage = {key.id: index.key_usage(key.id) for key in keys}
            finally:
                index.close()
    rows = [{"id": key.id, "name": key.name,
             "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(key.created)),
             "revoked": None if key.revoked is None else time.strftime(
                 "%Y-%m-%d %H:%M", time.localtime(key.revoked)),
             "sessions": usage.get(key.id, (0, 0, 0))[0], "max_sessions": key.quotas.sessions,
             "disk_bytes": usage.get(key.id, (0, 0, 0))[1],
             "max_disk_bytes": key.quotas.disk_bytes,
             "rows_x_trees": usage.get(key.id, (0, 0, 0))[2],
             "max_rows_x_trees": key.quotas.rows_x_trees} for key in keys]
    if as_json:
        print(json.dumps(rows, indent=2), file=out)
        return
    if not rows:
        print(f"no per-user keys in {data_dir} (add one with 'cipherforest serve keys add "
              "NAME')", file=out)
        return
    print(f"{'id':<16} {'name':<20} {'created':<16} {'revoked':<16} {'sessions':>11} "
          f"{'disk MB':>17} {'rows x trees':>23}", file=out)
    for row in rows:
        sessions = f"{row['sessions']}/{row['max_sessions']}"
        disk = f"{row['disk_bytes'] / 1e6:.1f}/{row['max_disk_bytes'] / 1e6:.0f}"
        work = f"{row['rows_x_trees']}/{row['max_rows_x_trees']}"
        print(f"{row['id']:<16} {row['name']:<20} {row['created']:<16} "
              f"{row['revoked'] or '-':<16} {sessions:>11} {disk:>17} {work:>23}", file=out)
