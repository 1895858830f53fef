"""The official client's Client() options: accepted where they change
nothing, refused by name where Magnetar would ignore them (issue 23, point 5)."""

from __future__ import annotations

import asyncio

import pytest

from client import AuthenticationToken, Client
from client.exceptions import InvalidConfiguration

URL = "magnetar://127.0.0.1:1"


def test_the_official_clients_defaults_are_accepted():
    Client(
        URL,
        io_threads=1,
        message_listener_threads=1,
        concurrent_lookup_requests=50000,
        stats_interval_in_seconds=600,
        use_tls=False,
        tls_allow_insecure_connection=False,
        tls_validate_hostname=False,
        tls_trust_certs_file_path=None,
    ).close()


@pytest.mark.parametrize(
    "option, value",
    [
        ("io_threads", 4),
        ("use_tls", True),
        ("tls_trust_certs_file_path", "/etc/ca.pem"),
        ("tls_allow_insecure_connection", True),
        ("tls_validate_hostname", True),
        ("tls_certificate_file_path", "/etc/c.pem"),
        ("listener_name", "external"),
        ("no_such_option", 1),
    ],
)
def test_an_option_magnetar_would_ignore_is_refused_by_name(option, value):
    with pytest.raises(InvalidConfiguration, match=option):
        Client(URL, **{option: value})


@pytest.mark.parametrize("authentication", ["a-token-string", object(), 42])
def test_only_token_authentication_is_taken(authentication):
    with pytest.raises(InvalidConfiguration, match="AuthenticationToken"):
        Client(URL, authentication=authentication)


@pytest.mark.parametrize("token", ["", "   ", None, 5])
def test_an_empty_token_is_refused(token):
    with pytest.raises(ValueError):
        AuthenticationToken(token)


def test_a_token_file_is_read_again_when_it_changes(tmp_path):
    path = tmp_path / "token"
    path.write_text("first\n")
    supplier = AuthenticationToken(f"file://{path}").supplier()
    assert supplier() == "first"
    path.write_text("second-and-longer\n")
    assert supplier() == "second-and-longer"
    with pytest.raises(InvalidConfiguration, match="cannot read"):
        AuthenticationToken(f"file://{tmp_path / 'missing'}")


def test_tls_options_go_with_a_tls_url(tmp_path):
    from broker.secure_setup import make_ca, pem

    _, ca = make_ca("test CA")
    (tmp_path / "ca.pem").write_bytes(pem(ca))
    Client(
        "magnetar+tls://127.0.0.1:1",
        tls_trust_certs_file_path=str(tmp_path / "ca.pem"),
        tls_validate_hostname=True,
        use_tls=True,
    ).close()
    with pytest.raises(InvalidConfiguration, match="not PEM"):
        Client("magnetar+tls://127.0.0.1:1", tls_trust_certs_file_path=__file__)
    with pytest.raises(InvalidConfiguration, match=r"missing\.pem"):
        Client(
            "magnetar+tls://127.0.0.1:1", tls_trust_certs_file_path=str(tmp_path / "missing.pem")
        )
    with pytest.raises(InvalidConfiguration, match="needs its key"):
        Client("magnetar+tls://127.0.0.1:1", tls_certificate_file_path=str(tmp_path / "ca.pem"))


@pytest.mark.parametrize("value", [0, -5, 2.5, "30", True])
def test_a_keep_alive_that_is_not_a_whole_positive_second_is_refused(value):
    with pytest.raises(InvalidConfiguration, match="keep_alive_interval_seconds"):
        Client(URL, keep_alive_interval_seconds=value)


def test_the_keep_alive_reaches_every_channel_the_client_opens():
    from client._connection import Connections

    async def options() -> dict:
        pool = Connections(["127.0.0.1:1"], 1000, 1.0, None, None, 7)
        try:
            return dict(pool.get("127.0.0.1:1").options)
        finally:
            await pool.close()

    got = asyncio.run(options())
    assert got["grpc.keepalive_time_ms"] == 7000
    assert got["grpc.keepalive_timeout_ms"] == 7000
