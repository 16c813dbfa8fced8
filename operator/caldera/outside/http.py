"""The synchronous HTTP client sessions use to ask an extender (:class:`~caldera.framework.outside.
Caller`), with Volcano's ``send`` rules.

One ``httpx.Client`` per process keeps connections to each extender open across calls and
sessions (a session makes hundreds of calls; a new TCP connection per call would double their
cost). Each call is a POST with ``Content-Type: application/json``; only HTTP 200 is an answer,
as in Volcano (``failed <verb> with extender at URL <url>, code <code>``); the answer is read
up to 10 MiB (Volcano's ``maxBodySize``); the timeout bounds connecting, sending and each
wait for the answer (Go's bounds the whole call; for an answer in one piece they agree). Every
failure is a :class:`~caldera.framework.outside.CallError` naming the URL, never a traceback.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from caldera.framework.outside import MAX_BODY, CallError, Unreachable

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpCaller"]


class HttpCaller:
    """A :class:`~caldera.framework.outside.Caller` over one pooled ``httpx.Client``."""

    def __init__(self) -> None:
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self.calls = 0
        """Calls made (answered or not), for benchmarks and tests."""

    def _get(self) -> httpx.Client:
        import httpx  # only a policy with an extender pays for the import

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    headers={"Content-Type": "application/json"},
                    limits=httpx.Limits(max_keepalive_connections=8),
                )
            return self._client

    def post(self, url: str, body: bytes, timeout: float) -> bytes:
        import httpx

        client = self._get()
        self.calls += 1
        verb = url.rsplit("/", 1)[-1]
        try:
            with client.stream("POST", url, content=body, timeout=timeout) as resp:
                if resp.status_code != 200:
                    raise CallError(
                        f"failed {verb} with extender at URL {url}, code {resp.status_code}"
                    )
                chunks: list[bytes] = []
                size = 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > MAX_BODY:
                        raise CallError(
                            f"POST {url}: the answer is larger than {MAX_BODY >> 20} MiB"
                        )
                    chunks.append(chunk)
                return b"".join(chunks)
        except httpx.TimeoutException:
            raise Unreachable(f"POST {url}: no answer within {_seconds(timeout)}") from None
        except httpx.UnsupportedProtocol:
            raise Unreachable(f"POST {url}: not an http:// or https:// URL") from None
        except httpx.TransportError as exc:
            raise Unreachable(f"POST {url}: {type(exc).__name__}: {exc}") from None
        except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
            raise CallError(f"POST {url}: {type(exc).__name__}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def _seconds(timeout: float) -> str:
    return f"{timeout * 1000:g}ms" if timeout < 1 else f"{timeout:g}s"
