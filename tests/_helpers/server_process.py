"""``cipherforest serve`` as a subprocess in tests: a free loopback port, a restartable
server process, and a transport that counts requests and kills the server once (used by
tests/service/ and tests/privacy/)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import cipherforest
from cipherforest.privacy.protocol import HTTPTransport, decode_message

KEY = "restart-test-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """``cipherforest serve`` on a loopback port and a data dir, restartable."""

    def __init__(self, data_dir: Path, port: int, env_key: bool = True,
                 extra_args: tuple[str, ...] = ()):
        self.data_dir, self.port, self.extra_args = data_dir, port, list(extra_args)
        self.url = f"http://127.0.0.1:{port}"
        src = str(Path(cipherforest.__file__).resolve().parents[1])
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [src, os.environ.get("PYTHONPATH", "")])}
        if env_key:
            self.env["CIPHERFOREST_SERVER_KEY"] = KEY
        else:
            self.env.pop("CIPHERFOREST_SERVER_KEY", None)
        self.process = None

    def start(self, wait: bool = True) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cipherforest.cli", "serve", "--port", str(self.port),
             "--data-dir", str(self.data_dir), *self.extra_args], env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        if wait:
            self.wait_ready()

    def wait_ready(self, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.process.stdout.read()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


class CountingTransport(HTTPTransport):
    """Counts HTTP requests by method and endpoint, and kills the server once."""

    def __init__(self, *args, kill_at_answer: int, server: ServerProcess, **kwargs):
        super().__init__(*args, **kwargs)
        self.kill_at_answer, self.server = kill_at_answer, server
        self.answers = 0
        self.after_kill: list[str] = []
        self.killed = False

    def handle(self, data: bytes) -> bytes:
        if decode_message(data).kind == "answer":
            self.answers += 1
            if self.answers == self.kill_at_answer:
                # SIGKILL while the server works on this answer, restart it a bit later.
                def kill_and_restart():
                    time.sleep(0.05)
                    self.server.kill()
                    self.killed = True
                    time.sleep(0.5)
                    self.server.start(wait=False)

                threading.Thread(target=kill_and_restart, daemon=True).start()
        return super().handle(data)

    def _request(self, method, endpoint, *args, **kwargs):
        if self.killed:
            self.after_kill.append(f"{method} {endpoint}")
        return super()._request(method, endpoint, *args, **kwargs)
