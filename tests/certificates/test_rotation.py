"""Tests for app.certificates.rotation: every rule of the plan, over time, and verification."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from app.certificates.rotation import (
    BUNDLE,
    CA_CERT,
    CA_KEY,
    LEAF_CERT,
    LEAF_KEY,
    NEXT_CERT,
    NEXT_KEY,
    Lifetimes,
    Plan,
    plan_rotation,
    verifies,
)

SVC = "nicguard.nicguard-system.svc"
HOSTS = (SVC, "nicguard.nicguard-system")
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CA_LIFE, LEAF_LIFE = timedelta(seconds=240), timedelta(seconds=90)
LIFETIMES = Lifetimes(ca=CA_LIFE, leaf=LEAF_LIFE)

Data = Mapping[str, bytes]
Change = Callable[[dict[str, bytes], dict[str, bytes]], dict[str, bytes]]


def plan(
    data: Data | None,
    bundles: Sequence[bytes] = (),
    *,
    at: float = 0.0,
    hosts: Sequence[str] = HOSTS,
) -> Plan:
    """The plan ``at`` seconds after T0."""
    return plan_rotation(
        data, bundles, hosts=hosts, lifetimes=LIFETIMES, now=T0 + timedelta(seconds=at)
    )


def written(result: Plan) -> dict[str, bytes]:
    assert result.data is not None, result.actions
    return dict(result.data)


def cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def bundle_of(pem: bytes) -> list[str]:
    """Fingerprints of a PEM bundle, in order."""
    return [c.fingerprint(hashes.SHA256()).hex() for c in x509.load_pem_x509_certificates(pem)]


def fp(pem: bytes) -> str:
    return cert(pem).fingerprint(hashes.SHA256()).hex()


def issued_by(leaf: bytes, ca: bytes) -> bool:
    try:
        cert(leaf).verify_directly_issued_by(cert(ca))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


@pytest.fixture
def first() -> dict[str, bytes]:
    return written(plan(None))


# --- a new Secret --------------------------------------------------------------------------


def test_no_secret_gets_a_ca_a_leaf_and_a_bundle_of_that_ca() -> None:
    result = plan(None)
    data = written(result)
    assert set(data) == {CA_CERT, CA_KEY, LEAF_CERT, LEAF_KEY, BUNDLE}
    assert bundle_of(result.bundle) == [fp(data[CA_CERT])] == bundle_of(data[BUNDLE])
    assert issued_by(data[LEAF_CERT], data[CA_CERT])
    assert result.actions[0] == "issued a new CA: no Secret"
    leaf = cert(data[LEAF_CERT])
    assert leaf.not_valid_after_utc == T0 + LEAF_LIFE
    assert cert(data[CA_CERT]).not_valid_after_utc == T0 + CA_LIFE
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(n.value) for n in names} == {*HOSTS, "localhost", "127.0.0.1"}
    assert not result.patch_webhooks  # no webhook configuration: nothing to patch


def test_a_settled_secret_needs_nothing(first: dict[str, bytes]) -> None:
    result = plan(first, [first[BUNDLE]], at=30)
    assert (result.data, result.patch_webhooks, result.actions) == (None, False, ())
    assert result.bundle == first[BUNDLE]


@pytest.mark.parametrize("webhook_bundle", [b"", b"garbage", b"-----BEGIN CERTIFICATE-----\n"])
def test_a_webhook_without_our_ca_is_patched(
    first: dict[str, bytes], webhook_bundle: bytes
) -> None:
    result = plan(first, [first[BUNDLE], webhook_bundle], at=1)
    assert result.data is None
    assert result.patch_webhooks


def test_unusable_data_starts_over(first: dict[str, bytes]) -> None:
    broken = {**first, CA_KEY: b"not a key", "extra": b"x"}
    result = plan(broken, at=1)
    data = written(result)
    assert "issued a new CA: none usable" in result.actions
    assert fp(data[CA_CERT]) != fp(first[CA_CERT])
    assert "extra" not in data
    assert issued_by(data[LEAF_CERT], data[CA_CERT])


def test_a_mismatched_ca_key_is_unusable(first: dict[str, bytes]) -> None:
    other = written(plan(None))
    assert "issued a new CA: none usable" in plan({**first, CA_KEY: other[CA_KEY]}).actions


# --- the serving certificate ---------------------------------------------------------------


def test_the_leaf_is_renewed_at_two_thirds_of_its_lifetime(first: dict[str, bytes]) -> None:
    assert plan(first, [first[BUNDLE]], at=59).data is None
    result = plan(first, [first[BUNDLE]], at=60)
    data = written(result)
    assert result.actions == ("issued a new serving certificate (past 2/3 of its lifetime)",)
    assert data[CA_CERT] == first[CA_CERT]
    assert data[BUNDLE] == first[BUNDLE]
    assert data[LEAF_CERT] != first[LEAF_CERT]
    assert issued_by(data[LEAF_CERT], data[CA_CERT])
    assert not result.patch_webhooks


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d, o: {**d, LEAF_KEY: o[LEAF_KEY]}, "missing or not a matching ECDSA pair"),
        (lambda d, o: {k: v for k, v in d.items() if k != LEAF_CERT}, "missing or not"),
        (lambda d, o: {**d, LEAF_CERT: o[LEAF_CERT], LEAF_KEY: o[LEAF_KEY]}, "not issued by"),
    ],
    ids=["key-mismatch", "missing", "other-ca"],
)
def test_a_bad_leaf_is_reissued_from_the_current_ca(
    first: dict[str, bytes], change: Change, problem: str
) -> None:
    other = written(plan(None))
    result = plan(change(first, other), [first[BUNDLE]], at=1)
    data = written(result)
    assert any(problem in action for action in result.actions), result.actions
    assert data[CA_CERT] == first[CA_CERT]
    assert issued_by(data[LEAF_CERT], first[CA_CERT])


def test_a_leaf_lacking_a_host_is_reissued(first: dict[str, bytes]) -> None:
    result = plan(first, [first[BUNDLE]], at=1, hosts=(*HOSTS, "nicguard.example.com"))
    assert result.actions == (
        "issued a new serving certificate (not valid for nicguard.example.com)",
    )


def test_the_leaf_never_outlives_its_ca(first: dict[str, bytes]) -> None:
    data = written(plan(first, [first[BUNDLE]], at=150))  # leaf due at 60; CA not due until 160
    assert cert(data[LEAF_CERT]).not_valid_after_utc == T0 + CA_LIFE


# --- the CA, in two phases -----------------------------------------------------------------


def test_phase_one_adds_the_next_ca_and_keeps_serving_the_old_leaf(
    first: dict[str, bytes],
) -> None:
    current = written(plan(first, [first[BUNDLE]], at=150))  # a fresh leaf, so only the CA is due
    result = plan(current, [current[BUNDLE]], at=160)
    data = written(result)
    assert result.actions == ("generated the next CA: the current CA is past 2/3 of its lifetime",)
    assert data[LEAF_CERT] == current[LEAF_CERT]
    assert data[CA_CERT] == current[CA_CERT]
    assert bundle_of(result.bundle) == [fp(data[NEXT_CERT]), fp(data[CA_CERT])]
    assert result.patch_webhooks
    assert cert(data[NEXT_CERT]).not_valid_after_utc == T0 + timedelta(seconds=160) + CA_LIFE


def test_phase_two_waits_until_every_webhook_trusts_the_next_ca(first: dict[str, bytes]) -> None:
    phase_one = written(plan(first, [first[BUNDLE]], at=160))
    stale = plan(phase_one, [phase_one[BUNDLE], first[BUNDLE]], at=161)
    assert stale.data is None
    assert stale.patch_webhooks
    result = plan(phase_one, [phase_one[BUNDLE], phase_one[BUNDLE]], at=161)
    data = written(result)
    assert result.actions[0] == "promoted the next CA: every webhook trusts it"
    assert data[CA_CERT] == phase_one[NEXT_CERT]
    assert data[CA_KEY] == phase_one[NEXT_KEY]
    assert NEXT_CERT not in data
    assert NEXT_KEY not in data
    assert issued_by(data[LEAF_CERT], data[CA_CERT])
    assert bundle_of(data[BUNDLE]) == bundle_of(phase_one[BUNDLE])  # the old CA stays trusted
    assert not result.patch_webhooks


def test_without_a_webhook_configuration_phase_two_follows_at_once(
    first: dict[str, bytes],
) -> None:
    phase_one = written(plan(first, at=160))
    assert "promoted the next CA: every webhook trusts it" in plan(phase_one, at=161).actions


def test_an_expired_ca_leaves_the_bundle(first: dict[str, bytes]) -> None:
    phase_one = written(plan(first, [first[BUNDLE]], at=160))
    phase_two = written(plan(phase_one, [phase_one[BUNDLE]], at=161))
    result = plan(phase_two, [phase_two[BUNDLE]], at=240)
    assert "pruned 1 expired CA(s) from the bundle" in result.actions
    assert bundle_of(result.bundle) == [fp(phase_two[CA_CERT])]
    assert result.patch_webhooks


def test_a_ca_that_expired_unrotated_is_replaced(first: dict[str, bytes]) -> None:
    result = plan(first, [first[BUNDLE]], at=240)
    data = written(result)
    assert "issued a new CA: none usable" in result.actions
    assert bundle_of(data[BUNDLE]) == [fp(data[CA_CERT])]


def test_an_unusable_next_ca_is_dropped_and_regenerated(first: dict[str, bytes]) -> None:
    phase_one = written(plan(first, [first[BUNDLE]], at=160))
    result = plan({**phase_one, NEXT_KEY: first[CA_KEY]}, [phase_one[BUNDLE]], at=161)
    data = written(result)
    assert result.actions[:2] == (
        "dropped the unusable next CA",
        "generated the next CA: the current CA is past 2/3 of its lifetime",
    )
    assert data[NEXT_CERT] != phase_one[NEXT_CERT]


def test_the_next_ca_takes_over_when_the_current_one_is_unusable(first: dict[str, bytes]) -> None:
    phase_one = written(plan(first, [first[BUNDLE]], at=160))
    result = plan({**phase_one, CA_KEY: b""}, [first[BUNDLE]], at=161)
    assert result.actions[0] == "promoted the next CA: the current CA is unusable"
    assert written(result)[CA_CERT] == phase_one[NEXT_CERT]


# --- over time: the apiserver always trusts what any replica serves -------------------------


def test_every_served_leaf_verifies_against_the_webhook_bundle_over_three_ca_lifetimes() -> None:
    """Each second the writer plans and patches the bundle; a replica may still serve the last
    leaf, and may install the new one before the apiserver sees the patch."""
    data: dict[str, bytes] = {}
    webhook = b""
    leaves, cas = set(), set()
    for second in range(3 * 240):
        now = T0 + timedelta(seconds=second)
        result = plan_rotation(data or None, [webhook], hosts=HOSTS, lifetimes=LIFETIMES, now=now)
        new = dict(result.data or data)
        for trusted in [webhook, result.bundle] if data else [result.bundle]:
            for leaf in {data.get(LEAF_CERT, new[LEAF_CERT]), new[LEAF_CERT]}:
                assert verifies(leaf, trusted, SVC, now), (second, result.actions)
        data, webhook = new, result.bundle
        leaves.add(data[LEAF_CERT])
        cas.add(data[CA_CERT])
    assert len(cas) == 5  # rotated at 160, 320, 480 and 640 s
    assert len(leaves) >= 12


# --- verification --------------------------------------------------------------------------


def test_verifies_checks_chain_host_and_time(first: dict[str, bytes]) -> None:
    other = written(plan(None))
    leaf, bundle = first[LEAF_CERT], first[BUNDLE]
    assert verifies(leaf, bundle, SVC, T0)
    assert verifies(leaf, bundle, "127.0.0.1", T0)
    assert not verifies(leaf, bundle, "elsewhere.svc", T0)
    assert not verifies(leaf, other[BUNDLE], SVC, T0)
    assert verifies(leaf, other[BUNDLE] + bundle, SVC, T0)
    assert not verifies(leaf, bundle, SVC, T0 + LEAF_LIFE + timedelta(seconds=1))
    assert not verifies(leaf, b"", SVC, T0)
    assert not verifies(b"garbage", bundle, SVC, T0)


# --- what else a Secret may hold ---------------------------------------------------------------


def self_signed(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, *, ca: bool) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "someone-else")])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(T0 - timedelta(hours=1))
        .not_valid_after(T0 + timedelta(days=1))
    )
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def key_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.mark.parametrize("kind", ["rsa", "not-a-ca"])
def test_an_authority_we_cannot_sign_with_is_replaced(first: dict[str, bytes], kind: str) -> None:
    if kind == "rsa":
        key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey = rsa.generate_private_key(65537, 2048)
    else:
        key = ec.generate_private_key(ec.SECP256R1())
    foreign = {**first, CA_CERT: self_signed(key, ca=kind == "rsa"), CA_KEY: key_pem(key)}
    assert "issued a new CA: none usable" in plan(foreign, at=1).actions


def test_a_leaf_without_subject_alt_names_is_reissued(first: dict[str, bytes]) -> None:
    ca_key = serialization.load_pem_private_key(first[CA_KEY], password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    bare = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SVC)]))
        .issuer_name(cert(first[CA_CERT]).subject)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(T0 - timedelta(minutes=5))
        .not_valid_after(T0 + LEAF_LIFE)
        .sign(ca_key, hashes.SHA256())
        .public_bytes(serialization.Encoding.PEM)
    )
    result = plan({**first, LEAF_CERT: bare, LEAF_KEY: key_pem(key)}, at=1)
    assert result.actions == ("issued a new serving certificate (no subjectAltName)",)


def test_an_expired_leaf_is_reissued(first: dict[str, bytes]) -> None:
    result = plan(first, [first[BUNDLE]], at=100)
    assert result.actions == ("issued a new serving certificate (expired or not yet valid)",)


def test_an_untidy_secret_is_rewritten_in_canonical_form(first: dict[str, bytes]) -> None:
    result = plan({**first, BUNDLE: first[BUNDLE] + b"\n"}, [first[BUNDLE]], at=1)
    assert result.actions == ("rewrote the Secret's data in canonical form",)
    assert written(result) == first
