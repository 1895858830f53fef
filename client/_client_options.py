"""The official client's ``Client(...)`` options beyond the service URL,
authentication and the two timeouts: which Magnetar honours, and which it
refuses by name (never silently ignored).

The C++ client's tuning knobs (threads, lookup concurrency, its stats log,
its log configuration) have nothing to act on here: giving one its default
value changes nothing and is accepted, so code written for the official
client runs unchanged; any other value raises InvalidConfiguration naming
the option. TLS is not available yet: its options raise unless off.
"""

from __future__ import annotations

from typing import Any

from client.exceptions import InvalidConfiguration

# option -> the official client's default (accepted, as it changes nothing here)
NO_EFFECT_AT_DEFAULT: dict[str, Any] = {
    "io_threads": 1,
    "message_listener_threads": 1,
    "concurrent_lookup_requests": 50000,
    "log_conf_file_path": None,
    "stats_interval_in_seconds": 600,
    "logger": None,
    "listener_name": None,
    "use_tls": False,
    "tls_trust_certs_file_path": None,
    "tls_allow_insecure_connection": False,
    "tls_validate_hostname": False,
    "tls_private_key_file_path": None,
    "tls_certificate_file_path": None,
}

_WHY = {
    "use_tls": "the service URL decides TLS (magnetar+tls://), and TLS is not available yet",
    "listener_name": "brokers have one advertised address each",
    "logger": "the SDK logs through Python's logging module (logger 'client')",
}


def check_client_options(options: dict[str, Any]) -> None:
    """InvalidConfiguration naming each option that would be ignored."""
    for name, value in sorted(options.items()):
        if name not in NO_EFFECT_AT_DEFAULT:
            raise InvalidConfiguration(f"Client() got an unknown option {name!r}")
        if value != NO_EFFECT_AT_DEFAULT[name]:
            why = _WHY.get(name)
            if why is None and name.startswith("tls_"):
                why = "TLS is not available yet"
            raise InvalidConfiguration(
                f"Client({name}={value!r}) is not supported by Magnetar"
                + (f": {why}" if why else f" (only its default, {NO_EFFECT_AT_DEFAULT[name]!r})")
            )
