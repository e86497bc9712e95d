"""The step-by-step transcript of docs/service.md, run for real: CSV files, a server,
``cipherforest client encrypt | upload | train | predict``.

Writes ``train.csv`` and ``test.csv`` the way docs/service.md says (wine, rows shuffled with
``RandomState(0)``, the first 130 for training, the other 48 for testing, the class in a
``label`` column), starts ``cipherforest serve`` on ``--port`` (default 8000, the port of the
docs) with a fresh data directory, runs the documented commands in a temporary folder and
prints each command with its output (progress bars in their last state), so that the sizes
and times in the docs come from this script.

    python benchmarks/service_walkthrough.py [--port 8000]
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import temporary_privacy_ledger  # noqa: E402

KEY = "walkthrough-key"


def write_csv_files(folder: str) -> None:
    """train.csv and test.csv of docs/service.md."""
    import numpy as np
    from sklearn.datasets import load_wine

    wine = load_wine()
    order = np.random.RandomState(0).permutation(wine.data.shape[0])
    for name, rows in (("train.csv", order[:130]), ("test.csv", order[130:])):
        with open(os.path.join(folder, name), "w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow([*wine.feature_names, "label"])
            for i in rows:
                writer.writerow([*wine.data[i], int(wine.target[i])])


def _shown(text: str) -> str:
    """Output with carriage-return redraws reduced to their last state."""
    lines = (line.rstrip().split("\r")[-1] for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    temporary_privacy_ledger("service_walkthrough")
    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "CIPHERFOREST_SERVER_KEY": KEY,
           "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    url = f"http://127.0.0.1:{args.port}"
    command = [sys.executable, "-m", "cipherforest.cli"]
    with tempfile.TemporaryDirectory() as work:
        write_csv_files(work)
        server = subprocess.Popen([*command, "serve", "--port", str(args.port), "--data-dir",
                                   os.path.join(work, "server-data")], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(url + "/healthz", timeout=1).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"the server did not start on port {args.port}"
                                         ) from None
                    time.sleep(0.2)
            steps = [
                "client encrypt --data train.csv --target label --model my-model --trees 20 "
                "--max-depth 4 --random-state 0",
                f"client upload --model my-model --server {url}",
                "client upload --model my-model",
                "client train --model my-model",
                "client predict --model my-model --data test.csv --target label "
                "--out predictions.csv",
            ]
            print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
                  f"{time.strftime('%Y-%m-%d')}\n")
            for i, step in enumerate(steps):
                if i == 1:
                    print("$ export CIPHERFOREST_SERVER_KEY=...")
                print(f"$ cipherforest {step}")
                # Bytes, not text: text mode would turn the bars' carriage returns into
                # newlines.
                done = subprocess.run([*command, *shlex.split(step)], cwd=work, env=env,
                                      capture_output=True)
                for text in (done.stderr.decode(), done.stdout.decode()):
                    if _shown(text):
                        print(_shown(text))
                if done.returncode:
                    raise SystemExit(f"'{step}' failed with exit code {done.returncode}")
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
