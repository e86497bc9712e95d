"""The encrypted forest through the HTTP service at the paper's scale, resumable across stops.

Runs ``cipherforest serve --jobs J`` and the ``cipherforest client`` commands (encrypt,
upload, ``train --verbose``, predict) as subprocesses in a work directory, as a data owner
and a server operator would, and samples the summed proportional set size (PSS) of all of
them (and of this script, which is idle while they run). Each invocation is a *segment*,
logged in ``WORK/run.json``; stop one any time (Ctrl-C, or ``--stop-after SECONDS``, which
kills the client and the server) and run the same command again to continue: the upload
skips what the server committed, the server restores the session from its data directory,
and ``train`` replays its recorded answers and continues from the server's last persisted
level. A run that needs more hours than a machine is free for is done in several segments.

When training is done: predicts the held-out rows through the server, and compares with the
plaintext ``RandomForestClassifier`` and with ``RandomForestClassifier`` on the client's GIPE
ciphers with clear labels (same parameters), which the encrypted forest must equal.
Prints (and writes to ``WORK/report.md``) time per stage and per segment, query bytes per
round, upload bytes per row, the peak memory of each segment, and the accuracies.

Usage::

    # issue #11's 30,000-row run in the Gini selection (BFV: CKKS cannot carry the squared
    # counts of ~22,500 rows exactly), 100 trees, alpha = 100, two processes per level
    python benchmarks/private_forest_service.py --work /data/run30k --stop-after 7200
    python benchmarks/private_forest_service.py --work /data/run30k      # continue it

    python benchmarks/private_forest_service.py --work /tmp/small --dataset synthetic2000 \\
        --trees 4 --min-samples-split 10                                # a quick check

    # the label work on two Dask worker processes (cipherforest serve --dask-workers 2)
    python benchmarks/private_forest_service.py --work /data/run100k --dataset \\
        synthetic100000 --dask-workers 2

Datasets as in ``private_forest.py`` (syntheticN = make_classification(N, 20 features, 10
informative, random_state=0), 25 % held out; pendigits from ../shared/data).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import machine_line, temporary_privacy_ledger  # noqa: E402
from private_forest import MemorySampler, load  # noqa: E402
from service_load import checkout_env, forest_oracle, start_server  # noqa: E402

ROUND_LINE = re.compile(r"round (\d+): (\d+) open nodes, ([\d.]+) MB query, ([\d.]+) s")
PARAMS = ("dataset", "trees", "max_bins", "min_samples_split", "scheme", "split_selection",
          "label_epsilon", "jobs", "dask_workers")


def write_csv(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    """Features at full precision (the oracle re-reads them), label column ``y``; written
    to a temporary name and renamed, so a stop never leaves half a file."""
    partial = path.with_suffix(".partial")
    with open(partial, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow([f"f{j}" for j in range(X.shape[1])] + ["y"])
        for row, label in zip(X, y, strict=True):
            writer.writerow([repr(float(v)) for v in row] + [str(label)])
    os.replace(partial, path)


class Run:
    """The work directory: data, server data dir, model dir, access key and the log."""

    def __init__(self, work: Path, params: dict):
        self.work = work
        self.params = params
        self.log_path = work / "run.json"
        work.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists():
            self.log = json.loads(self.log_path.read_text())
            if self.log["params"] != params:
                raise SystemExit(f"{work} holds a run with other parameters "
                                 f"{self.log['params']}; use another --work")
        else:
            self.log = {"params": params, "segments": []}
        key_path = work / "access_key"
        if not key_path.exists():
            fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as file:
                file.write(secrets.token_urlsafe(32))
        self.key = key_path.read_text().strip()
        self.env = checkout_env(self.key)
        self.model = work / "model"
        self.train_csv, self.test_csv = work / "train.csv", work / "test.csv"

    def save(self) -> None:
        partial = self.log_path.with_suffix(".partial")
        partial.write_text(json.dumps(self.log, indent=1))
        os.replace(partial, self.log_path)

    def stage(self) -> str:
        if not (self.model / "client.npz").exists():
            return "new"
        from cipherforest.privacy.package import model_stage

        return model_stage(self.model)


class Segment:
    """One invocation: starts the server, runs client commands, records times and rounds."""

    def __init__(self, run: Run, stop_after: float | None):
        self.run = run
        self.deadline = None if stop_after is None else time.monotonic() + stop_after
        self.record = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                       "machine": machine_line(), "stage_before": run.stage(), "steps": [],
                       "rounds": [], "stopped": False}
        self.server = None
        self.url = None

    def start_server(self) -> None:
        with open(self.run.work / "server.log", "a") as log:
            try:
                workers = self.run.params.get("dask_workers")
                options = (("--dask-workers", str(workers)) if workers
                           else ("--jobs", str(self.run.params["jobs"])))
                self.server, self.url = start_server(
                    self.run.work / "server", self.run.key, *options, stdout=log,
                    stderr=subprocess.STDOUT)
            except RuntimeError as exc:
                raise SystemExit(f"{exc} (see {self.run.work / 'server.log'})") from None

    def stop_server(self) -> None:
        if self.server is not None and self.server.poll() is None:
            # A level in progress is not waited for: the session resumes from the last
            # persisted level (SIGKILL is what tests/service/test_service_restart.py proves). Its
            # level workers go too: an orphaned one would finish its share of the level.
            workers = MemorySampler._descendants(self.server.pid)[1:]
            self.server.kill()
            self.server.wait()
            for pid in workers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def client(self, name: str, *args: str) -> bool:
        """Run ``cipherforest client NAME ARGS``; False if the deadline stopped it."""
        command = [sys.executable, "-m", "cipherforest.cli", "client", name, *args]
        started = time.perf_counter()
        process = subprocess.Popen(command, env=self.run.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=self._read, args=(process, lines), daemon=True)
        reader.start()
        stopped = False
        try:
            while process.poll() is None:
                if self.deadline is not None and time.monotonic() > self.deadline:
                    stopped = True
                    break
                time.sleep(0.5)
        except KeyboardInterrupt:  # Ctrl-C: stop this segment as the deadline would
            stopped = True
        if stopped:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        reader.join()
        seconds = time.perf_counter() - started
        self.record["steps"].append({"step": name, "seconds": seconds,
                                     "stopped": stopped, "rc": process.returncode})
        if stopped:
            self.record["stopped"] = True
            return False
        if process.returncode != 0:
            raise SystemExit(f"cipherforest client {name} failed ({process.returncode}):\n"
                             + "".join(lines[-20:]))
        return True

    def _read(self, process, lines: list[str]) -> None:
        with open(self.run.work / "client.log", "a") as log:
            for line in process.stdout:
                lines.append(line)
                log.write(line)
                log.flush()
                match = ROUND_LINE.search(line)
                if match:
                    n, nodes, mb, seconds = match.groups()
                    self.record["rounds"].append({"round": int(n), "open_nodes": int(nodes),
                                                  "query_mb": float(mb),
                                                  "seconds": float(seconds)})
                    print(line.rstrip(), file=sys.stderr, flush=True)
                elif "labels" in line or "trained" in line or "committed" in line:
                    print(line.rstrip()[-200:], file=sys.stderr, flush=True)


def forest_options(params: dict) -> list[str]:
    options = ["--trees", str(params["trees"]), "--min-samples-split",
               str(params["min_samples_split"]), "--scheme", params["scheme"],
               "--random-state", "0", "--split-selection", params["split_selection"]]
    if params["max_bins"] is not None:
        options += ["--max-bins", str(params["max_bins"])]
    if params["label_epsilon"] is not None:
        options += ["--label-epsilon", str(params["label_epsilon"])]
    return options


def run_segment(run: Run, stop_after: float | None, memory_report: float | None,
                memory_interval: float) -> bool:
    """One segment: as far as the run goes before the deadline; True when it is complete."""
    params = run.params
    if not run.test_csv.exists():
        X_train, X_test, y_train, y_test = load(params["dataset"])
        write_csv(run.train_csv, X_train, y_train)
        write_csv(run.test_csv, X_test, y_test)
    segment = Segment(run, stop_after)
    run.log["segments"].append(segment.record)
    done = False
    with MemorySampler(interval=memory_interval, report_every=memory_report) as memory:
        try:
            if run.stage() == "new":
                memory.phase = "encrypt"
                if not segment.client("encrypt", "--data", str(run.train_csv), "--target",
                                      "y", "--model", str(run.model),
                                      *forest_options(params)):
                    return False
            segment.start_server()
            steps = [("upload", "uploading", ["upload", "--model", str(run.model),
                                              "--server", segment.url]),
                     ("train", "training", ["train", "--model", str(run.model), "--server",
                                            segment.url, "--verbose", "--timeout", "3600"]),
                     ("predict", "predict", ["predict", "--model", str(run.model), "--data",
                                             str(run.test_csv), "--target", "y", "--out",
                                             str(run.work / "predictions.csv"), "--server",
                                             segment.url])]
            for name, phase, args in steps:
                if name == "upload" and run.stage() not in ("encrypted", "uploading"):
                    continue
                if name == "train" and run.stage() == "trained":
                    continue
                memory.phase = phase
                if not segment.client(*args):
                    return False
            done = True
        finally:
            segment.stop_server()
            memory.phase = "stopped"
            segment.record["ended"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            segment.record["stage_after"] = run.stage()
            segment.record["peak_pss_gb"] = memory.peak / 1e9
            segment.record["peak_phase"] = memory.peak_phase
            segment.record["peak_parts_gb"] = [p / 1e9 for p in memory.peak_parts]
            run.save()
    return done


def accuracies(run: Run) -> dict:
    """Accuracy of the encrypted forest's predictions, of the plaintext forest, and of the
    forest on the client's GIPE ciphers (the oracle: grown on the labels the server saw —
    the randomized-response labels of the setup message under ``rr`` — with leaf
    frequencies from the true labels), and the agreement with it."""
    from cipherforest.cli.client import read_csv
    from cipherforest.ensemble import RandomForestClassifier
    from cipherforest.privacy import PrivateForestClient
    from cipherforest.privacy.protocol import decode_message

    params = run.params
    X_train, y_train, _ = read_csv(str(run.train_csv), "y")
    X_test, y_test, _ = read_csv(str(run.test_csv), "y")
    with open(run.work / "predictions.csv", newline="") as file:
        predicted = np.array([row[0] for row in list(csv.reader(file))[1:]])
    forest = dict(n_estimators=params["trees"], random_state=0, max_bins=params["max_bins"],
                  min_samples_split=params["min_samples_split"], n_jobs=-1)
    plain = RandomForestClassifier(**forest).fit(X_train, y_train).predict(X_test)
    client = PrivateForestClient.load(str(run.model))
    setup = decode_message((run.model / "package" / "setup.msg").read_bytes(), "setup")
    # rr: the server grew the trees on the randomized labels; otherwise on the true ones.
    oracle = forest_oracle(client, X_train, y_train, X_test, forest,
                           setup.arrays.get("y_rr"))
    return {"plain": float(np.mean(plain == y_test)), "gipe": float(np.mean(oracle == y_test)),
            "encrypted": float(np.mean(predicted == y_test)),
            "agreement": float(np.mean(predicted == oracle)),
            "train_rows": X_train.shape[0], "test_rows": X_test.shape[0]}


def report(run: Run, result: dict | None) -> str:
    params, segments = run.log["params"], run.log["segments"]
    package = run.model / "package"
    upload = sum(f.stat().st_size for f in package.glob("*.msg")) if package.exists() else 0
    # Round lines come after each reply: an answer whose reply a stop cut off has none.
    rounds = [r for s in segments for r in s["rounds"]]
    answers = len(list((run.model / "rounds").glob("answer-*.msg")))
    by_step: dict[str, float] = {}
    for s in segments:
        for step in s["steps"]:
            by_step[step["step"]] = by_step.get(step["step"], 0.0) + step["seconds"]
    lines = [f"## {params['dataset']}, {params['trees']} trees, {params['scheme'].upper()}, "
             f"split selection {params['split_selection']}, alpha = "
             f"{params['min_samples_split']}, max_bins = {params['max_bins']}, "
             + (f"{params['dask_workers']} Dask workers" if params.get("dask_workers")
                else f"{params['jobs']} server processes"), "",
             segments[-1]["machine"], "",
             "| segment | started | ended | stage before → after | seconds by step | rounds | "
             "peak GB (PSS, all processes) | at |",
             "|---|---|---|---|---|---:|---:|---|"]
    for i, s in enumerate(segments, 1):
        steps = ", ".join(f"{t['step']} {t['seconds']:.0f}" + (" (stopped)" if t["stopped"]
                                                                  else "")
                          for t in s["steps"])
        lines.append(f"| {i} | {s['started']} | {s.get('ended', '—')} | "
                     f"{s['stage_before']} → {s.get('stage_after', '?')} | {steps} | "
                     f"{len(s['rounds'])} | {s.get('peak_pss_gb', float('nan')):.2f} | "
                     f"{s.get('peak_phase', '—')} |")
    lines += ["", "| | value |", "|---|---:|"]
    if result is not None:
        lines.append(f"| training rows | {result['train_rows']:,} |")
    lines += [f"| upload (package files) | {upload / 1e6:.1f} MB |",
              *(f"| {step} seconds (all segments) | {seconds:,.0f} |"
                for step, seconds in by_step.items()),
              f"| rounds (answers recorded) | {answers} |"]
    if rounds:
        mb = np.array([r["query_mb"] for r in rounds])
        seconds = np.array([r["seconds"] for r in rounds])
        lines += [f"| query MB per round ({len(rounds)} seen): mean / max | {mb.mean():.1f} / "
                  f"{mb.max():.1f} |",
                  f"| seconds per round: mean / max | {seconds.mean():.0f} / "
                  f"{seconds.max():.0f} |",
                  f"| open nodes: max | {max(r['open_nodes'] for r in rounds):,} |"]
    lines.append(f"| peak memory over segments (PSS) | "
                 f"{max(s.get('peak_pss_gb', 0) for s in segments):.2f} GB |")
    if result is not None:
        lines += [f"| upload bytes per training row | {upload / result['train_rows']:,.0f} |",
                  f"| accuracy: plaintext forest / GIPE forest / encrypted | "
                  f"{result['plain']:.4f} / {result['gipe']:.4f} / "
                  f"{result['encrypted']:.4f} |",
                  f"| encrypted predictions equal to the GIPE forest's | "
                  f"{100 * result['agreement']:.2f} % |"]
    else:
        lines.append("| status | not finished: run the same command again to continue |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", required=True, type=Path,
                        help="work directory (created; rerun with the same one to continue)")
    parser.add_argument("--dataset", default="synthetic30000")
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--max-bins", type=int, default=32)
    parser.add_argument("--min-samples-split", type=int, default=100)
    parser.add_argument("--scheme", choices=("ckks", "bfv"), default="bfv")
    parser.add_argument("--split-selection", choices=("gini", "rr", "blind", "dp"),
                        default="gini")
    parser.add_argument("--label-epsilon", type=float, default=None)
    parser.add_argument("--jobs", type=int, default=2, help="server processes per level")
    parser.add_argument("--dask-workers", type=int, default=None, metavar="N",
                        help="serve with --dask-workers N (the label work on a local Dask "
                        "cluster of N worker processes) instead of --jobs")
    parser.add_argument("--stop-after", type=float, default=None, metavar="SECONDS",
                        help="stop this segment (client and server) after SECONDS")
    parser.add_argument("--memory-report", type=float, default=None, metavar="SECONDS",
                        help="print the summed PSS and its peak every SECONDS")
    parser.add_argument("--memory-interval", type=float, default=2.0, metavar="SECONDS",
                        help="seconds between PSS samples (default 2: the kernel walks "
                        "every page of a process to give its PSS, which for processes of "
                        "many GB costs a good part of a core if done often)")
    args = parser.parse_args(argv)
    temporary_privacy_ledger("private_forest_service")
    params = {name: getattr(args, name) for name in PARAMS}
    run = Run(args.work, params)
    done = run_segment(run, args.stop_after, args.memory_report, args.memory_interval)
    result = accuracies(run) if done else None
    if result is not None:
        run.log["result"] = result
        run.save()
    text = report(run, result)
    (args.work / "report.md").write_text(text)
    print(text)
    if not done:
        print(f"stopped; run the same command again to continue ({args.work})",
              file=sys.stderr)
    return 0 if done else 3


if __name__ == "__main__":
    raise SystemExit(main())
