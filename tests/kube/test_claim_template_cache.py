"""KubeClusterView's ResourceClaimTemplates: one more watch cache, slim, served or not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from immutables import Map
from kubernetes.client import ApiException

from app.domain.claims import ClaimRequest, ClaimTemplate
from app.domain.cluster import NO_CLAIM_TEMPLATES, ClaimTemplates, Unverifiable
from app.domain.drift import EVERYTHING, Change
from app.domain.fields import JsonMap
from app.kube.client import Listing, WatchEvent
from app.kube.cluster_view import KubeClusterView, Sources
from tests.builders import claim_template, exactly, first_available
from tests.kube.test_cluster_view import RECIPE, subscribed, synced_source
from tests.kube.test_watch_cache import FAST, Held, ScriptedSource, Stream, wait_for

ALL_RDMA = ClaimRequest("rdma", "mrdma.google.com", allocation_mode="All")


def listed(obj: JsonMap) -> JsonMap:
    """As a LIST of a built-in resource gives its items: without apiVersion and kind."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def with_version(obj: JsonMap, version: str) -> JsonMap:
    metadata = obj["metadata"]
    assert isinstance(metadata, dict)
    return {**obj, "metadata": {**metadata, "resourceVersion": version}}


def view_of(templates: ScriptedSource | None) -> KubeClusterView:
    sources = Sources(
        synced_source(),
        synced_source(),
        synced_source(),
        synced_source(),
        claim_templates=templates,
    )
    return KubeClusterView(sources, recipe_name=RECIPE, pacing=FAST)


@pytest.fixture
def started() -> Iterator[list[KubeClusterView]]:
    views: list[KubeClusterView] = []
    yield views
    for view in views:
        view.stop(timeout=30.0)  # bounds a hang only: stopping takes milliseconds
        assert not view.alive()


def start(views: list[KubeClusterView], templates: ScriptedSource | None) -> KubeClusterView:
    view = view_of(templates)
    views.append(view)
    view.start()
    return view


def test_templates_are_cached_slim_by_namespace_and_name(
    started: list[KubeClusterView],
) -> None:
    later = Held[Stream | Exception](
        [
            WatchEvent(
                "ADDED",
                with_version(
                    claim_template("one", exactly(count=8, mode=None), namespace="b"), "12"
                ),
            ),
            WatchEvent("DELETED", with_version(claim_template("default-rdma"), "13")),
        ]
    )
    listing = Listing(
        (
            listed(claim_template()),
            listed(claim_template("choice", first_available("mrdma.google.com", "x"))),
        ),
        "11",
    )
    view = start(started, ScriptedSource(lists=[listing], watches=[later]))
    assert view.wait_synced(5)
    assert view.claim_templates() == ClaimTemplates(
        by_key=Map(
            {
                ("team", "default-rdma"): ClaimTemplate("team", "default-rdma", (ALL_RDMA,)),
                ("team", "choice"): ClaimTemplate(
                    "team",
                    "choice",
                    (
                        ClaimRequest(
                            "rdma",
                            None,
                            first_available=True,
                            classes=("mrdma.google.com", "x"),
                        ),
                    ),
                ),
            }
        )
    )
    later.release.set()
    wait_for(lambda: ("b", "one") in getattr(view.claim_templates(), "by_key", {}))
    wait_for(lambda: len(getattr(view.claim_templates(), "by_key", {})) == 2)
    found = view.claim_templates()
    assert isinstance(found, ClaimTemplates)
    assert found.served
    assert found.get("b", "one") == ClaimTemplate(
        "b", "one", (ClaimRequest("rdma", "mrdma.google.com", count=8),)
    )
    assert found.get("team", "default-rdma") is None
    assert view.snapshot().claim_templates() == found


def test_a_cluster_without_resource_api_has_templates_none_served(
    started: list[KubeClusterView],
) -> None:
    view = start(started, ScriptedSource(lists=[ApiException(status=404)]))
    assert view.wait_synced(5)
    assert view.claim_templates() == ClaimTemplates(by_key=Map(), served=False)
    assert [(s.name, s.served) for s in view.status()][-1] == ("resourceclaimtemplates", False)


def test_templates_are_unverifiable_until_listed_and_when_forbidden(
    started: list[KubeClusterView],
) -> None:
    held = Held[Listing | Exception](ApiException(status=403))
    view = start(started, ScriptedSource(lists=[held]))
    wait_for(lambda: all(s.synced for s in view.status()[:4]))
    pending = Unverifiable("resourceclaimtemplates cache not synced: initial list pending")
    assert view.claim_templates() == pending
    assert view.snapshot().claim_templates() == pending
    held.release.set()
    wait_for(lambda: view.status()[-1].error is not None)
    assert view.claim_templates() == Unverifiable(
        "resourceclaimtemplates cache not synced: forbidden: cannot list "
        "resourceclaimtemplates.resource.k8s.io (RBAC)"
    )


def test_a_view_without_a_template_source_has_none(started: list[KubeClusterView]) -> None:
    view = start(started, None)
    assert view.wait_synced(5)
    assert view.claim_templates() is NO_CLAIM_TEMPLATES
    assert [s.name for s in view.status()] == [
        "networks",
        "recipe",
        "clustertrainingruntimes",
        "trainingruntimes",
    ]


def test_a_template_change_is_heard_by_namespace_and_name(
    started: list[KubeClusterView],
) -> None:
    later = Held[Stream | Exception](
        [WatchEvent("MODIFIED", with_version(claim_template(namespace="b"), "12"))]
    )
    view = view_of(ScriptedSource(lists=[Listing((), "11")], watches=[later]))
    started.append(view)
    heard = subscribed(view)
    view.start()
    assert view.wait_synced(5)
    later.release.set()
    wait_for(lambda: Change(claim_templates=frozenset({("b", "default-rdma")})) in heard)
    assert EVERYTHING in heard  # the first lists
