"""app.kubeyaml: YAML read as sigs.k8s.io/yaml over goyaml.v2 reads it (resolve.go, decode.go,
YAMLToJSON), or refused naming the construct; documents split as kubectl splits them."""

from __future__ import annotations

import tracemalloc

import pytest

from app.documents import DocumentError
from app.domain.runtime_snapshot import read_snapshot
from app.kubeyaml import (
    SNAPSHOT_LIMITS,
    KubeYamlError,
    TooCostlyError,
    UnsureReadingError,
    iter_kube_yaml_documents,
    load_kube_yaml,
    load_snapshot_yaml,
)
from app.kubeyaml.decode import _allowed_alias_ratio
from tests.support.hostile_snapshots import refused_for_cost, worst_accepted

READS = [
    # YAML 1.1 booleans and nulls (resolve.go's table)
    ("a: y", {"a": True}),
    ("a: Y", {"a": True}),
    ("a: yes", {"a": True}),
    ("a: On", {"a": True}),
    ("a: TRUE", {"a": True}),
    ("a: n", {"a": False}),
    ("a: NO", {"a": False}),
    ("a: off", {"a": False}),
    ("a: False", {"a": False}),
    ("a: yEs", {"a": "yEs"}),
    ("a: ~", {"a": None}),
    ("a: Null", {"a": None}),
    ("a:", {"a": None}),
    ("a: ''", {"a": ""}),
    ("a: 'y'", {"a": "y"}),
    ('a: "on"', {"a": "on"}),
    # integers: Go's ParseInt with base prefixes, underscores dropped
    ("a: 0x1F", {"a": 31}),
    ("a: -0x10", {"a": -16}),
    ("a: +12", {"a": 12}),
    ("a: 0o17", {"a": 15}),
    ("a: 017", {"a": 15}),
    ("a: 0b101", {"a": 5}),
    ("a: 0b-101", {"a": -5}),
    ("a: -0b101", {"a": -5}),
    ("a: 1_000", {"a": 1000}),
    ("a: 0", {"a": 0}),
    ("a: 0x", {"a": "0x"}),
    ("a: 9223372036854775807", {"a": 9223372036854775807}),
    ("a: -9223372036854775808", {"a": -9223372036854775808}),
    # float64, whole: json.Marshal writes its shortest digits zero-padded
    ("a: 1e18", {"a": 1000000000000000000}),
    ("a: 1:20", {"a": "1:20"}),  # no sexagesimal in goyaml.v2
    # floats: whole ones are JSON integers after json.Marshal
    ("a: 08", {"a": 8}),
    ("a: 1.0", {"a": 1}),
    ("a: 1e3", {"a": 1000}),
    ("a: 1.5", {"a": 1.5}),
    ("a: .5", {"a": 0.5}),
    ("a: -.5e1", {"a": -5}),
    ("a: 1e21", {"a": 1e21}),
    ("a: 1e400", {"a": "1e400"}),  # ParseFloat's range error: a string
    ("a: .5e400", {"a": ".5e400"}),
    ("a: .inF", {"a": ".inF"}),
    ("a: 1_0.5", {"a": 10.5}),
    ("a: .1_0", {"a": ".1_0"}),
    ("a: -x", {"a": "-x"}),
    ("a: +", {"a": "+"}),
    ("a: 0b", {"a": "0b"}),
    ("a: 0b+101", {"a": 5}),
    ("a: -0b-1", {"a": "-0b-1"}),
    ("a: 0x" + "0" * 1000 + "1F", {"a": 31}),
    ("a: 0x1" + "0" * 16, {"a": "0x1" + "0" * 16}),
    ("a: +.", {"a": "+."}),
    # timestamps stay strings for interface{} targets
    ("a: 2001-12-14", {"a": "2001-12-14"}),
    ("a: 2001-12-14t21:59:43.10-05:00", {"a": "2001-12-14t21:59:43.10-05:00"}),
    # keys made strings as YAMLToJSON makes them
    ("1: a\ntrue: b\nyes: c", {"1": "a", "true": "c"}),
    ("0x10: a", {"16": "a"}),
    # duplicate keys: the later wins, also over what YAMLToJSON could not convert
    ("a: 1\na: 2", {"a": 2}),
    ("a: {~: 1}\na: 2", {"a": 2}),
    ("a: [.nan]\na: 1", {"a": 1}),
    ("a: {1: x, '1': y}\n<<: {a: 3}", {"a": 3}),
    # merge keys, in document order; a sequence of maps: the earlier wins
    ("a: 1\n<<: {a: 2}", {"a": 2}),
    ("<<: {a: 2}\na: 1", {"a": 1}),
    ("<<: [{a: 1}, {a: 2, b: 3}]\nb: 4", {"a": 1, "b": 4}),
    ("b: 4\n<<: [{a: 1}, {a: 2, b: 3}]", {"a": 1, "b": 3}),
    ("x: &x {a: 1}\nz:\n  a: 0\n  <<: *x", {"x": {"a": 1}, "z": {"a": 1}}),
    ("x: &x {a: 1}\nz:\n  <<: [*x, {a: 2}]", {"x": {"a": 1}, "z": {"a": 1}}),
    ("y: 1\nn: 2", {"true": 1, "false": 2}),
    ("<<: {a: 1, <<: {b: 2}}", {"a": 1, "b": 2}),
    ("'<<': {a: 1}", {"<<": {"a": 1}}),
    ("a: <<", {"a": "<<"}),
    ("k: &k <<\n*k : 1", {"k": "<<", "<<": 1}),
    # anchors and aliases
    ("a: &x [1, {b: y}]\nc: *x", {"a": [1, {"b": True}], "c": [1, {"b": True}]}),
    ("a: &x 1\nb: &x 2\nc: *x", {"a": 1, "b": 2, "c": 2}),
    # documents
    ("", None),
    ("# nothing", None),
    ("---\na: 1\n...\n", {"a": 1}),
    ("- a\n- [b, {c: d}]", ["a", ["b", {"c": "d"}]]),
    ("a: |\n  x\n  y\n", {"a": "x\ny\n"}),
    ('a: "\\u00e9"', {"a": "é"}),
    ("annotation\u017f: x", {"annotation\u017f": "x"}),
    ("a: [http, 'b:c', \"d?\"]", {"a": ["http", "b:c", "d?"]}),
    ("a: b:c", {"a": "b:c"}),
    ("a: [b:c, x:y:z, 'b?c']", {"a": ["b:c", "x:y:z", "b?c"]}),
    ("a: [b :c]", {"a": ["b :c"]}),
    (
        "- {name: node, image: pytorch/pytorch:2.11.0}",
        [{"name": "node", "image": "pytorch/pytorch:2.11.0"}],
    ),
    ("a: b?c", {"a": "b?c"}),
]


@pytest.mark.parametrize(("text", "expected"), READS)
def test_reads_as_goyaml_v2_and_yamltojson(text: str, expected: object) -> None:
    value = load_kube_yaml(text)
    assert value == expected
    assert type(value) is type(expected)
    if isinstance(expected, dict):
        for key, item in expected.items():
            assert type(value[key]) is type(item), key  # type: ignore[index]


REFUSED = [
    ("a: !!str 1", UnsureReadingError, "the tag `!!str` at line 1, column 4"),
    ("a: !custom x", UnsureReadingError, "the tag `!custom`"),
    ("a: ! x", UnsureReadingError, "the tag `!`"),
    ("a: !!binary aGk=", UnsureReadingError, "the tag `!!binary`"),
    ("a: !!map {b: 1}", UnsureReadingError, "the tag `!!map` at line 1, column 4"),
    ("a: \x07", KubeYamlError, "control characters are not allowed"),
    ("a: \ud800", KubeYamlError, "not UTF-8 text: surrogates not allowed at index 3"),
    ("%YAML 1.1\n---\na: 1", UnsureReadingError, "%YAML or %TAG directive"),
    ("a: 1\n---\nb: 2", UnsureReadingError, "a second YAML document at line 2, column 1"),
    ("a: 1\n...\n---\nb: 2", UnsureReadingError, "a second YAML document at line 3"),
    ("a: 1\n...\nb: 2", KubeYamlError, "did not find expected <document start>"),
    ("a: [b?c]", UnsureReadingError, "a plain scalar with `?` in a flow collection at line 1, col"),
    ("a: [b:, c]", KubeYamlError, "found unexpected ':' at line 1, column 6"),
    ("a: {b: c?}", UnsureReadingError, "in a flow collection at line 1, column 8"),
    ("a: {b?c: 1}", UnsureReadingError, "in a flow collection"),
    ("a: [b:]", KubeYamlError, "found unexpected ':'"),
    ("1: a\n'1': b", UnsureReadingError, "two keys read as `1` (a int and a str)"),
    ("true: a\n'true': b", UnsureReadingError, "two keys read as `true`"),
    ("1.5: a", UnsureReadingError, "a floating-point map key at line 1, column 1"),
    ("~: a", KubeYamlError, "unsupported map key (null)"),
    # kubectl reads such a JSON integer back as a float64, Trainer as its typed field: refused
    ("a: 18446744073709551615", UnsureReadingError, "an integer beyond 64 bits at line 1, col"),
    ("a: 18446744073709551616", UnsureReadingError, "an integer beyond 64 bits"),
    ("a: -9223372036854775809", UnsureReadingError, "an integer beyond 64 bits"),
    ("a: 1e19", UnsureReadingError, "an integer beyond 64 bits"),
    ("18446744073709551615: a", KubeYamlError, "unsupported map key of type uint64"),
    ("? [a]\n: b", KubeYamlError, "invalid map key"),
    ("a: .inf", KubeYamlError, "json: unsupported value .inf at line 1, column 4"),
    ("a: .NaN", KubeYamlError, "unsupported value"),
    ("a: *nope", KubeYamlError, "unknown anchor 'nope' referenced"),
    ("a: &x [*x]", KubeYamlError, "anchor 'x' value contains itself"),
    ("<<: 1", KubeYamlError, "map merge requires map or sequence of maps"),
    ("x: &x [1]\n<<: *x", KubeYamlError, "map merge requires map"),
    ("<<: [{a: 1}, 2]", KubeYamlError, "map merge requires map"),
    ("a: [", KubeYamlError, "did not find expected node content at line 2, column 1"),
    ("a: b: c", KubeYamlError, "mapping values are not allowed in this context at line 1, col"),
    ("a: -", KubeYamlError, "block sequence entries are not allowed"),
]


@pytest.mark.parametrize(("text", "error", "message"), REFUSED)
def test_refuses_naming_the_construct(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as raised:
        load_kube_yaml(text)
    assert isinstance(raised.value, DocumentError)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def _bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines)


def test_an_alias_bomb_is_refused_as_goyaml_v2_refuses_it() -> None:
    # More than 99 % of 11,000 values come from aliases: goyaml.v2's own bound.
    with pytest.raises(KubeYamlError, match="document contains excessive aliasing"):
        load_kube_yaml(_bomb(4))
    with pytest.raises(KubeYamlError, match="excessive aliasing"):
        load_snapshot_yaml(_bomb(9))


@pytest.mark.parametrize(
    ("decodes", "ratio"),
    [(1_000, 0.99), (400_000, 0.99), (2_200_000, 0.545), (4_000_000, 0.10), (9_000_000, 0.10)],
)
def test_goyaml_v2s_allowed_alias_ratio_falls_with_the_document(decodes: int, ratio: float) -> None:
    assert _allowed_alias_ratio(decodes) == pytest.approx(ratio)


def test_alias_expansion_beyond_the_snapshot_budget() -> None:
    # A quarter of the values are not aliased: within goyaml.v2's bound, beyond nicguard's.
    text = "a: &a [" + ", ".join(["1"] * 2400) + "]\nb: *a\nc: *a\nd: *a\ne: *a"
    assert len(load_kube_yaml(text)) == 5  # type: ignore[arg-type]
    with pytest.raises(TooCostlyError, match="more than 10000 values"):
        load_snapshot_yaml(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spec: [" + ",".join(["{}"] * 5_001) + "]", "more than 5000 YAML nodes"),
        ("a: " + "[" * 65 + "]" * 65, "nesting deeper than 64"),
        # Each within 64 levels as written, 124 deep once the alias is expanded.
        ("a: &a " + "[" * 62 + "]" * 62 + "\nb: " + "[" * 62 + "*a" + "]" * 62, "deeper than 64"),
    ],
)
def test_snapshot_budget(text: str, message: str) -> None:
    with pytest.raises(TooCostlyError, match=message):
        load_kube_yaml(text, SNAPSHOT_LIMITS)


DOCUMENTS = [
    ("a: 1\n---\nb: 2\n", [{"a": 1}, {"b": 2}]),
    ("---\na: 1\n---\n---\n# only a comment\n---\n~\n", [{"a": 1}]),
    ("a: 1\r\n--- # next\r\nb: y\r\n", [{"a": 1}, {"b": True}]),
    ("a: 1\n---\t\nb: 2", [{"a": 1}, {"b": 2}]),
    ("a: 1\n---\n", [{"a": 1}]),
    ("a: |\n  x\r\n", [{"a": "x\n"}]),
    ("a: 'x\r'", [{"a": "x "}]),  # the last line keeps its \r: a space when folded
    ('{"a": 1.0} {"b": [1e2, 0.5]}\nnull\n{}', [{"a": 1}, {"b": [100, 0.5]}, {}]),
    ('  \n\t{"a": {"a": 1, "a": 2}}', [{"a": {"a": 2}}]),
    # Not JSON after at most one value: kubectl reads the rest as YAML.
    ('{"a": 1}\n{"b": NaN}', [{"a": 1}, {"b": "NaN"}]),
    ('{"a": 1}  \n---\n{"b": y}', [{"a": 1}, {"b": True}]),
    ("{a: 1}", [{"a": 1}]),
]


@pytest.mark.parametrize(("text", "expected"), DOCUMENTS)
def test_documents_split_as_kubectl_splits_them(text: str, expected: list[object]) -> None:
    assert list(iter_kube_yaml_documents(text)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\n--- b\n", "invalid Yaml document separator: b at line 2"),
        ("a: 1\n----\n", "invalid Yaml document separator: -"),
        ("a: 1\n---\nb: !!str x\n", "document 2: the tag `!!str` at line 3, column 4"),
        ("a: 1\n---\nb: [\n", "document 2: "),
        ('{"a": 1}{"b": 2}\n{"c": NaN}', "document 3: not JSON, though the file starts with '{'"),
        ('{"a": 1e999}', "does not fit 64 bits"),
        ('{"a": 1}\n--- x', "invalid Yaml document separator: x at line 2"),
        # 3.11's JSON decoder gives up on the depth, 3.13's on the missing end (the text is then
        # read as YAML, whose depth bound refuses it): document 1 either way.
        ('{"a":' * 5000, "document 1: "),
        ('{"a": 9223372036854775808}', "does not fit 64 bits"),
    ],
)
def test_documents_refused_naming_the_document(text: str, message: str) -> None:
    with pytest.raises(KubeYamlError, match=None) as raised:
        list(iter_kube_yaml_documents(text))
    assert message in str(raised.value)


# SPEC §14: the worst accepted snapshot costs at most 16 MiB (and 50 ms of CPU, measured by
# bench.snapshot_cost, never asserted here). tracemalloc counts every Python allocation.
_MEMORY_BOUND = 16 * 1024 * 1024


def _peak_of_reading(text: str) -> tuple[int, str | None]:
    configmap = {"metadata": {"name": "j-runtime-snapshot"}, "data": {"runtime": text}}
    tracemalloc.start()
    try:
        found = read_snapshot(configmap, "j", load_snapshot_yaml)
        return tracemalloc.get_traced_memory()[1], found.problem
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("name", "text"), list(worst_accepted().items()))
def test_the_costliest_accepted_snapshots_stay_within_16_mib(name: str, text: str) -> None:
    peak, problem = _peak_of_reading(text)
    assert peak <= _MEMORY_BOUND, name
    assert problem is None or "YAML" not in problem, problem  # read, not refused for cost


@pytest.mark.parametrize(("name", "text"), list(refused_for_cost().items()))
def test_snapshots_beyond_the_budget_are_refused_within_16_mib(name: str, text: str) -> None:
    peak, problem = _peak_of_reading(text)
    assert peak <= _MEMORY_BOUND, name
    assert problem is not None
    assert problem.startswith("data.runtime is not YAML of one runtime: "), problem
