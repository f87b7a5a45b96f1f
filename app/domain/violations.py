"""Violation codes (SPEC section 3) and the violation value.

Codes are an API: they are pinned by a test and never renamed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Code(StrEnum):
    """Stable CamelCase rejection codes."""

    INTERFACES_ANNOTATION_MISSING = "InterfacesAnnotationMissing"
    INTERFACES_ANNOTATION_MALFORMED = "InterfacesAnnotationMalformed"
    PRIMARY_INTERFACE_INVALID = "PrimaryInterfaceInvalid"
    DEFAULT_INTERFACE_INVALID = "DefaultInterfaceInvalid"
    INTERFACE_NAME_INVALID = "InterfaceNameInvalid"
    INTERFACE_DUPLICATED = "InterfaceDuplicated"
    NETWORK_DUPLICATED = "NetworkDuplicated"
    NETWORK_RESERVED = "NetworkReserved"
    NODE_JOB_MISSING = "NodeJobMissing"
    MAPPING_DIVERGES_FROM_RECIPE = "MappingDivergesFromRecipe"
    NETWORK_NOT_FOUND = "NetworkNotFound"
    NETWORK_NOT_READY = "NetworkNotReady"
    NETWORK_API_NOT_SERVED = "NetworkAPINotServed"
    RECIPE_UNAVAILABLE = "RecipeUnavailable"
    RECIPE_INVALID = "RecipeInvalid"
    CLUSTER_STATE_UNAVAILABLE = "ClusterStateUnavailable"


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """One reason to reject: a stable code, the JSON path of the offending field, and why."""

    code: Code
    field: str
    message: str

    def render(self) -> str:
        return f"[{self.code}] {self.message}"


_SHOWN_MAX = 64


def shown(value: str) -> str:
    """A user-supplied name as it may appear in a message: escaped, and cut to 64 characters.

    Denials name interfaces and networks but never echo more of the object than that.
    """
    cut = value if len(value) <= _SHOWN_MAX else value[: _SHOWN_MAX - 1] + "…"
    if cut.isprintable():
        return cut
    return cut.encode("unicode_escape").decode("ascii")
