"""What a Binding writes onto the Pod it binds (app.domain.pod_writes): its annotations, over
the Pod's own; nothing else of it is the Pod's wiring."""

from __future__ import annotations

from app.domain.pod_writes import pod_of_binding


def test_a_bindings_annotations_are_the_pods_new_ones() -> None:
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "node-0", "annotations": {"networking.gke.io/interfaces": "[]"}},
        "target": {"kind": "Node", "name": "gpu-1"},
    }
    assert pod_of_binding(binding, "team-a") == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "node-0",
            "namespace": "team-a",
            "annotations": {"networking.gke.io/interfaces": "[]"},
        },
    }


def test_a_binding_without_annotations_or_a_name_writes_none() -> None:
    assert pod_of_binding({"kind": "Binding"}, "team-a") == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "", "namespace": "team-a"},
    }
