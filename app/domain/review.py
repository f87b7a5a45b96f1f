"""One admission request as the rules see it: its operation, the object and what the adapter
parsed from it (the recipe, a runtime snapshot)."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from app.domain.fields import JsonMap
from app.domain.kinds import Role
from app.domain.recipe import Recipe
from app.domain.runtime_snapshot import RuntimeSnapshot
from app.domain.value_type import value_type


class Operation(StrEnum):
    """AdmissionReview operations."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


UPDATE: Final = Operation.UPDATE  # read per review, as TRAIN_JOB in app/domain/kinds.py
WRITES: Final = frozenset({Operation.CREATE, UPDATE})
"""The operations that write an object: the review carries it (``request.object``)."""


@value_type(kw_only=True)
class Review:
    """The parts of an admission request the rules need.

    ``kind`` is None for objects nicguard does not judge; ``obj`` is required for CREATE/UPDATE.
    ``name`` and ``username`` are the request's; ``written_recipe`` is the recipe ConfigMap of a
    CREATE/UPDATE of it and ``old_recipe`` the one an UPDATE replaces; ``snapshot`` and
    ``old_snapshot`` the copies a runtime snapshot ConfigMap holds; all as parsed by the adapter
    that decodes YAML.
    """

    operation: Operation
    kind: Role | None
    namespace: str = ""
    obj: JsonMap | None = None
    old_obj: JsonMap | None = None
    subresource: str = ""
    name: str = ""
    username: str = ""
    written_recipe: Recipe | None = None
    old_recipe: Recipe | None = None
    snapshot: RuntimeSnapshot | None = None
    old_snapshot: RuntimeSnapshot | None = None
