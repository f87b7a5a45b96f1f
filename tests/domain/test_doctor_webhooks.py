"""The webhook entries against the shipped ones, and the doors' dry-runs
(app.domain.doctor_webhooks)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final

import pytest

from app.domain.doctor import Mark
from app.domain.doctor_webhooks import (
    Bundle,
    DryRun,
    doors_line,
    entry_lines,
)

SHIPPED: Final[list[dict[str, Any]]] = [
    {
        "name": "one.nicguard.dev",
        "failurePolicy": "Fail",
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["configmaps"],
                "scope": "Namespaced",
            }
        ],
        "matchConditions": [
            {"name": "the-recipe", "expression": "object.metadata.name ==\n 'nicguard-recipe'"},
            {"name": "other", "expression": "true"},
        ],
    },
    {"name": "two.nicguard.dev", "failurePolicy": "Fail", "rules": []},
]
RENAMED: Final = {"'nicguard-recipe'": "'moved'"}
GOOD: Final = {"one.nicguard.dev": Bundle(Mark.OK, "caBundle fine")}


def live(*edits: Callable[[list[dict[str, Any]]], None]) -> dict[str, Any]:
    """The shipped entries as the API server returns them (recipe moved, defaults filled in,
    lists reordered), changed by ``edits``."""
    entries = copy.deepcopy(SHIPPED)
    entries[0]["matchConditions"][0]["expression"] = "object.metadata.name == 'moved'"
    entries[0]["rules"][0]["operations"] = ["UPDATE", "CREATE"]
    entries[0]["clientConfig"] = {"caBundle": "x"}
    del entries[1]["failurePolicy"]  # the API server's default is Fail
    for edit in edits:
        edit(entries)
    return {"webhooks": [*entries, "not an entry"]}


def test_the_shipped_entries_present_are_ok_with_their_bundle() -> None:
    lines = entry_lines(live(), SHIPPED, GOOD, RENAMED)
    assert [(line.mark, line.check) for line in lines] == [
        (Mark.OK, "webhook one.nicguard.dev"),
        (Mark.WARN, "webhook two.nicguard.dev"),
    ]
    assert lines[0].found == (
        "failurePolicy Fail, 1 rule, 2 matchConditions as shipped; caBundle fine"
    )
    assert lines[1].found.endswith("0 rules, 0 matchConditions as shipped; caBundle not examined")
    assert lines[1].fix


def test_no_configuration_is_one_failure() -> None:
    (line,) = entry_lines(None, SHIPPED, {}, RENAMED)
    assert (line.mark, line.check) == (Mark.FAIL, "webhook configuration")
    assert "kubectl apply -k manifests/" in line.fix


def _drop_second(entries: list[dict[str, Any]]) -> None:
    del entries[1]


def _ignore(entries: list[dict[str, Any]]) -> None:
    entries[0]["failurePolicy"] = "Ignore"


def _rules(entries: list[dict[str, Any]]) -> None:
    entries[0]["rules"][0]["resources"] = ["configmaps", "secrets"]


def _conditions(entries: list[dict[str, Any]]) -> None:
    entries[0]["matchConditions"] = [
        {"name": "other", "expression": "false"},
        {"name": "added", "expression": "true"},
    ]


def _scope(entries: list[dict[str, Any]]) -> None:
    del entries[0]["rules"][0]["scope"]


@pytest.mark.parametrize(
    ("edit", "check", "found"),
    [
        pytest.param(
            _drop_second,
            "webhook two.nicguard.dev",
            "missing: what it guards is not judged",
            id="entry-deleted",
        ),
        pytest.param(
            _ignore,
            "webhook one.nicguard.dev",
            "failurePolicy Ignore, shipped Fail",
            id="fails-open",
        ),
        pytest.param(
            _rules, "webhook one.nicguard.dev", "rules differ from the shipped ones", id="rules"
        ),
        pytest.param(
            _scope, "webhook one.nicguard.dev", "rules differ from the shipped ones", id="scope"
        ),
        pytest.param(
            _conditions,
            "webhook one.nicguard.dev",
            "matchConditions missing: the-recipe; matchConditions changed: other; "
            "matchConditions not shipped: added",
            id="conditions",
        ),
    ],
)
def test_a_drifted_entry_fails_saying_what_differs(
    edit: Callable[[list[dict[str, Any]]], None], check: str, found: str
) -> None:
    lines = entry_lines(live(edit), SHIPPED, GOOD, RENAMED)
    (line,) = (line for line in lines if line.mark is Mark.FAIL)
    assert (line.check, line.found) == (check, found)
    assert "re-apply the shipped configuration" in line.fix


def test_a_bundle_that_does_not_verify_fails_with_the_fix() -> None:
    bundles = {"one.nicguard.dev": Bundle(Mark.FAIL, "caBundle does not verify")}
    line = entry_lines(live(), SHIPPED, bundles, RENAMED)[0]
    assert line.mark is Mark.FAIL
    assert line.found.endswith("; caBundle does not verify")
    assert "caBundle" in line.fix


DOOR: Final = "pods.nicguard.dev"
REFUSED: Final = DryRun(
    403, f'admission webhook "{DOOR}" denied the request: Pod ns/p: [NetworkNotFound] eth1->x'
)
ADMITTED: Final = DryRun(201)


@pytest.mark.parametrize(
    ("drifted", "good", "mark", "found", "fix"),
    [
        pytest.param(
            REFUSED, ADMITTED, Mark.OK, "a drifted Pod is refused, a good one admitted", "", id="ok"
        ),
        pytest.param(
            DryRun(403, f'admission webhook "{DOOR}" denied the request: [NetworkAPINotServed]'),
            ADMITTED,
            Mark.OK,
            "a drifted Pod is refused, a good one admitted",
            "",
            id="no-network-api",
        ),
        pytest.param(
            REFUSED,
            DryRun(
                503, f'admission webhook "{DOOR}" denied the request: [ClusterStateUnavailable]'
            ),
            Mark.FAIL,
            "a good Pod is refused too: ",
            "make the apiserver reach nicguard",
            id="good-refused",
        ),
        pytest.param(
            DryRun(403, f'admission webhook "{DOOR}" denied the request: [NetworkReserved]'),
            ADMITTED,
            Mark.FAIL,
            "a drifted Pod is refused for: ",
            "something else",
            id="another-code",
        ),
        pytest.param(
            DryRun(201, warnings=("other", "[NetworkNotFound] eth1->x")),
            ADMITTED,
            Mark.FAIL,
            "a drifted Pod is admitted with a warning: [NetworkNotFound] eth1->x",
            "enforcement=deny",
            id="warn",
        ),
        pytest.param(
            ADMITTED,
            ADMITTED,
            Mark.FAIL,
            "a drifted Pod is admitted: nicguard was not called",
            "re-apply",
            id="not-called",
        ),
        pytest.param(
            DryRun(500, f'failed calling webhook "{DOOR}": x509: unknown authority'),
            DryRun(500, "same"),
            Mark.FAIL,
            "the dry-run of a drifted Pod failed: HTTP 500: failed calling webhook",
            "caBundle",
            id="unreachable",
        ),
        pytest.param(
            DryRun(403, 'pods "p" is forbidden: User "u" cannot create'),
            ADMITTED,
            Mark.FAIL,
            "the dry-run of a drifted Pod failed: HTTP 403: pods",
            "caBundle",
            id="forbidden",
        ),
    ],
)
def test_the_doors(drifted: DryRun, good: DryRun, mark: Mark, found: str, fix: str) -> None:
    line = doors_line(DOOR, drifted, good)
    assert (line.check, line.mark) == (f"doors enforce ({DOOR})", mark)
    assert line.found.startswith(found), line.found
    assert fix in line.fix
    assert bool(line.fix) is (mark is not Mark.OK)
