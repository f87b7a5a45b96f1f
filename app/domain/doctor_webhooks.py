"""``nicguard doctor``'s webhook checks: each shipped entry against the live configuration, and what
a server-side dry-run of a drifted and of a good object says about the doors enforcing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from app.domain.doctor import Line, Mark
from app.domain.fields import JsonMap, as_list, as_map, str_at

REAPPLY: Final = (
    "re-apply the shipped configuration (kubectl apply -k manifests/, or helm upgrade); "
    "docs/operations.md says when an entry may be off"
)
# The codes a wired Pod naming a Network that does not exist is refused with (docs/rules.md).
DRIFT_CODES: Final = ("NetworkNotFound", "NetworkAPINotServed")


BUNDLE_FIX: Final = (
    "let nicguard's certificate controller (or cert-manager's cainjector) patch the caBundle; "
    "docs/doctor.md"
)


@dataclass(frozen=True, slots=True)
class Bundle:
    """What is known of an entry's ``caBundle``: ✓ when it verifies the certificate nicguard
    serves (or the API server's own call is the proof), ✗ when it does not, ! when this machine
    cannot tell."""

    mark: Mark
    found: str


def entry_lines(
    live: JsonMap | None,
    shipped: Sequence[JsonMap],
    bundles: Mapping[str, Bundle],
    renamed: Mapping[str, str],
) -> list[Line]:
    """One line per shipped entry: present in ``live`` (the ValidatingWebhookConfiguration,
    None when absent) with the shipped ``failurePolicy``, rules and ``matchConditions``, and its
    ``caBundle`` as ``bundles`` (by entry name) found it. ``renamed`` maps text of the shipped
    expressions to what this installation's settings make of it (the recipe's name)."""
    if live is None:
        found = "no ValidatingWebhookConfiguration: nothing is judged"
        return [Line(Mark.FAIL, "webhook configuration", found, REAPPLY)]
    by_name = {str_at(e, "name"): e for e in _entries(live)}
    lines = []
    for expected in shipped:
        name = str_at(expected, "name") or ""
        check = f"webhook {name}"
        entry = by_name.get(name)
        if entry is None:
            lines.append(Line(Mark.FAIL, check, "missing: what it guards is not judged", REAPPLY))
            continue
        drift = _differences(entry, expected, renamed)
        if drift:
            lines.append(Line(Mark.FAIL, check, "; ".join(drift), REAPPLY))
            continue
        bundle = bundles.get(name, Bundle(Mark.WARN, "caBundle not examined"))
        fix = "" if bundle.mark is Mark.OK else BUNDLE_FIX
        lines.append(Line(bundle.mark, check, f"{_shape(entry)}; {bundle.found}", fix))
    return lines


def _entries(configuration: JsonMap) -> list[JsonMap]:
    return [e for raw in as_list(configuration.get("webhooks")) or () if (e := as_map(raw))]


def _shape(entry: JsonMap) -> str:
    rules = len(as_list(entry.get("rules")) or ())
    conditions = len(as_list(entry.get("matchConditions")) or ())
    policy = str_at(entry, "failurePolicy")
    return (
        f"failurePolicy {policy}, {_count(rules, 'rule')}, "
        f"{_count(conditions, 'matchCondition')} as shipped"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _differences(entry: JsonMap, expected: JsonMap, renamed: Mapping[str, str]) -> list[str]:
    found = []
    # The API server defaults failurePolicy to Fail.
    policy, wanted = str_at(entry, "failurePolicy") or "Fail", str_at(expected, "failurePolicy")
    if policy != wanted:
        found.append(f"failurePolicy {policy}, shipped {wanted}")
    if _rules(entry) != _rules(expected):
        found.append("rules differ from the shipped ones")
    live, shipped = _conditions(entry, {}), _conditions(expected, renamed)
    missing = sorted(shipped.keys() - live.keys())
    changed = sorted(k for k in shipped.keys() & live.keys() if shipped[k] != live[k])
    extra = sorted(live.keys() - shipped.keys())
    for what, names in (("missing", missing), ("changed", changed), ("not shipped", extra)):
        if names:
            found.append(f"matchConditions {what}: {', '.join(names)}")
    return found


def _rules(entry: JsonMap) -> list[tuple[object, ...]]:
    """Each rule with its lists as sets and ``scope`` defaulted as the API server does."""
    rules = []
    for raw in as_list(entry.get("rules")) or ():
        rule = as_map(raw) or {}
        lists = (
            frozenset(str(v) for v in as_list(rule.get(key)) or ())
            for key in ("apiGroups", "apiVersions", "operations", "resources")
        )
        rules.append((*lists, str_at(rule, "scope") or "*"))
    return sorted(rules, key=repr)


def _conditions(entry: JsonMap, renamed: Mapping[str, str]) -> dict[str, str]:
    """Expressions by name, whitespace collapsed (YAML folding differs between renderers)."""
    conditions = {}
    for raw in as_list(entry.get("matchConditions")) or ():
        condition = as_map(raw) or {}
        expression = " ".join((str_at(condition, "expression") or "").split())
        for shipped, installed in renamed.items():
            expression = expression.replace(shipped, installed)
        conditions[str_at(condition, "name") or ""] = expression
    return conditions


@dataclass(frozen=True, slots=True)
class DryRun:
    """A server-side dry-run create: ``status`` 2xx when admitted (``warnings`` as the API server
    sent them), else the error status and the API server's ``message``."""

    status: int
    message: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def admitted(self) -> bool:
        return 200 <= self.status <= 299


ENFORCE: Final = (
    "set enforcement=deny and workloads=deny on the Deployment (NICGUARD_ENFORCEMENT, "
    "NICGUARD_WORKLOADS); docs/rollout.md"
)
OTHER: Final = "read the message: the probe Pod is refused for something else (docs/doctor.md)"
UNREACHABLE: Final = (
    "make the apiserver reach nicguard: the Deployment ready, the Service's endpoints, the "
    "caBundle (docs/operations.md)"
)


def doors_line(door: str, drifted: DryRun, good: DryRun) -> Line:
    """Whether ``door`` (a webhook entry) enforces: the drifted object refused by it with one of
    ``DRIFT_CODES``, the good one admitted."""
    check = f"doors enforce ({door})"
    denied = f'admission webhook "{door}" denied the request'
    if not drifted.admitted and denied in drifted.message:
        if not any(f"[{code}]" in drifted.message for code in DRIFT_CODES):
            return Line(Mark.FAIL, check, f"a drifted Pod is refused for: {drifted.message}", OTHER)
        if good.admitted:
            return Line(Mark.OK, check, "a drifted Pod is refused, a good one admitted")
        found = f"a good Pod is refused too: {good.message}"
        return Line(Mark.FAIL, check, found, UNREACHABLE)
    if drifted.admitted:
        waived = [w for w in drifted.warnings if any(f"[{c}]" in w for c in DRIFT_CODES)]
        if waived:
            found = f"a drifted Pod is admitted with a warning: {waived[0]}"
            return Line(Mark.FAIL, check, found, ENFORCE)
        return Line(Mark.FAIL, check, "a drifted Pod is admitted: nicguard was not called", REAPPLY)
    found = f"the dry-run of a drifted Pod failed: HTTP {drifted.status}: {drifted.message}"
    return Line(Mark.FAIL, check, found, UNREACHABLE)
