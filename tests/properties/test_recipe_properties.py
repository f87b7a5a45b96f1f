"""``recipe_from_configmap``: any ConfigMap data yields a Recipe, never an exception.

A Recipe carries a mapping, a problem, or neither (never both); a delivered mapping always
passes AICR's ``ValidateGKETCPXOInterfaces`` (docs/rules.md), checked here by a model, or under
the key ``interfaces`` the same without the ``gpu-nic`` rule, for eth1..ethN in order.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping

import yaml
from hypothesis import given, settings, strategies as st

from app.documents import DocumentError, load_yaml
from app.domain.annotation import InterfaceRef
from app.domain.recipe import (
    INTERFACES_KEY,
    PLAIN_KEY,
    RECIPE_KEYS,
    LoadYaml,
    Recipe,
    recipe_from_configmap,
)
from tests.builders import PAIRS, Pair, entries, plain_recipe, recipe_result
from tests.properties.strategies import (
    finite_json_values,
    json_values,
    keys,
    mutated,
    recipe_network_names,
    valid_recipe_pairs,
    yamlish_text,
)
from tests.support.examples import examples

CORE = settings(max_examples=examples(200))
VALID = settings(max_examples=examples(100))
"""For whole (near-)valid recipe documents: YAML round trips are the expensive part."""
REF = "nicguard-system/nicguard-recipe@7"
NETWORK_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


class JsonOnlyError(ValueError):
    """What a well-behaved injected loader raises."""


def json_loader(text: str) -> object:
    """A loader that keeps the ``LoadYaml`` contract: it raises only ValueError."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise JsonOnlyError(str(error)) from None


def satisfies_aicr(mapping: tuple[InterfaceRef, ...]) -> bool:
    """The model of ValidateGKETCPXOInterfaces."""
    names = [entry.interface_name for entry in mapping]
    networks = [entry.network for entry in mapping]
    return (
        len(mapping) == 8
        and sorted(names) == [f"eth{i}" for i in range(1, 9)]
        and all(entry.interface is None for entry in mapping)
        and len(set(networks)) == 8
        and all(
            isinstance(net, str)
            and net != "default"
            and len(net) <= 41
            and NETWORK_NAME.fullmatch(net) is not None
            and "gpu-nic" in net
            for net in networks
        )
    )


def satisfies_interfaces(mapping: tuple[InterfaceRef, ...]) -> bool:
    """The model of the ``interfaces`` key: 1-8 entries eth1..ethN in order, any valid names."""
    networks = [entry.network for entry in mapping]
    return (
        1 <= len(mapping) <= 8
        and [entry.interface_name for entry in mapping]
        == [f"eth{i}" for i in range(1, len(mapping) + 1)]
        and all(entry.interface is None for entry in mapping)
        and len(set(networks)) == len(mapping)
        and all(
            isinstance(net, str)
            and net != "default"
            and len(net) <= 41
            and NETWORK_NAME.fullmatch(net) is not None
            for net in networks
        )
    )


def read(data: Mapping[str, object], loader: LoadYaml = load_yaml) -> Recipe:
    """Read and check the invariants every Recipe keeps."""
    recipe = recipe_from_configmap(data, ref=REF, load_yaml=loader)
    assert isinstance(recipe, Recipe)
    assert recipe.ref == REF
    assert recipe.mapping is None or recipe.problem is None
    if recipe.problem is not None:
        assert isinstance(recipe.problem, str)
        assert recipe.problem
    if recipe.mapping is not None:
        if INTERFACES_KEY in data:
            assert satisfies_interfaces(recipe.mapping), recipe.mapping
        else:
            assert satisfies_aicr(recipe.mapping), recipe.mapping
    if sum(key in data for key in RECIPE_KEYS) != 1:
        assert recipe.problem is not None
    return recipe


def _yaml(document: object) -> str:
    """Block-style YAML, as ``aicr`` writes it; libyaml's emitter for speed, PyYAML's for text
    libyaml cannot encode (lone surrogates, which PyYAML escapes)."""
    try:
        return yaml.dump(document, Dumper=yaml.CSafeDumper, sort_keys=False)
    except UnicodeEncodeError:
        return yaml.safe_dump(document, sort_keys=False)


recipe_texts: st.SearchStrategy[str] = st.one_of(
    st.text(),
    yamlish_text,
    json_values.map(json.dumps),
    st.sampled_from([json.dumps(entries(PAIRS)), _yaml(recipe_result())])
    .flatmap(mutated)
    .map(lambda value: value if isinstance(value, str) else json.dumps(value)),
    st.sampled_from([entries(PAIRS), recipe_result()]).flatmap(mutated).map(json.dumps),
)
data_maps: st.SearchStrategy[dict[str, object]] = st.dictionaries(
    st.sampled_from([*RECIPE_KEYS, "format", "README"]) | keys,
    recipe_texts | json_values,
    max_size=4,
)


@CORE
@given(data_maps)
def test_any_data_reads_as_a_recipe_with_a_json_loader(data: dict[str, object]) -> None:
    read(data, json_loader)


@CORE
@given(data_maps)
def test_any_data_reads_as_a_recipe_with_the_yaml_loader(data: dict[str, object]) -> None:
    read(data)


@CORE
@given(yamlish_text | st.text())
def test_load_yaml_raises_only_document_error(text: str) -> None:
    """The injected loader's contract: ``recipe_from_configmap`` catches ValueError only."""
    with contextlib.suppress(DocumentError):
        load_yaml(text)


@CORE
@given(st.sampled_from(RECIPE_KEYS), yamlish_text)
def test_yamlish_text_under_a_recipe_key_never_raises(key: str, text: str) -> None:
    read({key: text})


@VALID
@given(
    st.sampled_from(["recipe.yaml", "snapshot.yaml"]),
    mutated(recipe_result(configuration=PAIRS)),
    st.booleans(),
)
def test_mutated_recipe_result_documents_keep_the_invariants(
    key: str, document: object, as_json: bool
) -> None:
    read({key: json.dumps(document) if as_json else _yaml(document)})


@VALID
@given(mutated(entries(PAIRS)), st.booleans())
def test_mutated_plain_lists_keep_the_invariants(document: object, as_json: bool) -> None:
    read({"tcpxoInterfaces": json.dumps(document) if as_json else _yaml(document)})


def _mapping(pairs: list[Pair]) -> tuple[InterfaceRef, ...]:
    return tuple(InterfaceRef(name, network) for name, network in pairs)


@VALID
@given(valid_recipe_pairs(), st.sampled_from(["json", "yaml"]), st.dictionaries(keys, st.text()))
def test_a_valid_plain_list_is_delivered_in_order(
    pairs: list[Pair], form: str, noise: dict[str, str]
) -> None:
    data = {**noise, **plain_recipe(pairs)}
    if form == "yaml":
        data["tcpxoInterfaces"] = _yaml(entries(pairs))
    for key in RECIPE_KEYS:
        if key != "tcpxoInterfaces":
            data.pop(key, None)
    assert read(data).mapping == _mapping(pairs)


@VALID
@given(
    valid_recipe_pairs(),
    st.sampled_from(["recipe.yaml", "snapshot.yaml"]),
    st.booleans(),
    st.sampled_from([None, True, "false", 0]),
)
def test_a_delivering_recipe_result_delivers_its_override(
    pairs: list[Pair], key: str, with_configuration: bool, enabled: object
) -> None:
    configuration = pairs if with_configuration else None
    document = recipe_result(pairs, configuration=configuration, enabled=enabled)
    recipe = read({key: _yaml(document)})
    assert recipe.mapping == _mapping(pairs)


@VALID
@given(valid_recipe_pairs(), st.sampled_from(["recipe.yaml", "snapshot.yaml"]))
def test_a_disabled_trainer_component_delivers_nothing(pairs: list[Pair], key: str) -> None:
    recipe = read({key: _yaml(recipe_result(pairs, enabled=False))})
    assert recipe.mapping is None
    assert recipe.problem is None


@VALID
@given(
    valid_recipe_pairs(), valid_recipe_pairs(), st.sampled_from(["recipe.yaml", "snapshot.yaml"])
)
def test_an_override_disagreeing_with_configuration_is_invalid(
    override: list[Pair], configuration: list[Pair], key: str
) -> None:
    recipe = read({key: _yaml(recipe_result(override, configuration=configuration))})
    if override == configuration:
        assert recipe.mapping == _mapping(override)
    else:
        assert recipe.mapping is None
        assert recipe.problem is not None


@VALID
@given(st.lists(finite_json_values, max_size=9))
def test_json_lists_under_the_plain_key_deliver_only_valid_mappings(value: list[object]) -> None:
    read({"tcpxoInterfaces": json.dumps(value)})


INVALID_NETWORKS = st.sampled_from(
    [
        "default",
        "net-0",
        "GPU-NIC-0",
        "0gpu-nic",
        "gpu-nic-",
        "-gpu-nic",
        "gpu_nic",
        "gpu-nic.0",
        "a" * 35 + "gpu-nic",
        "gpu-nic ",
    ]
)
INVALID_NAMES = st.sampled_from(["eth0", "eth9", "eth10", "ETH1", "eth01", "ens3", "eth1 "])


@st.composite
def corrupted_pairs(draw: st.DrawFn) -> list[Pair]:
    """A valid mapping with one thing AICR rejects (docs/rules.md validation list)."""
    pairs = draw(valid_recipe_pairs())
    position = draw(st.integers(0, 7))
    other = pairs[(position + draw(st.integers(1, 7))) % 8]
    name, network = pairs[position]
    corruption = draw(st.integers(0, 5))
    if corruption == 0:
        pairs[position] = (name, draw(INVALID_NETWORKS))
    elif corruption == 1:
        pairs[position] = (name, other[1])
    elif corruption == 2:
        pairs[position] = (draw(INVALID_NAMES), network)
    elif corruption == 3:
        pairs[position] = (other[0], network)
    elif corruption == 4:
        del pairs[position]
    else:
        pairs.append(("eth8", draw(recipe_network_names)))
    return pairs


@VALID
@given(corrupted_pairs(), st.sampled_from(["tcpxoInterfaces", "recipe.yaml", "snapshot.yaml"]))
def test_a_mapping_aicr_rejects_is_invalid(pairs: list[Pair], key: str) -> None:
    data = (
        {key: json.dumps(entries(pairs))}
        if key == PLAIN_KEY
        else {key: _yaml(recipe_result(pairs))}
    )
    recipe = read(data)
    assert recipe.mapping is None
    assert recipe.problem is not None
