"""The official client's ``Client(...)`` options beyond the service URL,
authentication and the two timeouts: which Magnetar honours, and which it
refuses by name (never silently ignored).

The TLS options apply to a ``magnetar+tls://`` URL (and its brokers):
``tls_trust_certs_file_path``, ``tls_allow_insecure_connection``,
``tls_validate_hostname`` (Pulsar's default: off) and, for mutual TLS,
``tls_certificate_file_path`` with ``tls_private_key_file_path``; given
with a plaintext URL they would do nothing, so they are refused. The C++
client's tuning knobs (threads, lookup concurrency, its stats log, its log
configuration) have nothing to act on here: giving one its default value
changes nothing and is accepted, so code written for the official client
runs unchanged; any other value raises InvalidConfiguration naming the option.
"""

from __future__ import annotations

from typing import Any

from client._connection import KEEP_ALIVE_DEFAULT_S, is_tls_url
from client.exceptions import InvalidConfiguration
from protos.tls import TlsClient, TlsConfigError

# option -> the official client's default (accepted, as it changes nothing here)
NO_EFFECT_AT_DEFAULT: dict[str, Any] = {
    "io_threads": 1,
    "message_listener_threads": 1,
    "concurrent_lookup_requests": 50000,
    "log_conf_file_path": None,
    "stats_interval_in_seconds": 600,
    "logger": None,
    "listener_name": None,
}
TLS_OPTIONS: dict[str, Any] = {
    "use_tls": False,  # the official client's no-op: the URL's scheme decides
    "tls_trust_certs_file_path": None,
    "tls_allow_insecure_connection": False,
    "tls_validate_hostname": False,
    "tls_private_key_file_path": None,
    "tls_certificate_file_path": None,
}

_WHY = {
    "listener_name": "brokers have one advertised address per protocol",
    "logger": "the SDK logs through Python's logging module (logger 'client')",
}


def _check_no_effect(options: dict[str, Any]) -> None:
    for name, value in sorted(options.items()):
        if name in TLS_OPTIONS:
            continue
        if name not in NO_EFFECT_AT_DEFAULT:
            raise InvalidConfiguration(f"Client() got an unknown option {name!r}")
        if value != NO_EFFECT_AT_DEFAULT[name]:
            why = _WHY.get(name, f"only its default, {NO_EFFECT_AT_DEFAULT[name]!r}, is accepted")
            raise InvalidConfiguration(
                f"Client({name}={value!r}) is not supported by Magnetar: {why}"
            )


def client_transport(service_url: str, options: dict[str, Any]) -> tuple[TlsClient | None, int]:
    """How the client speaks TLS (``client_tls``) and its keep-alive interval:
    ``keep_alive_interval_seconds`` (the Java client's keepAliveIntervalSeconds,
    default 30, at least 1), which the official Python client does not expose."""
    rest = dict(options)
    keep_alive = rest.pop("keep_alive_interval_seconds", KEEP_ALIVE_DEFAULT_S)
    if isinstance(keep_alive, bool) or not isinstance(keep_alive, int) or keep_alive < 1:
        raise InvalidConfiguration(
            f"Client(keep_alive_interval_seconds={keep_alive!r}): a whole number of seconds, >= 1"
        )
    return client_tls(service_url, rest), keep_alive


def client_tls(service_url: str, options: dict[str, Any]) -> TlsClient | None:
    """How the client speaks TLS (None: plaintext); InvalidConfiguration
    naming each option that would be ignored."""
    _check_no_effect(options)
    tls = {name: options.get(name, default) for name, default in TLS_OPTIONS.items()}
    if not is_tls_url(service_url):
        given = [n for n, v in tls.items() if v != TLS_OPTIONS[n]]
        if given:
            raise InvalidConfiguration(
                f"{', '.join(given)}: TLS options need a magnetar+tls:// service URL "
                f"(got {service_url!r})"
            )
        return None
    try:
        return TlsClient.from_files(
            tls["tls_trust_certs_file_path"],
            validate_hostname=bool(tls["tls_validate_hostname"]),
            allow_insecure=bool(tls["tls_allow_insecure_connection"]),
            certificate_path=tls["tls_certificate_file_path"],
            key_path=tls["tls_private_key_file_path"],
        )
    except TlsConfigError as exc:
        raise InvalidConfiguration(str(exc)) from None
