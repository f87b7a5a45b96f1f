"""The Kubernetes minor the tier runs on (``served``: ``/version`` and discovery), as
``make compat`` chooses it (docs/compatibility.md): the binaries it was given, and nicguard ready
on it whether or not it serves ``resource.k8s.io/v1``."""

from __future__ import annotations

import json
import os

import pytest

from tests.harness.controlplane import DRA_V1_MINOR, Served
from tests.harness.stack import Stack

pytestmark = pytest.mark.e2e


def test_the_apiserver_is_the_minor_the_tier_was_given(stack: Stack, served: Served) -> None:
    assert served.minor == stack.plane.binary_minor(), served
    wanted = os.environ.get("NICGUARD_K8S_VERSION")
    if wanted:  # set by make compat; the binaries then come from its cache
        assert served.version == wanted, served


def test_nicguard_is_ready_and_serves_claim_templates_only_where_v1_is(
    stack: Stack, served: Served
) -> None:
    """From 1.34 on the apiserver serves ``resource.k8s.io/v1``; before, none of the group
    (its beta versions are off by default). nicguard is ready either way; its template cache is
    synced, and served only where v1 is."""
    assert served.dra_v1 == (served.minor >= DRA_V1_MINOR), served
    status, body = stack.nicguard.probe("/readyz")
    assert status == 200, body
    (cache,) = (c for c in json.loads(body)["caches"] if c["name"] == "resourceclaimtemplates")
    assert (cache["synced"], cache["served"]) == (True, served.dra_v1), cache
