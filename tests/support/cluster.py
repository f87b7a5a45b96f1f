"""A small cluster as the fake API server answers it, by path: eight Networks, the recipe, a
wired ClusterTrainingRuntime, two teams' TrainingRuntimes, both policy report APIs."""

from __future__ import annotations

from typing import Final

from app.domain.kinds import Kind
from tests.builders import (
    GPU_NICS,
    configmap,
    network,
    plain_recipe,
    runtime,
    wired,
    with_metadata,
)
from tests.support.apiserver import Reply, discovery, listed

TRAINER: Final = "/apis/trainer.kubeflow.org/v1alpha1"
NETWORKS: Final = "/apis/networking.gke.io/v1/networks"
PARAM_SETS: Final = "/apis/networking.gke.io/v1/gkenetworkparamsets"
CONFIGMAPS: Final = "/api/v1/namespaces/nicguard-system/configmaps"
ALL_CONFIGMAPS: Final = "/api/v1/configmaps"
CTRS: Final = f"{TRAINER}/clustertrainingruntimes"
TRS: Final = f"{TRAINER}/trainingruntimes"
OPENREPORTS: Final = "/apis/openreports.io/v1alpha1"
WGPOLICYK8S: Final = "/apis/wgpolicyk8s.io/v1alpha2"
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"


def team_runtime(namespace: str, name: str, uid: str) -> dict[str, object]:
    found = runtime(name, kind=Kind.TRAINING_RUNTIME, namespace=namespace, annotations=wired())
    return with_metadata(found, uid=uid, annotations={LAST_APPLIED: "{...}"})


CTR: Final = with_metadata(runtime(annotations=wired()), uid="u-ctr")
TEAM_A: Final = team_runtime("team-a", "a", "u-a")
TEAM_B: Final = team_runtime("team-b", "b", "u-b")
CLUSTER: Final[dict[str, Reply]] = {
    NETWORKS: listed(*(network(name) for name in GPU_NICS)),
    CONFIGMAPS: listed(configmap(plain_recipe())),
    CTRS: listed(CTR),
    TRS: listed(TEAM_A, TEAM_B),
    f"{TRAINER}/namespaces/team-a/trainingruntimes": listed(TEAM_A),
    # The runtime snapshots the audit judges: none (a recipe is no copy).
    ALL_CONFIGMAPS: listed(configmap(plain_recipe())),
    "/api/v1/namespaces/team-a/configmaps": listed(),
    OPENREPORTS: discovery("openreports.io/v1alpha1"),
    WGPOLICYK8S: discovery("wgpolicyk8s.io/v1alpha2"),
}
