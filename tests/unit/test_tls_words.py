"""What a failed TLS connection is called (protos/tls.py): the words a
user reads instead of gRPC's UNAVAILABLE, and the name a certificate is
for (what a channel expects when names are not checked)."""

from __future__ import annotations

import ssl

from cryptography.hazmat.primitives import serialization

from broker.secure_setup import make_ca, make_certificate
from protos.tls import _name_in, describe


def _der(dns: list[str], ips: list[str]) -> bytes:
    ca_key, ca = make_ca("test CA")
    _, cert = make_certificate(ca_key, ca, "common", dns, ips)
    return cert.public_bytes(serialization.Encoding.DER)


def test_the_expected_name_is_the_first_dns_name_else_an_ip_else_the_common_name():
    assert _name_in(_der(["b.example", "c.example"], ["10.0.0.1"])) == "b.example"
    assert _name_in(_der([], ["10.0.0.1"])) == "10.0.0.1"


def test_failures_are_named_for_people():
    untrusted = ssl.SSLCertVerificationError(1, "certificate verify failed")
    untrusted.verify_message = "unable to get local issuer certificate"
    assert "not trusted (unable to get local issuer certificate)" in describe(untrusted, "h:1")
    wrong = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    assert "does not speak TLS" in describe(wrong, "h:1")
    assert "did not complete a TLS handshake" in describe(TimeoutError(), "h:1")
    assert "cannot connect to h:1" in describe(ConnectionRefusedError("refused"), "h:1")
