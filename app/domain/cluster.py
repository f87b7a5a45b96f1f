"""What the core needs to know about the cluster, as an in-memory view (SPEC section 6).

Adapters (watch caches, files) satisfy ``ClusterView``; every answer is a snapshot, never I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.network import Network
from app.domain.recipe import Recipe, RecipeMissing


@dataclass(frozen=True, slots=True)
class Unverifiable:
    """The view cannot answer (cache not synced, API reads failing); ``reason`` says which."""

    reason: str


@dataclass(frozen=True, slots=True)
class Networks:
    """The cluster's Network objects by name; ``served`` is False when the API is not served."""

    by_name: Mapping[str, Network]
    served: bool = True


class ClusterView(Protocol):
    """A read-only snapshot source for the rules."""

    def networks(self) -> Networks | Unverifiable:
        """All Network objects, or why they are unknown."""
        ...

    def recipe(self) -> Recipe | RecipeMissing | Unverifiable:
        """The recipe ConfigMap as parsed, or why it is unknown."""
        ...

    def runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        """A ClusterTrainingRuntime (namespace ignored) or TrainingRuntime; None if absent."""
        ...


RuntimeKey = tuple[Kind, str, str]
"""(kind, namespace, name); the namespace of a ClusterTrainingRuntime is ``""``."""


def runtime_key(kind: Kind, namespace: str, name: str) -> RuntimeKey:
    return (kind, "" if kind is Kind.CLUSTER_TRAINING_RUNTIME else namespace, name)


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """An immutable ClusterView: what adapters build from files or watch caches."""

    network_state: Networks | Unverifiable
    recipe_state: Recipe | RecipeMissing | Unverifiable
    runtime_state: Mapping[RuntimeKey, JsonMap] | Unverifiable

    def networks(self) -> Networks | Unverifiable:
        return self.network_state

    def recipe(self) -> Recipe | RecipeMissing | Unverifiable:
        return self.recipe_state

    def runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        if isinstance(self.runtime_state, Unverifiable):
            return self.runtime_state
        return self.runtime_state.get(runtime_key(kind, namespace, name))


RuntimeFetch = Callable[[Kind, str, str], JsonMap | Unverifiable | None]
"""One direct read of a runtime the caches lack: the object, None when absent, or why not."""


@dataclass(frozen=True, slots=True)
class WithRuntime:
    """A view plus one runtime read directly (a runtime created a moment before its TrainJob)."""

    view: ClusterView
    key: RuntimeKey
    found: JsonMap | Unverifiable | None

    def networks(self) -> Networks | Unverifiable:
        return self.view.networks()

    def recipe(self) -> Recipe | RecipeMissing | Unverifiable:
        return self.view.recipe()

    def runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        if runtime_key(kind, namespace, name) == self.key:
            return self.found
        return self.view.runtime(kind, namespace, name)
