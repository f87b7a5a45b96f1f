"""DRA objects of ``resource.k8s.io/v1`` as GKE and cluster-toolkit install them: the NIC
DeviceClasses and ResourceClaimTemplates of RDMA NICs (``default-rdma``)."""

from __future__ import annotations

from typing import Any, Final

from tests.harness.objects import Obj

RESOURCE: Final = "resource.k8s.io/v1"
RDMA: Final = "mrdma.google.com"
NETDEV: Final = "netdev.google.com"


def device_class(name: str) -> Obj:
    selector = {"cel": {"expression": f'device.driver == "{name}"'}}
    return {
        "apiVersion": RESOURCE,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [selector]},
    }


def claim_template(namespace: str, name: str, **exactly: Any) -> Obj:
    request = {"name": "req-mrdma", "exactly": {"deviceClassName": RDMA, **exactly}}
    return {
        "apiVersion": RESOURCE,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
