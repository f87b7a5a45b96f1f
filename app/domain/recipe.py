"""The recipe ConfigMap (docs/rules.md): which mapping it delivers, and AICR's validation of it.

YAML decoding is injected (``load_yaml``) so the core stays stdlib-only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from app.domain.annotation import InterfaceRef, interface_ref
from app.domain.fields import as_list, as_map, map_at
from app.domain.verdict import shown

PLAIN_KEY: Final = "tcpxoInterfaces"
# The same list for Networks AICR did not name (GKE's docs: vpc1..vpc8; cluster-toolkit:
# <deployment>-gpunet-<i>-subnet), which AICR's gpu-nic rule would refuse.
INTERFACES_KEY: Final = "interfaces"
# AICR writes a RecipeResult under recipe.yaml (`aicr validate`), snapshot.yaml (`aicr recipe -o
# cm://`) or snapshot.json (the same with --format json); YAML decoding reads JSON too.
RECIPE_KEYS: Final = (PLAIN_KEY, INTERFACES_KEY, "recipe.yaml", "snapshot.yaml", "snapshot.json")
RECIPE_RESULT_KIND: Final = "RecipeResult"
TRAINER_COMPONENT: Final = "kubeflow-trainer"
TCPXO_RUNTIME_MANIFEST: Final = (
    "components/kubeflow-trainer/manifests/torch-distributed-tcpxo-cluster-training-runtime.yaml"
)
REQUIRED_INTERFACES: Final = 8
MAX_INTERFACES: Final = 8
_RECIPE_INTERFACE: Final = re.compile(r"eth[1-8]")
_NETWORK_NAME: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_NETWORK_NAME_MAX: Final = 41

LoadYaml = Callable[[str], object]


class RecipeError(ValueError):
    """The recipe cannot be read or fails validation; the text says why."""


@dataclass(frozen=True, slots=True)
class Recipe:
    """A recipe ConfigMap that exists: what it delivers, or why it is invalid.

    ``mapping`` is None when the recipe delivers nothing; ``problem`` is set when it is invalid.
    ``ref`` is ``namespace/name@resourceVersion`` for audit.
    """

    ref: str
    mapping: tuple[InterfaceRef, ...] | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class RecipeMissing:
    """The recipe ConfigMap does not exist; ``ref`` is ``namespace/name``."""

    ref: str


def recipe_from_configmap(data: Mapping[str, object], *, ref: str, load_yaml: LoadYaml) -> Recipe:
    """Read a ConfigMap's ``data``; never raises (invalid recipes carry a ``problem``)."""
    try:
        return Recipe(ref=ref, mapping=delivered_mapping(data, load_yaml=load_yaml))
    except RecipeError as error:
        return Recipe(ref=ref, problem=str(error))


def delivered_mapping(
    data: Mapping[str, object], *, load_yaml: LoadYaml
) -> tuple[InterfaceRef, ...] | None:
    """The validated mapping the recipe delivers, or None; raises RecipeError."""
    present = [key for key in RECIPE_KEYS if key in data]
    if len(present) != 1:
        found = ", ".join(present) if present else "none"
        raise RecipeError(
            f"data must hold exactly one of {', '.join(RECIPE_KEYS)} (found: {found})"
        )
    key = present[0]
    text = data[key]
    if not isinstance(text, str):
        raise RecipeError(f"data key {key} is not a string")
    document = _decode(key, text, load_yaml)
    if key == PLAIN_KEY:
        return validate_mapping(normalize_mapping(document, where=PLAIN_KEY))
    if key == INTERFACES_KEY:
        return validate_interfaces(normalize_mapping(document, where=INTERFACES_KEY))
    return _recipe_result_mapping(document, key)


def _decode(key: str, text: str, load_yaml: LoadYaml) -> object:
    try:
        return load_yaml(text)
    except (ValueError, RecursionError) as error:
        raise RecipeError(f"data key {key} is not valid YAML: {error}") from None


def _recipe_result_mapping(document: object, key: str) -> tuple[InterfaceRef, ...] | None:
    """AICR ``FabricRuntimeDelivered``: the first enabled kubeflow-trainer componentRef decides."""
    result = as_map(document)
    if result is None:
        raise RecipeError(f"data key {key} does not hold a RecipeResult object")
    kind = result.get("kind")
    if kind != RECIPE_RESULT_KIND:
        # e.g. the Snapshot `aicr snapshot` writes under the same key: reading it as "delivers
        # nothing" would switch the recipe check off, so it is invalid instead.
        found = f'kind "{shown(kind)}"' if isinstance(kind, str) else "no kind"
        raise RecipeError(f"data key {key} is not a RecipeResult ({found})")
    refs = result.get("componentRefs")
    if refs is not None and as_list(refs) is None:
        raise RecipeError(f"{key}: componentRefs is not a list")
    for item in as_list(refs) or ():
        component = as_map(item)
        if component is None or component.get("name") != TRAINER_COMPONENT:
            continue
        overrides = as_map(component.get("overrides")) or {}
        if overrides.get("enabled") is False:
            continue
        if TCPXO_RUNTIME_MANIFEST not in (as_list(component.get("manifestFiles")) or ()):
            return None
        if PLAIN_KEY not in overrides:
            raise RecipeError(
                f"{key}: kubeflow-trainer ships torch-distributed-tcpxo but records no "
                "tcpxoInterfaces override; regenerate the recipe with the network mapping"
            )
        where = "kubeflow-trainer overrides.tcpxoInterfaces"
        mapping = validate_mapping(normalize_mapping(overrides[PLAIN_KEY], where=where))
        _check_configuration(result, mapping, key)
        return mapping
    return None


def _check_configuration(result: object, mapping: tuple[InterfaceRef, ...], key: str) -> None:
    gke = map_at(result, "configuration", "gke")
    if gke is None or PLAIN_KEY not in gke:
        return
    recorded = normalize_mapping(gke[PLAIN_KEY], where="configuration.gke.tcpxoInterfaces")
    if recorded != mapping:
        raise RecipeError(
            f"{key}: kubeflow-trainer override disagrees with configuration.gke.tcpxoInterfaces; "
            "regenerate the recipe rather than editing one half"
        )


def normalize_mapping(value: object, *, where: str) -> tuple[InterfaceRef, ...]:
    """AICR ``NormalizeGKETCPXOInterfaces``: a list of maps with non-empty string fields."""
    entries = as_list(value)
    if entries is None:
        raise RecipeError(f"{where} must be a list of {{interfaceName, network}} entries")
    mapping = []
    for position, item in enumerate(entries):
        entry = as_map(item) or {}
        name, network = entry.get("interfaceName"), entry.get("network")
        if not (isinstance(name, str) and name and isinstance(network, str) and network):
            raise RecipeError(
                f"{where} entry {position} must carry non-empty interfaceName and network strings"
            )
        mapping.append(interface_ref(name, network))
    return tuple(mapping)


def validate_mapping(mapping: tuple[InterfaceRef, ...]) -> tuple[InterfaceRef, ...]:
    """AICR ``ValidateGKETCPXOInterfaces`` in its order; raises RecipeError at the first failure."""
    if len(mapping) != REQUIRED_INTERFACES:
        raise RecipeError(
            f"the mapping must contain exactly {REQUIRED_INTERFACES} entries "
            f"(eth1..eth8 on a3-megagpu-8g), got {len(mapping)}"
        )
    names: set[str] = set()
    networks: set[str] = set()
    for entry in mapping:
        name, network = entry.interface_name, entry.network or ""
        if not _RECIPE_INTERFACE.fullmatch(name):
            raise RecipeError(f'invalid interface name "{shown(name)}": must be one of eth1..eth8')
        if name in names:
            raise RecipeError(f"duplicate interface name {name}")
        names.add(name)
        if network == "default":
            raise RecipeError(f'{name}: "default" is reserved for eth0')
        _check_network_name(name, network)
        if "gpu-nic" not in network:
            raise RecipeError(f'{name}: Network name "{network}" must contain "gpu-nic"')
        _add_network(network, networks)
    return mapping


def validate_interfaces(mapping: tuple[InterfaceRef, ...]) -> tuple[InterfaceRef, ...]:
    """The ``interfaces`` key: AICR's validation without its ``gpu-nic`` rule, for 1-8 entries
    named eth1..ethN in order (A3 High wires 4 NICs, A3 Mega 8); raises RecipeError."""
    if not 1 <= len(mapping) <= MAX_INTERFACES:
        raise RecipeError(
            f"{INTERFACES_KEY} must contain 1 to {MAX_INTERFACES} entries, got {len(mapping)}"
        )
    networks: set[str] = set()
    for position, entry in enumerate(mapping, start=1):
        name, network = entry.interface_name, entry.network or ""
        if name != f"eth{position}":
            raise RecipeError(
                f'{INTERFACES_KEY} entry {position - 1} is named "{shown(name)}": the entries '
                f"must be eth1..eth{len(mapping)} in order"
            )
        if network == "default":
            raise RecipeError(f'{name}: "default" is reserved for eth0')
        _check_network_name(name, network)
        _add_network(network, networks)
    return mapping


def _check_network_name(name: str, network: str) -> None:
    if len(network) > _NETWORK_NAME_MAX or not _NETWORK_NAME.fullmatch(network):
        raise RecipeError(
            f'{name}: invalid Network name "{shown(network)}": use 1-41 lowercase letters, '
            "digits or dashes, starting with a letter and ending with a letter or digit"
        )


def _add_network(network: str, seen: set[str]) -> None:
    if network in seen:
        raise RecipeError(f"duplicate network {network}: each interface needs its own Network")
    seen.add(network)
