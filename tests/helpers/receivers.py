"""Local receivers for alert channels: an HTTP webhook sink and a minimal SMTP sink.

Both bind to 127.0.0.1 on a free port, run in a thread, and are stopped by their context
manager, so tests see exactly what a channel sent.
"""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def local_http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Yields the base URL of `handler` served on 127.0.0.1 in a thread, stopped at exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True  # a handler still answering slowly does not hold the exit
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def webhook_receiver(status: int = 200) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Yields (url, received JSON bodies); answers every POST with `status`."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_args: Any) -> None:
            pass

    with local_http_server(Handler) as url:
        yield f"{url}/hook", received


@contextmanager
def smtp_receiver() -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Yields (port, messages): each message is {"from", "to", "data"} of one SMTP session."""
    messages: list[dict[str, Any]] = []

    class Handler(socketserver.StreamRequestHandler):
        def reply(self, line: str) -> None:
            self.wfile.write((line + "\r\n").encode())

        def handle(self) -> None:
            message: dict[str, Any] = {"to": []}
            self.reply("220 localhost test SMTP")
            while raw := self.rfile.readline():
                command = raw.decode().strip()
                verb = command.split(" ", 1)[0].upper()
                if verb in ("EHLO", "HELO"):
                    self.reply("250 localhost")
                elif verb == "MAIL":
                    message["from"] = command.split(":", 1)[1].strip()
                    self.reply("250 OK")
                elif verb == "RCPT":
                    message["to"].append(command.split(":", 1)[1].strip())
                    self.reply("250 OK")
                elif verb == "DATA":
                    self.reply("354 end with .")
                    lines = []
                    while (line := self.rfile.readline().decode()) not in (".\r\n", ".\n", ""):
                        lines.append(line)
                    message["data"] = "".join(lines)
                    messages.append(message)
                    self.reply("250 queued")
                elif verb == "QUIT":
                    self.reply("221 bye")
                    return
                else:
                    self.reply("250 OK")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], messages
    finally:
        server.shutdown()
        server.server_close()
