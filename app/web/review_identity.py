"""What identifies a review refused unjudged (uid, kind, namespace, name, user), read without
decoding its objects: the line that logs the refusal must not cost what judging would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import orjson

# The apiserver writes a review's request fields (Go's AdmissionRequest, in field order) before
# its object; they are a few hundred bytes, a long userInfo a few KiB.
_HEAD_MAX_BYTES: Final = 64 * 1024
_OBJECT: Final = b',"object":'


@dataclass(frozen=True, slots=True)
class ReviewIdentity:
    """The request fields of a review, each "" where it does not say."""

    uid: str = ""
    group: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    username: str = ""


UNKNOWN: Final = ReviewIdentity()


def identity_of(envelope: object) -> ReviewIdentity:
    """The identity of a decoded AdmissionReview (or of its head); UNKNOWN parts for what is
    not there."""
    request = _map(_map(envelope).get("request"))
    kind = _map(request.get("kind"))
    return ReviewIdentity(
        uid=_text(request.get("uid")),
        group=_text(kind.get("group")),
        kind=_text(kind.get("kind")),
        namespace=_text(request.get("namespace")),
        name=_text(request.get("name")),
        username=_text(_map(request.get("userInfo")).get("username")),
    )


def identity_in(body: bytes) -> ReviewIdentity:
    """The identity of an undecoded review body: its text before ``"object"``, closed as the
    review and its request would be, decoded exactly. A body written otherwise (not by an
    apiserver) gives UNKNOWN."""
    end = body.find(_OBJECT, 0, _HEAD_MAX_BYTES)
    if end < 0:
        return UNKNOWN
    try:
        head = orjson.loads(body[:end] + b"}}")
    except orjson.JSONDecodeError:
        return UNKNOWN
    return identity_of(head)


def _map(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
