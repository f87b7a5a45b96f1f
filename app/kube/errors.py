"""What the API server answered: a raw JSON body, or a failure's HTTP status and one-line account.

Every call made with ``_preload_content=False`` is read here, and every module that handles an
``ApiException`` or a transport failure asks this one for the status and the words.
"""

from __future__ import annotations

import json
from typing import Final

import urllib3
from kubernetes.client import ApiException

from app.domain.fields import JsonMap, as_map, str_at

BAD_REQUEST: Final = 400
UNAUTHORIZED: Final = 401
FORBIDDEN: Final = 403
NOT_FOUND: Final = 404
CONFLICT: Final = 409
GONE: Final = 410
INVALID: Final = 422
TIMEOUT: Final = (5.0, 10.0)  # connect, read: seconds, for one read or write of an object
# Raised when no HTTP answer came (refused, reset, timed out); HTTP errors are ApiException.
TRANSPORT_ERRORS: Final = (urllib3.exceptions.HTTPError, OSError)
_LINE: Final = 300


def status_of(error: BaseException) -> int | None:
    """The HTTP status of an ``ApiException``; None for anything else."""
    status = error.status if isinstance(error, ApiException) else None
    return status if isinstance(status, int) else None


def watch_error(event: JsonMap) -> ApiException:
    """A watch ERROR event (a Status object) as the exception a failed request raises."""
    code = event.get("code")
    reason = f"{str_at(event, 'reason')}: {str_at(event, 'message')}"
    return ApiException(status=code if isinstance(code, int) else 500, reason=reason)


def summary(error: BaseException) -> str:
    """``HTTP <status> <reason>`` for an ``ApiException``, else ``<type>: <text>``."""
    if isinstance(error, ApiException):
        return f"HTTP {error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"


def describe(error: BaseException) -> str:
    """One line for the log and /readyz: the apiserver's own message when it sent one."""
    if isinstance(error, ApiException):
        try:
            message = str_at(json.loads(error.body or ""), "message")
        except ValueError:
            message = None
        prefix = "forbidden (RBAC)" if error.status == FORBIDDEN else f"HTTP {error.status}"
        return f"{prefix}: {message or error.reason}"[:_LINE]
    return summary(error)[:_LINE]


def raw_response(response: object) -> urllib3.BaseHTTPResponse:
    """The response of a call made with ``_preload_content=False``; TypeError otherwise."""
    if not isinstance(response, urllib3.BaseHTTPResponse):
        raise TypeError(f"expected a raw HTTP response, got {type(response).__name__}")
    return response


def read_body(response: object) -> object:
    """The decoded JSON of a raw response, its connection released; ValueError if not JSON."""
    raw = raw_response(response)
    try:
        return json.loads(raw.data)
    finally:
        raw.release_conn()


def read_json(response: object) -> JsonMap:
    """The JSON object of a raw response; ValueError when the body is anything else."""
    body = as_map(read_body(response))
    if body is None:
        raise ValueError("the API server answered something other than a JSON object")
    return body
