"""Kubernetes API errors as the apiserver reports them.

Every failure the emulator produces — from the store, the request parser or an injected fault —
is an :class:`ApiError`, rendered as a ``kind: Status`` body with the same ``reason`` and ``code``
a real apiserver would send, because kopf and kubernetes-asyncio branch on exactly those fields
(e.g. kopf's watcher relists on an ERROR event with ``code: 410``).
"""

from __future__ import annotations

from typing import Any

JsonDict = dict[str, Any]

# The ``reason`` a real apiserver puts next to each HTTP status code (metav1.StatusReason).
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """A failed API call: carries everything needed to render a ``Status`` object."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: JsonDict | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> JsonDict:
        """The ``Status`` body an apiserver sends for this error."""
        body: JsonDict = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(resource: str, name: str | None, group: str = "") -> JsonDict:
    details: JsonDict = {"kind": resource}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(404, f'{qualified} "{name}" not found', details=_details(resource, name, group))


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409,
        f'{qualified} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(resource, name, group),
    )


def conflict(resource: str, name: str, group: str = "", why: str | None = None) -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    why = why or (
        "the object has been modified; please apply your changes to the latest version "
        "and try again"
    )
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        reason="Conflict",
        details=_details(resource, name, group),
    )


def invalid(kind: str, name: str, causes: str) -> ApiError:
    return ApiError(422, f'{kind} "{name}" is invalid: {causes}', reason="Invalid")


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, reason="BadRequest")


def gone(message: str) -> ApiError:
    return ApiError(410, message, reason="Expired")


def success(code: int = 200, details: JsonDict | None = None) -> JsonDict:
    """The ``Status`` body of a successful call that returns no object (e.g. pods/binding)."""
    body: JsonDict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details:
        body["details"] = details
    return body
