"""Fixtures for the HTTP tests: the example cluster state and sample AdmissionReviews."""

from __future__ import annotations

import copy
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.documents import load_yaml
from app.domain.cluster import CacheStatus, ClusterSnapshot, ClusterView, ObjectName, snapshot_of
from app.domain.policy import Policy
from app.files.state import load_objects
from app.logs import JsonFormatter
from app.metrics import Metrics
from app.web.admission import create_admission_app
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"
RECIPE = ObjectName("nicguard-system", "nicguard-recipe")


@pytest.fixture(scope="session")
def example_state() -> ClusterSnapshot:
    objects = (o.obj for o in load_objects([EXAMPLES / "cluster"]))
    return snapshot_of(objects, recipe_name=RECIPE, load_yaml=load_yaml)


def sample_review(name: str) -> dict[str, Any]:
    """A fresh copy of ``examples/reviews/<name>.json``."""
    loaded: dict[str, Any] = json.loads((EXAMPLES / "reviews" / f"{name}.json").read_text())
    return copy.deepcopy(loaded)


def make_client(view: ClusterView, policy: Policy | None = None) -> tuple[TestClient, Metrics]:
    metrics = Metrics(lambda: [CacheStatus(name="files", synced=True)])
    app = create_admission_app(view=view, policy=policy or Policy(), metrics=metrics, recipe=RECIPE)
    return TestClient(app), metrics


@pytest.fixture
def client(example_state: ClusterSnapshot) -> TestClient:
    return make_client(example_state)[0]


@pytest.fixture
def decision_lines() -> Iterator[io.StringIO]:
    """The decision log's lines as JSON, as configure_logging puts a handler on the root."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    decisions = logging.getLogger("nicguard.decisions")
    level = decisions.level
    decisions.addHandler(handler)
    decisions.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        decisions.removeHandler(handler)
        decisions.setLevel(level)
