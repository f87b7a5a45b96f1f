"""The PromQL of the alert rules and the Grafana dashboard, and the metric names it reads.

Names are found by reading the query, not by matching known names, so a misspelled one is seen.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest
import yaml
from prometheus_client import Metric

from tests.support.paths import ROOT

RULES: Final = ROOT / "charts" / "nicguard" / "files" / "prometheus-rules.yaml"
DASHBOARD: Final = ROOT / "charts" / "nicguard" / "files" / "grafana-dashboard.json"

# Made by Prometheus for every target it scrapes, never by nicguard.
PROMETHEUS_SERIES: Final = frozenset({"up"})

_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_COMMENT = re.compile(r"#[^\n]*")
# Grafana's variables: $name, ${name}, ${name:format}, [[name]].
_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_MODIFIER = re.compile(r"\boffset\s+-?\w+|@\s*(?:start\(\)|end\(\)|[\d.]+)")
# Not preceded by a word character, a dot or a colon: skips the exponent of 1e3 and 0x1f's x.
_IDENTIFIER = re.compile(r"(?<![\w.:])[A-Za-z_:][\w:]*")
_KEYWORDS: Final = frozenset(
    {"and", "or", "unless", "bool", "group_left", "group_right", "offset", "inf", "nan"}
)
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.*),\s*[\w.]+\s*\)\s*$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Query:
    where: str
    expr: str


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: no functions, keywords, labels or values."""
    text = _STRING.sub(" ", expr)
    for pattern in (_COMMENT, _VARIABLE, _MATCHERS, _RANGE, _LABEL_LIST, _MODIFIER):
        text = pattern.sub(" ", text)
    names = set()
    for found in _IDENTIFIER.finditer(text):
        name = found.group()
        if name.lower() in _KEYWORDS or text[found.end() :].lstrip().startswith("("):
            continue  # an operator, or a function or aggregation being called
        names.add(name)
    return names


def series_names(families: Iterable[Metric]) -> set[str]:
    """The names of the series Prometheus stores for these families, from their types: a family
    registered without a sample yet (a labelled counter before its first increment) counts."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "info": ("_info",),
    }
    return {
        family.name + suffix for family in families for suffix in suffixes.get(family.type, ("",))
    }


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _panels(panels: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", ()))  # a collapsed row holds its panels


def panel_queries() -> list[Query]:
    return [
        Query(f"panel {panel['title']!r} {target['refId']}", target["expr"])
        for panel in _panels(dashboard()["panels"])
        for target in panel.get("targets", ())
    ]


def variable_queries() -> list[Query]:
    """The series selectors of the dashboard's query variables (label_values(selector, label))."""
    found = []
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, dict) else query
        match = _LABEL_VALUES.match(text)
        assert match, f"variable {variable['name']}: not label_values(selector, label): {text}"
        found.append(Query(f"variable {variable['name']!r}", match.group(1)))
    return found


def all_queries() -> list[Query]:
    rule_queries = [Query(f"rule {r.get('alert') or r['record']}", r["expr"]) for r in rules()]
    return rule_queries + panel_queries() + variable_queries()


def promtool() -> str:
    """promtool on PATH; the test fails (never skips) without it."""
    found = shutil.which("promtool")
    if found is None:
        pytest.fail(
            "promtool is not on PATH: `make promtool` installs it (Debian package prometheus)"
        )
    return found
