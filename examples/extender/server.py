"""An example extender for Caldera (and Volcano): a small HTTP server that answers every verb
of the ``extender`` plugin, to start your own from. Only the Python standard library.

Run it:  python examples/extender/server.py --port 8713

What it decides (each rule reads something you can set on your own objects):

- predicate: a node labelled ``example.caldera.dev/blocked: "true"`` takes no pods;
- prioritize: nodes with more idle CPU score higher (one point per idle core);
- preemptable / reclaimable: a pod annotated ``example.caldera.dev/protected: "true"`` is never
  a victim; every other candidate is;
- jobEnqueueable: a PodGroup annotated ``example.caldera.dev/hold: "true"`` stays Pending;
- queueOverused: a Queue annotated ``example.caldera.dev/overused: "true"`` is overused;
- jobReady: every job is ready (gang decides);
- onSessionOpen / onSessionClose / allocateFunc / deallocateFunc: counted.

``GET /calls`` answers the calls counted per verb and the pods told as allocated, which is how
the tests check what the scheduler asked. ``--delay-ms`` makes every answer wait (to measure what
a slow extender costs); ``--fail VERB`` answers HTTP 500 to that verb.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BLOCKED = "example.caldera.dev/blocked"
PROTECTED = "example.caldera.dev/protected"
HOLD = "example.caldera.dev/hold"
OVERUSED = "example.caldera.dev/overused"
PERMIT, ABSTAIN, REJECT = 1, 0, -1


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    """An object's ``metadata`` (a Pod's inside a TaskInfo, a Node's inside a NodeInfo)."""
    return (obj or {}).get("metadata") or {}


def _flag(mapping: dict[str, str] | None, key: str) -> bool:
    return (mapping or {}).get(key) == "true"


class Extender:
    """The decisions, one method per verb: a request body in, a response body out."""

    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        self.calls: Counter[str] = Counter()
        self.failing = set(failing)
        """Verbs answered with HTTP 500 (to see what ``extender.ignorable`` does)."""
        self.allocated: list[str] = []
        self.lock = threading.Lock()

    def predicate(self, req: dict[str, Any]) -> dict[str, Any]:
        node = req["node"]
        if _flag(_meta(node.get("Node")).get("labels"), BLOCKED):
            # code 3, UnschedulableAndUnresolvable: evicting pods would not change the answer,
            # so preemption leaves the node alone (2, Unschedulable, would let it evict there)
            return {"status": f"node {node['Name']} is blocked by the example extender", "code": 3}
        return {"status": "", "code": 0}

    def prioritize(self, req: dict[str, Any]) -> dict[str, Any]:
        scores = {n["Name"]: n["Idle"]["MilliCPU"] / 1000 for n in req["nodes"]}
        return {"nodeScore": scores, "errorMessage": ""}

    def preemptable(self, req: dict[str, Any]) -> dict[str, Any]:
        victims = [
            t
            for t in req["evictees"]
            if not _flag(_meta(t.get("Pod")).get("annotations"), PROTECTED)
        ]
        return {"status": PERMIT, "victims": victims}

    reclaimable = preemptable

    def jobEnqueueable(self, req: dict[str, Any]) -> dict[str, Any]:
        held = _flag(_meta(req["job"].get("PodGroup")).get("annotations"), HOLD)
        return {"status": REJECT if held else ABSTAIN}

    def queueOverused(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"overused": _flag(req["queue"].get("Annotations"), OVERUSED)}

    def jobReady(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"status": True}

    def allocateFunc(self, req: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.allocated.append(f"{req['task']['Namespace']}/{req['task']['Name']}")
        return {"errorMessage": ""}

    def deallocateFunc(self, req: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            name = f"{req['task']['Namespace']}/{req['task']['Name']}"
            if name in self.allocated:
                self.allocated.remove(name)
        return {"errorMessage": ""}

    def onSessionOpen(self, req: dict[str, Any]) -> dict[str, Any]:
        return {}

    def onSessionClose(self, req: dict[str, Any]) -> dict[str, Any]:
        return {}


def make_server(
    port: int = 0,
    *,
    delay: float = 0.0,
    fail: frozenset[str] = frozenset(),
    host: str = "127.0.0.1",
) -> tuple[ThreadingHTTPServer, Extender]:
    """A server on ``host:port`` (0: any free port) answering with a new :class:`Extender`."""
    ext = Extender(fail)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the scheduler reuses its connection
        disable_nagle_algorithm = True  # answer at once, not after the peer's delayed ACK

        def do_POST(self) -> None:
            verb = self.path.strip("/")
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with ext.lock:
                ext.calls[verb] += 1
            decide = getattr(ext, verb, None) if not verb.startswith("_") else None
            if decide is None or verb in ext.failing:
                self._answer(404 if decide is None else 500, {"error": f"no verb {verb}"})
                return
            if delay:
                time.sleep(delay)
            self._answer(200, decide(json.loads(raw or b"{}")))

        def do_GET(self) -> None:
            with ext.lock:
                state = {"calls": dict(ext.calls), "allocated": list(ext.allocated)}
            self._answer(200 if self.path == "/calls" else 404, state)

        def _answer(self, code: int, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)  # the scheduler may have given up waiting

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per call would drown the scheduler's own logs

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server, ext


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8713)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="wait before each answer")
    parser.add_argument("--fail", action="append", default=[], help="answer 500 to this verb")
    args = parser.parse_args()
    server, _ = make_server(
        args.port, delay=args.delay_ms / 1000, fail=frozenset(args.fail), host=args.host
    )
    sys.stderr.write(f"example extender on http://{args.host}:{server.server_address[1]}\n")
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
