"""Small HTTP servers on loopback for tests that need something to answer over real HTTP (an
extender, a search API): serve one in a thread, and answer JSON from a handler."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["reply", "serving"]


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[str]:
    """``server``'s base URL while it serves on a thread of its own."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def reply(handler: BaseHTTPRequestHandler, data: bytes, code: int = 200) -> None:
    """Answer ``data`` as a JSON body."""
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
