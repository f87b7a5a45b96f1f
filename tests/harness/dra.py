"""DRA objects of ``resource.k8s.io`` as GKE and cluster-toolkit install them: the NIC
DeviceClasses and ResourceClaimTemplates of RDMA NICs (``default-rdma``). ``resource.k8s.io/v1``
unless told: a minor without it (before 1.34) serves only the beta versions an admin turned on
(``served_api``), v1beta2 in v1's shape, v1beta1 with the request's fields flat."""

from __future__ import annotations

from typing import Any, Final

from tests.harness.controlplane import DRA_V1, Served
from tests.harness.objects import Obj

RESOURCE: Final = DRA_V1
RDMA: Final = "mrdma.google.com"
NETDEV: Final = "netdev.google.com"
NOT_SERVED: Final = f"the cluster does not serve {RESOURCE}, so no ResourceClaimTemplate it names"
"""What a DRA-bound object's ``ResourceClaimTemplateNotFound`` says on a minor without v1."""


def served_api(served: Served) -> str:
    """The ``resource.k8s.io`` version DRA objects are written in on ``served``'s minor: v1, else
    the newest beta (``controlplane.beta_dra_args``)."""
    if served.dra_v1:
        return RESOURCE
    return "resource.k8s.io/v1beta2" if served.minor >= 33 else "resource.k8s.io/v1beta1"


def device_class(name: str, api: str = RESOURCE) -> Obj:
    selector = {"cel": {"expression": f'device.driver == "{name}"'}}
    return {
        "apiVersion": api,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [selector]},
    }


def claim_template(namespace: str, name: str, api: str = RESOURCE, **exactly: Any) -> Obj:
    fields = {"deviceClassName": RDMA, **exactly}
    flat = api.endswith("/v1beta1")
    request = {"name": "req-mrdma", **(fields if flat else {"exactly": fields})}
    return {
        "apiVersion": api,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
