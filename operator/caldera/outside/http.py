"""The synchronous HTTP client sessions use to ask an extender (:class:`~caldera.framework.outside.
Caller`), with Volcano's ``send`` rules.

It is the standard library's ``http.client``, one kept-alive connection per extender: a session
makes a call or more per task, and per call it costs a third of the CPU httpx's synchronous
client does (0.32 against 1.04 ms, ``docs/outside.md``). A connection the extender closed while
idle is opened again once, and the call sent again.

Each call is a POST with ``Content-Type: application/json``; only HTTP 200 is an answer, as in
Volcano (``failed <verb> with extender at URL <url>, code <code>``); the answer is read up to
10 MiB (Volcano's ``maxBodySize``); the timeout bounds connecting and each wait for the answer
(Go's bounds the whole call; for an answer in one piece they agree). Every failure is a
:class:`~caldera.framework.outside.CallError` naming the URL, never a traceback.
"""

from __future__ import annotations

import http.client
import socket
import threading
from urllib.parse import urlsplit

from caldera.framework.outside import MAX_BODY, CallError, Unreachable

__all__ = ["HttpCaller"]

_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
"""What a kept-alive connection the server closed while idle raises on its next use."""


class HttpCaller:
    """A :class:`~caldera.framework.outside.Caller` keeping one connection per extender."""

    def __init__(self) -> None:
        self._conns: dict[tuple[str, str, int], http.client.HTTPConnection] = {}
        self._lock = threading.Lock()

    def post(self, url: str, body: bytes, timeout: float) -> bytes:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Unreachable(f"POST {url}: not an http:// or https:// URL")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise Unreachable(f"POST {url}: not a valid port") from None
        key = (parts.scheme, parts.hostname, port)
        path = parts.path or "/"
        with self._lock:  # one call at a time per caller: sessions are single-threaded
            conn = self._conns.pop(key, None)
            reused = conn is not None
            try:
                for attempt in (1, 2):
                    if conn is None:
                        conn = _connect(key, timeout)
                    conn.timeout = timeout
                    if conn.sock is not None:
                        conn.sock.settimeout(timeout)
                    try:
                        status, answer = _exchange(conn, path, body)
                        break
                    except _STALE:
                        conn.close()
                        conn = None
                        if not reused or attempt == 2:
                            raise
                        reused = False
            except (OSError, http.client.HTTPException, _TooLarge) as exc:
                if conn is not None:
                    conn.close()  # what is left of the exchange must not be read as an answer
                if isinstance(exc, _TooLarge):
                    limit = MAX_BODY >> 20
                    raise CallError(f"POST {url}: the answer is larger than {limit} MiB") from None
                if isinstance(exc, TimeoutError):
                    raise Unreachable(f"POST {url}: no answer within {_seconds(timeout)}") from None
                raise Unreachable(f"POST {url}: {_describe(exc)}") from None
            assert conn is not None
            self._conns[key] = conn
        if status != 200:
            verb = path.rsplit("/", 1)[-1]
            raise CallError(f"failed {verb} with extender at URL {url}, code {status}")
        return answer

    def close(self) -> None:
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()


class _TooLarge(Exception):
    pass


def _connect(key: tuple[str, str, int], timeout: float) -> http.client.HTTPConnection:
    scheme, host, port = key
    conn: http.client.HTTPConnection
    if scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn.connect()
    # no Nagle: a request's headers and body go out as two writes, and waiting for the first
    # one's ACK (which the receiver delays) would add 40 ms to every call
    assert conn.sock is not None
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def _exchange(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, bytes]:
    conn.request("POST", path, body, _HEADERS)
    resp = conn.getresponse()
    answer = resp.read(MAX_BODY + 1)
    if len(answer) > MAX_BODY:
        raise _TooLarge
    if not resp.isclosed():
        resp.read()  # a body shorter than announced: finish it so the connection can be reused
    return resp.status, answer


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host ({exc.strerror})"
    return f"{type(exc).__name__}: {exc}"


def _seconds(timeout: float) -> str:
    return f"{timeout * 1000:g}ms" if timeout < 1 else f"{timeout:g}s"
