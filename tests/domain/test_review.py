"""One admission request as the rules see it (app.domain.review): the AdmissionReview operations
as the API spells them, and a Review's defaults."""

from __future__ import annotations

from dataclasses import fields

import pytest

from app.documents import load_all_yaml
from app.domain.kinds import Kind, Protected
from app.domain.review import Operation, Review
from tests.support.paths import ROOT

DEFAULTS = {
    "namespace": "",
    "obj": None,
    "old_obj": None,
    "subresource": "",
    "name": "",
    "username": "",
    "written_recipe": None,
    "old_recipe": None,
    "snapshot": None,
    "old_snapshot": None,
}


@pytest.mark.parametrize("value", ["CREATE", "UPDATE", "DELETE", "CONNECT"])
def test_each_admission_operation_is_an_operation_spelled_as_the_api_spells_it(
    value: str,
) -> None:
    operation = Operation(value)
    assert (operation.value, str(operation), f"{operation}") == (value, value, value)
    assert operation == value


@pytest.mark.parametrize("value", ["create", "Create", "PATCH", "", " CREATE"])
def test_anything_else_is_not_an_operation(value: str) -> None:
    with pytest.raises(ValueError, match="is not a valid Operation"):
        Operation(value)


def test_every_operation_the_shipped_webhooks_register_is_an_operation() -> None:
    (configuration,) = (
        document
        for document in load_all_yaml((ROOT / "manifests/base/webhook.yaml").read_text())
        if isinstance(document, dict) and document["kind"] == "ValidatingWebhookConfiguration"
    )
    registered = {
        operation
        for hook in configuration["webhooks"]
        for rule in hook["rules"]
        for operation in rule["operations"]
    }
    assert registered == {"CREATE", "UPDATE", "DELETE"}
    assert registered <= set(Operation)


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param(Kind.TRAIN_JOB, id="trainer-kind"),
        pytest.param(Protected.RECIPE, id="protected"),
        pytest.param(None, id="not-judged"),
    ],
)
def test_a_review_needs_only_its_operation_and_kind(kind: Kind | Protected | None) -> None:
    found = Review(operation=Operation.DELETE, kind=kind)
    values = {field.name: getattr(found, field.name) for field in fields(found)}
    assert values == {"operation": Operation.DELETE, "kind": kind, **DEFAULTS}


def test_a_review_takes_keywords_only() -> None:
    with pytest.raises(TypeError, match="positional argument"):
        Review(Operation.CREATE, Kind.TRAIN_JOB)  # type: ignore[call-arg]


def test_a_review_keeps_what_it_was_built_with() -> None:
    # Assigning to a field is refused by mypy (tests/domain/test_value_type.py).
    found = Review(operation=Operation.CREATE, kind=Kind.TRAIN_JOB, namespace="team")
    values = {field.name: getattr(found, field.name) for field in fields(found)}
    assert values == {
        "operation": Operation.CREATE,
        "kind": Kind.TRAIN_JOB,
        **DEFAULTS,
        "namespace": "team",
    }
