"""Tests for app.kube.errors: statuses, one-line accounts of failures, and raw JSON bodies."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client import ApiException

from app.kube.errors import (
    FORBIDDEN,
    GONE,
    NOT_FOUND,
    describe,
    read_body,
    read_json,
    status_of,
    summary,
    watch_error,
)


def raw(body: bytes) -> urllib3.HTTPResponse:
    return urllib3.HTTPResponse(body=body, status=200, preload_content=False)


def test_status_of_an_api_exception_only() -> None:
    assert status_of(ApiException(status=NOT_FOUND, reason="Not Found")) == 404
    assert status_of(ApiException(reason="no status")) is None
    assert status_of(OSError("refused")) is None


def test_summary_names_the_status_or_the_type() -> None:
    assert summary(ApiException(status=500, reason="Internal")) == "HTTP 500 Internal"
    assert summary(TimeoutError("read timed out")) == "TimeoutError: read timed out"


def test_describe_prefers_the_apiservers_message_and_names_rbac() -> None:
    denied = ApiException(status=FORBIDDEN, reason="Forbidden")
    denied.body = json.dumps({"kind": "Status", "message": "secrets is forbidden"})
    assert describe(denied) == "forbidden (RBAC): secrets is forbidden"
    conflict = ApiException(status=409, reason="Conflict")
    conflict.body = "not json"
    assert describe(conflict) == "HTTP 409: Conflict"
    assert describe(ConnectionResetError("reset")) == "ConnectionResetError: reset"
    assert len(describe(OSError("x" * 1000))) == 300


def test_a_watch_error_event_becomes_an_api_exception() -> None:
    error = watch_error({"code": GONE, "reason": "Expired", "message": "too old"})
    assert (status_of(error), error.reason) == (410, "Expired: too old")
    assert status_of(watch_error({"reason": "Odd"})) == 500


def test_read_json_decodes_a_raw_object_and_nothing_else() -> None:
    response = raw(b'{"kind": "Lease"}')
    assert read_json(response) == {"kind": "Lease"}
    assert read_body(raw(b"[1]")) == [1]
    with pytest.raises(ValueError, match="other than a JSON object"):
        read_json(raw(b"[1]"))
    with pytest.raises(json.JSONDecodeError):
        read_json(raw(b"<html>"))
    with pytest.raises(TypeError, match="expected a raw HTTP response, got dict"):
        read_json({"kind": "Lease"})
