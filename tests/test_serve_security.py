"""Security properties of a live ``nicguard serve`` (file mode, real TLS) and of the shipped
deployment: TLS >= 1.2 with AEAD ECDHE suites only, the 3 MiB body cap, denials and the audit
log that never echo object contents beyond names and networks, non-root read-only containers.

Cipher suites are probed with hand-built TLS 1.2 ClientHellos, so a suite is offered even when
the local OpenSSL would refuse to (RC4, 3DES, NULL, export and anonymous suites are compiled out
of most builds): the server's own answer, a ServerHello or not, is what is tested.
"""

from __future__ import annotations

import copy
import http.client
import json
import secrets
import socket
import ssl
import struct
import subprocess
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from tests.harness.procs import http_status, tool
from tests.live_serve import LiveServe, live_serve
from tests.support.paths import ROOT

KUBECTL: Final = tool("kubectl")
EXAMPLES: Final = ROOT / "examples"
INTERFACES: Final = "networking.gke.io/interfaces"
CAP: Final = 3 * 1024 * 1024
TIMEOUT: Final = 10.0

# TLS 1.2 suites (IANA numbers) nicguard must never negotiate, by weakness.
WEAK_SUITES: Final = {
    "TLS_RSA_WITH_RC4_128_SHA": 0x0005,
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": 0xC007,
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": 0x000A,
    "TLS_ECDHE_ECDSA_WITH_3DES_EDE_CBC_SHA": 0xC008,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": 0xC009,
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": 0xC00A,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": 0xC023,
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": 0xC024,
    "TLS_RSA_WITH_AES_128_CBC_SHA": 0x002F,
    "TLS_RSA_WITH_AES_128_GCM_SHA256": 0x009C,  # no forward secrecy
    "TLS_RSA_WITH_NULL_SHA256": 0x003B,
    "TLS_ECDHE_ECDSA_WITH_NULL_SHA": 0xC006,
    "TLS_ECDH_anon_WITH_AES_128_CBC_SHA": 0xC018,
    "TLS_DH_anon_WITH_AES_128_GCM_SHA256": 0x00A6,
    "TLS_RSA_EXPORT_WITH_RC4_40_MD5": 0x0003,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8": 0xC0AE,  # 64-bit tag
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": 0x009E,  # finite-field DH
}
STRONG_SUITES: Final = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": 0xC02B,
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": 0xC02C,
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA9,
}
TLS12: Final = 0x0303


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServe]:
    """``nicguard serve --state examples/cluster`` on loopback, stopped by PID afterwards."""
    with live_serve(tmp_path_factory.mktemp("security")) as served:
        yield served


# --- TLS versions and cipher suites --------------------------------------------------------


def _u16(value: int) -> bytes:
    return struct.pack("!H", value)


def _vector(data: bytes) -> bytes:
    return _u16(len(data)) + data


def _extension(kind: int, data: bytes) -> bytes:
    return _u16(kind) + _vector(data)


def client_hello(version: int, suites: Sequence[int]) -> bytes:
    """A TLS ClientHello record offering exactly ``suites`` at ``version`` (no TLS 1.3)."""
    name = b"localhost"
    extensions = _extension(0x0000, _vector(b"\x00" + _vector(name)))  # server_name
    extensions += _extension(0x000A, _vector(b"".join(_u16(g) for g in (0x1D, 0x17, 0x18))))
    extensions += _extension(0x000B, b"\x01\x00")  # ec_point_formats: uncompressed
    signatures = (0x0403, 0x0503, 0x0804, 0x0401, 0x0203, 0x0201)
    extensions += _extension(0x000D, _vector(b"".join(_u16(s) for s in signatures)))
    extensions += _extension(0xFF01, b"\x00")  # renegotiation_info
    body = _u16(version) + secrets.token_bytes(32) + b"\x00"  # random, no session id
    body += _vector(b"".join(_u16(s) for s in suites)) + b"\x01\x00"  # null compression
    body += _vector(extensions)
    handshake = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + _vector(handshake)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def server_answer(port: int, hello: bytes) -> tuple[str, int, int]:
    """Send ``hello``; ("hello", version, suite) for a ServerHello, ("alert", level,
    description) for an alert, ("closed", 0, 0) when the server hangs up."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(hello)
        try:
            header = _read_exactly(sock, 5)
        except ConnectionResetError:
            return "closed", 0, 0
        if header is None:
            return "closed", 0, 0
        kind, length = header[0], struct.unpack("!H", header[3:5])[0]
        payload = _read_exactly(sock, length)
        assert payload is not None, "truncated TLS record"
    if kind == 0x15:
        return "alert", payload[0], payload[1]
    assert kind == 0x16, f"unexpected record type {kind}"
    assert payload[0] == 0x02, f"expected a ServerHello, got handshake type {payload[0]}"
    version = struct.unpack("!H", payload[4:6])[0]
    session_id_length = payload[38]
    suite_at = 39 + session_id_length
    return "hello", version, struct.unpack("!H", payload[suite_at : suite_at + 2])[0]


def test_raw_probe_sees_the_aead_suites_negotiated(live: LiveServe) -> None:
    for name, suite in STRONG_SUITES.items():
        assert server_answer(live.port, client_hello(TLS12, [suite])) == (
            "hello",
            TLS12,
            suite,
        ), name


@pytest.mark.parametrize(("name", "suite"), sorted(WEAK_SUITES.items()))
def test_weak_suite_is_never_negotiated(live: LiveServe, name: str, suite: int) -> None:
    answer = server_answer(live.port, client_hello(TLS12, [suite]))
    assert answer[0] != "hello", f"{name} negotiated: {answer}"


def test_server_prefers_aead_when_offered_last_after_every_weak_suite(live: LiveServe) -> None:
    offered = [*WEAK_SUITES.values(), STRONG_SUITES["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]]
    assert server_answer(live.port, client_hello(TLS12, offered)) == ("hello", TLS12, 0xC02B)


@pytest.mark.parametrize("version", [0x0300, 0x0301, 0x0302], ids=["SSLv3", "TLSv1", "TLSv1.1"])
def test_raw_pre_tls12_hello_is_refused(live: LiveServe, version: int) -> None:
    """Even offering every suite the server has, plus the CBC suites older versions need."""
    suites = [*STRONG_SUITES.values(), 0xC009, 0xC00A, 0x002F]
    answer = server_answer(live.port, client_hello(version, suites))
    assert answer[0] != "hello", answer


def _legacy_context(live: LiveServe, maximum: ssl.TLSVersion) -> ssl.SSLContext:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLSVersion.TLSv1 and TLSv1_1
        legacy = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        legacy.minimum_version = ssl.TLSVersion.TLSv1
        legacy.maximum_version = maximum
    legacy.load_verify_locations(cafile=str(live.ca))
    legacy.set_ciphers("ALL:@SECLEVEL=0")  # so that any refusal is the server's
    return legacy


def _handshake(live: LiveServe, context: ssl.SSLContext) -> str | None:
    with (
        socket.create_connection(("127.0.0.1", live.port), timeout=TIMEOUT) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return tls.version()


@pytest.mark.parametrize("maximum", ["TLSv1", "TLSv1_1"])
def test_openssl_client_limited_to_tls10_or_tls11_is_refused(live: LiveServe, maximum: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        version = getattr(ssl.TLSVersion, maximum)
    with pytest.raises(ssl.SSLError):
        _handshake(live, _legacy_context(live, version))
    assert _handshake(live, _legacy_context(live, ssl.TLSVersion.TLSv1_2)) == "TLSv1.2"
    assert _handshake(live, live.context) == "TLSv1.3"


# --- the request body cap ------------------------------------------------------------------


def _connection(live: LiveServe) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection(
        "127.0.0.1", live.port, timeout=TIMEOUT, context=live.context
    )


def _post(live: LiveServe, body: bytes) -> tuple[int, bytes]:
    connection = _connection(live)
    try:
        connection.request(
            "POST", "/validate", body=body, headers={"Content-Type": "application/json"}
        )
        reply = connection.getresponse()
        return reply.status, reply.read()
    finally:
        connection.close()


def test_declared_body_over_3_mib_is_413_before_it_is_sent(live: LiveServe) -> None:
    connection = _connection(live)
    try:
        connection.putrequest("POST", "/validate")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(CAP + 1))
        connection.endheaders()  # and not a byte of the body: the answer must not wait for it
        reply = connection.getresponse()
        assert reply.status == 413
        assert json.loads(reply.read()) == {"error": "body exceeds 3 MiB", "status": 413}
    finally:
        connection.close()


def test_streamed_body_over_3_mib_is_413(live: LiveServe) -> None:
    connection = _connection(live)
    try:
        connection.putrequest("POST", "/validate")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders()
        piece = b" " * 65536
        for _ in range(CAP // len(piece)):
            connection.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        connection.send(b"1\r\n \r\n")  # one byte over; no last chunk: the server stops here
        reply = connection.getresponse()
        assert reply.status == 413
        assert json.loads(reply.read())["status"] == 413
    finally:
        connection.close()


def test_a_body_of_exactly_3_mib_is_read_and_judged_as_json(live: LiveServe) -> None:
    body = b"[" + b" " * (CAP - 2) + b"]"
    assert len(body) == CAP
    status, answer = _post(live, body)
    assert (status, json.loads(answer)["error"]) == (400, "body is not an AdmissionReview")
    good = (EXAMPLES / "reviews" / "good-runtime.json").read_bytes()
    assert _post(live, good)[0] == 200  # and the server is fine


# --- denials and the audit log never echo object contents ----------------------------------

MARKER: Final = "s3cr3t-" + secrets.token_hex(8)


def _review(name: str) -> dict[str, Any]:
    review: dict[str, Any] = json.loads((EXAMPLES / "reviews" / f"{name}.json").read_text())
    review["request"]["uid"] = f"uid-{secrets.token_hex(6)}"
    return review


def _node_template(obj: dict[str, Any]) -> dict[str, Any]:
    jobs = obj["spec"]["template"]["spec"]["replicatedJobs"]
    template: dict[str, Any] = next(j for j in jobs if j["name"] == "node")["template"]["spec"][
        "template"
    ]
    return template


def _salt(node: object) -> None:
    """Add the marker to every metadata (annotations, labels), pod spec (containers: env,
    command, args, image) and interface entry (an extra key) found under ``node``."""
    if isinstance(node, list):
        for item in node:
            _salt(item)
        return
    if not isinstance(node, dict):
        return
    for key, value in list(node.items()):
        _salt(value)
        if key == "metadata" and isinstance(value, dict):
            value.setdefault("annotations", {})["example.com/secret"] = MARKER
            value.setdefault("labels", {})["example.com/leak"] = MARKER
            interfaces = value["annotations"].get(INTERFACES)
            if isinstance(interfaces, str) and interfaces.startswith("["):
                entries = json.loads(interfaces)
                for entry in entries:
                    if isinstance(entry, dict):
                        entry["comment"] = MARKER
                value["annotations"][INTERFACES] = json.dumps(entries)
    containers = node.get("containers")
    if isinstance(containers, list):
        for container in containers:
            container["env"] = [*container.get("env", []), {"name": "TOKEN", "value": MARKER}]
            container["command"] = ["torchrun", f"--secret={MARKER}"]
            container["args"] = [MARKER]
            container["image"] = f"registry.example.com/{MARKER}:v1"


def _salted(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the marker everywhere but in names and networks, and in an unknown field."""
    salted = copy.deepcopy(obj)
    _salt(salted)
    salted.setdefault("spec", {})[f"x-{MARKER}"] = {"value": MARKER}
    salted["spec"].setdefault("trainer", {})["env"] = [{"name": "HF_TOKEN", "value": MARKER}]
    return salted


def _with_interfaces(review: dict[str, Any], value: str) -> dict[str, Any]:
    _node_template(review["request"]["object"])["metadata"]["annotations"][INTERFACES] = value
    return review


def _secondary(network: str = "gpu-nic-{}") -> list[dict[str, str]]:
    return [{"interfaceName": f"eth{i + 1}", "network": network.format(i)} for i in range(8)]


def _adversarial_reviews() -> dict[str, dict[str, Any]]:
    primary = {"interfaceName": "eth0", "network": "default"}
    reviews = {
        "drifted runtime": _review("drifted-runtime"),
        "TrainJob with runtimePatches drift": _review("trainjob-patch-drift"),
        "not JSON": _with_interfaces(_review("good-runtime"), f"not json {MARKER}"),
        "a JSON object": _with_interfaces(_review("good-runtime"), json.dumps({"x": MARKER})),
        "a string entry": _with_interfaces(_review("good-runtime"), json.dumps([primary, MARKER])),
        "a number as network": _with_interfaces(
            _review("good-runtime"),
            json.dumps([primary, {"interfaceName": "eth1", "network": 7, "x": MARKER}]),
        ),
        "missing Networks": _with_interfaces(
            _review("good-runtime"), json.dumps([primary, *_secondary("gpu-nic-{}-missing")])
        ),
        "reserved network": _with_interfaces(
            _review("good-runtime"),
            json.dumps([primary, {"interfaceName": "eth1", "network": "pod-network"}]),
        ),
    }
    update = _review("drifted-runtime")
    update["request"]["operation"] = "UPDATE"  # from the good wiring: the full verdict
    update["request"]["oldObject"] = _salted(_review("good-runtime")["request"]["object"])
    reviews["UPDATE changing the wiring"] = update
    for review in reviews.values():
        request = review["request"]
        request["object"] = _salted(request["object"])
        request["userInfo"]["extra"] = {"example.com/token": [MARKER]}
    return reviews


@pytest.mark.parametrize("case", sorted(_adversarial_reviews()))
def test_a_denial_never_echoes_what_else_the_object_holds(live: LiveServe, case: str) -> None:
    review = _adversarial_reviews()[case]
    body = json.dumps(review).encode()
    assert body.count(MARKER.encode()) >= 8
    status, answer = _post(live, body)
    assert status == 200, answer
    response = json.loads(answer)["response"]
    assert response["allowed"] is False, response
    assert MARKER not in answer.decode(), answer
    uid = review["request"]["uid"]
    lines = [line for line in live.log_text().splitlines() if uid in line]
    assert len(lines) == 1, lines  # the one audit line of this decision
    assert MARKER not in live.log_text()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"kind": "AdmissionReview", "x": "%s"' % MARKER.encode(), id="not json"),
        pytest.param(
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"object": {"spec": MARKER}},
                }
            ).encode(),
            id="no uid",
        ),
        pytest.param(
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"uid": "u", "operation": MARKER, "object": {}},
                }
            ).encode(),
            id="bad operation",
        ),
        pytest.param(
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"uid": "u", "operation": "CREATE", "object": [MARKER]},
                }
            ).encode(),
            id="object not a map",
        ),
    ],
)
def test_a_rejected_request_never_echoes_its_body(live: LiveServe, body: bytes) -> None:
    status, answer = _post(live, body)
    assert status == 400, answer
    assert MARKER not in answer.decode()
    assert MARKER not in live.log_text()


# --- adversarial bodies over real TLS: 4xx or a verdict, never a 5xx ------------------------


def _adversarial_bodies() -> dict[str, bytes]:
    good = (EXAMPLES / "reviews" / "good-runtime.json").read_text()
    review = json.loads(good)
    deep = '{"a":' * 100_000 + "{}" + "}" * 100_000
    annotations = _node_template(review["request"]["object"])["metadata"]["annotations"]
    variants = {
        "nested arrays": b"[" * 200_000 + b"]" * 200_000,
        "nested objects in the object": json.dumps(
            {**review, "request": {**review["request"], "object": {"spec": "DEEP"}}}
        )
        .replace('"DEEP"', deep)
        .encode(),
        "invalid UTF-8": good.encode()[:200] + b"\xff\xfe" + good.encode()[200:],
        "NaN in the object": good.replace('"numNodes": 2', '"numNodes": NaN').encode(),
        "huge integer": good.replace('"numNodes": 2', '"numNodes": ' + "9" * 5000).encode(),
        "duplicate keys": good.replace(
            '"operation": "CREATE"', '"operation": "CREATE", "operation": "DELETE"'
        ).encode(),
        "NUL and BOM": b"\xef\xbb\xbf" + good.encode().replace(b"alice", b"al\\u0000ice"),
        "empty": b"",
        "null": b"null",
        "huge annotation": b"",
        "interfaces nested deeply": b"",
    }
    annotations[INTERFACES] = "[" * 100_000 + "]" * 100_000
    variants["interfaces nested deeply"] = json.dumps(review).encode()
    annotations[INTERFACES] = json.dumps([{"interfaceName": "eth0", "network": "d" * 2_000_000}])
    variants["huge annotation"] = json.dumps(review).encode()
    return variants


def test_adversarial_bodies_get_4xx_or_a_verdict_never_5xx(live: LiveServe) -> None:
    statuses = {}
    for name, body in _adversarial_bodies().items():
        status, answer = _post(live, body)
        statuses[name] = status
        assert status < 500, (name, status, answer[:300])
        if status == 200:
            assert json.loads(answer)["response"]["uid"], name
    good = (EXAMPLES / "reviews" / "good-runtime.json").read_bytes()
    assert _post(live, good)[0] == 200
    assert http_status(f"http://127.0.0.1:{live.probe_port}/healthz") == 200
    assert sorted(statuses.values())[-1] < 500, statuses


# --- the container: non-root, read-only root filesystem ------------------------------------


def _deployments(rendered: str) -> list[dict[str, Any]]:
    return [
        d
        for d in yaml.safe_load_all(rendered)
        if isinstance(d, dict) and d.get("kind") == "Deployment"
    ]


def _rendered(target: Path) -> str:
    run = subprocess.run(
        [str(KUBECTL), "kustomize", str(target)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.mark.parametrize(
    "source",
    ["manifests/base/deployment.yaml", "manifests", "manifests/overlays/cert-manager"],
)
def test_the_deployment_runs_non_root_read_only_without_privileges(source: str) -> None:
    path = ROOT / source
    text = path.read_text() if path.is_file() else _rendered(path)
    (deployment,) = _deployments(text)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod.get("hostNetwork", False) is False
    assert pod.get("hostPID", False) is False
    for container in [*pod["containers"], *pod.get("initContainers", [])]:
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context.get("privileged", False) is False
        assert context["capabilities"]["drop"] == ["ALL"]
        assert "add" not in context["capabilities"]
        # Writable only where a volume is mounted: emptyDirs, or a Secret (read-only anyway).
        volumes = {v["name"]: v for v in pod["volumes"]}
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            assert "emptyDir" in volume or "secret" in volume, volume


def test_the_image_drops_to_a_numeric_non_root_user() -> None:
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    final_stage = lines[
        max(i for i, line in enumerate(lines) if line.upper().startswith("FROM ")) :
    ]
    users = [line.split(None, 1)[1] for line in final_stage if line.upper().startswith("USER ")]
    assert users, "the final stage sets no USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit(), users  # numeric: the kubelet's runAsNonRoot check can verify it
    assert int(user) != 0, users
    assert group.isdigit(), users
    assert int(group) != 0, users
    deployment = _deployments((ROOT / "manifests/base/deployment.yaml").read_text())[0]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(user)
