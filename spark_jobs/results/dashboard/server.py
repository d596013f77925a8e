"""Run the dashboard app with uvicorn on dashboard.host (127.0.0.1 unless configured): in the
foreground (`tideline dashboard`) or in a thread that the platform and the tests start and
stop."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

from spark_jobs.config.network import connect_host
from spark_jobs.settings import Settings

START_TIMEOUT_S = 20.0


class DashboardStartError(RuntimeError):
    """The dashboard could not listen; the message says what to change."""


def _server(settings: Settings, port: int):  # -> uvicorn.Server
    import uvicorn

    from spark_jobs.results.dashboard.app import create_app

    config = uvicorn.Config(create_app(settings), host=settings.dashboard.host, port=port,
                            log_level="warning", access_log=False)
    return uvicorn.Server(config)


def check_port_free(host: str, port: int) -> None:
    """Fail at start with a message that says what to change, not a uvicorn traceback."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise DashboardStartError(
                f"dashboard: cannot listen on {host}:{port} ({exc.strerror}); set "
                "dashboard.port (or TIDELINE_DASHBOARD__PORT) to a free port"
            ) from None


def serve_forever(settings: Settings, port: int | None = None) -> None:
    """Serve until Ctrl-C."""
    port = port or settings.dashboard.port
    check_port_free(settings.dashboard.host, port)
    print(f"dashboard on http://{connect_host(settings.dashboard.host)}:{port}/ (listening on "
          f"{settings.dashboard.host})", flush=True)
    _server(settings, port).run()


class DashboardServer:
    """The dashboard in a background thread; `port=0` picks a free port (tests)."""

    def __init__(self, settings: Settings, port: int | None = None) -> None:
        self.settings = settings
        self.port = settings.dashboard.port if port is None else port
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{connect_host(self.settings.dashboard.host)}:{self.port}/"

    def start(self) -> str:
        if self.port == 0:
            with socket.socket() as probe:
                probe.bind((self.settings.dashboard.host, 0))
                self.port = probe.getsockname()[1]
        check_port_free(self.settings.dashboard.host, self.port)
        self._server = _server(self.settings, self.port)
        self._thread = threading.Thread(target=self._server.run, name="dashboard", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise DashboardStartError(f"dashboard did not start on {self.url}")
            time.sleep(0.05)
        return self.url

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> DashboardServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
