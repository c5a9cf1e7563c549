"""The HTTP server: the subset of SGLang's native API that the KL tests use."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from .engine import Engine, RequestError
from .utils import get_logger

logger = get_logger(__name__)

FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)\n"
)


class Handler(BaseHTTPRequestHandler):
    server_version = "mini-sglang"
    protocol_version = "HTTP/1.1"
    engine: Engine  # set by make_server

    def log_message(self, fmt, *args):  # uvicorn's access-log shape
        sys.stderr.write(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" {args[1] if len(args) > 1 else ""}\n')

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_PUT(self):
        self._route("PUT")

    def _route(self, method: str) -> None:
        path = urlsplit(self.path).path
        try:
            if path in ("/health", "/health_generate", "/ready") and method == "GET":
                return self._send(200, b"", "text/plain")
            if path in ("/get_server_info", "/server_info") and method == "GET":
                return self._json(200, self.engine.server_info())
            if path in ("/get_model_info", "/model_info") and method == "GET":
                return self._json(200, self.engine.model_info())
            if path == "/flush_cache" and method in ("GET", "POST"):
                self._read_body()
                self.engine.flush_cache()
                return self._send(200, FLUSHED.encode(), "text/plain; charset=utf-8")
            if path == "/generate" and method in ("POST", "PUT"):
                try:
                    body = json.loads(self._read_body() or b"null")
                except ValueError as exc:
                    return self._json(400, {"error": {"message": f"invalid JSON: {exc}"}})
                return self._json(200, self.engine.generate(body))
            return self._json(404, {"detail": "Not Found"})
        except RequestError as exc:
            return self._json(exc.status_code, {"error": {"message": str(exc)}})
        except Exception as exc:  # a bug in the engine: report it like a server would
            logger.exception("error while serving %s", path)
            return self._json(500, {"error": {"message": f"internal error: {exc}"}})

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json(self, status: int, payload) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def make_server(engine: Engine, host: str, port: int) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"engine": engine})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
