"""Violation codes, rendering and the escaping of user-supplied names (app.domain.verdict)."""

from __future__ import annotations

import pytest

from app.domain.verdict import Code, Violation, shown


def test_the_violation_codes_are_exactly_the_spec_list() -> None:
    assert [code.value for code in Code] == [
        "InterfacesAnnotationMissing",
        "InterfacesAnnotationMalformed",
        "PrimaryInterfaceInvalid",
        "DefaultInterfaceInvalid",
        "InterfaceNameInvalid",
        "InterfaceDuplicated",
        "NetworkDuplicated",
        "NetworkReserved",
        "NodeJobMissing",
        "MappingDivergesFromRecipe",
        "MappingDivergesFromProfile",
        "DeviceModeMismatch",
        "NetworkNotFound",
        "NetworkNotReady",
        "NetworkAPINotServed",
        "RecipeUnavailable",
        "RecipeInvalid",
        "NetworkInUse",
        "ParamSetInUse",
        "RecipeInUse",
        "PatchDirectiveUnsupported",
        "RuntimeSnapshotInvalid",
        "NetworkMisplaced",
        "RdmaClaimMissing",
        "RdmaClaimMismatch",
        "ResourceClaimTemplateNotFound",
        "WiringModeConflict",
        "ClusterStateUnavailable",
    ]


def test_a_violation_renders_as_bracketed_code_then_message() -> None:
    violation = Violation(code=Code.NETWORK_NOT_FOUND, field="spec", message="no Network x")
    assert violation.render() == "[NetworkNotFound] no Network x"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("gpu-nic-0", "gpu-nic-0", id="plain-name-unchanged"),
        pytest.param("", "", id="empty"),
        pytest.param("x" * 64, "x" * 64, id="64-chars-kept"),
        pytest.param("x" * 65, "x" * 63 + "…", id="65-chars-cut-with-ellipsis"),
        pytest.param("eth1\n", "eth1\\n", id="newline-escaped"),
        pytest.param("a\x1b[31mb", "a\\x1b[31mb", id="terminal-escape-escaped"),
        pytest.param("\t" + "y" * 70, "\\t" + "y" * 62 + "\\u2026", id="cut-then-escaped"),
    ],
)
def test_shown_escapes_unprintable_text_and_cuts_long_names(value: str, expected: str) -> None:
    assert shown(value) == expected
