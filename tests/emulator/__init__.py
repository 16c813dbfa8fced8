"""An in-process Kubernetes API emulator for the operator's integration tests.

Real clients (kubernetes-asyncio, kopf) talk to it over HTTP on 127.0.0.1; tests reach the same
state directly and inject faults. See ``server.Emulator`` for the entry point and
``handles`` for the fixture-facing API that also works against a real cluster.
"""

from emulator.discovery import DEFAULT_RESOURCES, ResourceRegistry, ResourceType
from emulator.errors import ApiError
from emulator.faults import FaultRule, RequestRecord
from emulator.server import Emulator

__all__ = [
    "DEFAULT_RESOURCES",
    "ApiError",
    "Emulator",
    "FaultRule",
    "RequestRecord",
    "ResourceRegistry",
    "ResourceType",
]
