"""bench.served_instructions reads callgrind's dumps: self cost by object, inclusive by callee."""

from __future__ import annotations

import pytest

from bench.served_instructions import OTHER, layer_of, parse_callgrind

# Compressed names as callgrind writes them: "(id) name" once, then "(id)"; ob= and cob= share
# ids, as fn= and cfn= do. The line after calls= is the call's inclusive cost, not self cost.
_DUMP = """\
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 99999

ob=(1) /usr/lib/x86_64-linux-gnu/libssl.so.3
fl=(1) ???
fn=(1) SSL_read_ex
0 100
cob=(2) /usr/lib/x86_64-linux-gnu/libcrypto.so.3
cfn=(2) EVP_DecryptUpdate
calls=3 0
0 400

ob=(2)
fn=(2)
0 400

ob=(3) /root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0
fl=(2) ceval.c
fn=(3) _PyEval_EvalFrameDefault
10 1000
+2 50
cob=(1)
cfn=(1)
calls=1 0
* 500
cfn=(4) gc_collect_main
calls=1 0
* 30
-1 5

fn=(4)
0 30

totals: 1585
"""


def test_self_costs_by_object_add_up_to_the_total() -> None:
    profile = parse_callgrind(_DUMP)
    assert profile.total == 1585
    assert profile.events == {"Ir": 1585}
    assert profile.by_object == {
        "/usr/lib/x86_64-linux-gnu/libssl.so.3": 100,
        "/usr/lib/x86_64-linux-gnu/libcrypto.so.3": 400,
        "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0": 1085,
    }
    assert sum(profile.by_object.values()) == profile.total  # calls: counted by callees


def test_inclusive_costs_by_callee_name() -> None:
    profile = parse_callgrind(_DUMP)
    assert profile.called == {"EVP_DecryptUpdate": 400, "SSL_read_ex": 500, "gc_collect_main": 30}


def test_layers_of_the_shared_objects() -> None:
    assert parse_callgrind(_DUMP).by_layer() == {"OpenSSL": 500, "CPython (all Python code)": 1085}


@pytest.mark.parametrize(
    ("obj", "layer"),
    [
        ("/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "OpenSSL"),
        ("/x/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so", "Python ssl module"),
        ("/x/lib/python3.11/lib-dynload/_json.cpython-311-x86_64-linux-gnu.so", "stdlib C modules"),
        ("/v/site-packages/uvloop/loop.cpython-311-x86_64-linux-gnu.so", "uvloop + libuv"),
        ("/v/site-packages/httptools/parser/parser.cpython-311-x86_64-linux-gnu.so", "httptools"),
        ("/v/site-packages/orjson/orjson.cpython-311-x86_64-linux-gnu.so", "orjson"),
        ("/root/.pyenv/versions/3.11.7/bin/python3.11", "CPython (all Python code)"),
        ("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc"),
        ("???", OTHER),
    ],
)
def test_layer_of(obj: str, layer: str) -> None:
    assert layer_of(obj).startswith(layer)


def test_a_dump_without_totals_is_refused() -> None:
    with pytest.raises(ValueError, match="totals"):
        parse_callgrind("events: Ir\nfn=(1) f\n0 5\n")
