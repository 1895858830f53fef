"""Established connections to a local port, asked of the kernel
(broker/tcp_connections.py): what pulsar_active_connections counts."""

from __future__ import annotations

import socket

import pytest

from broker import tcp_connections


@pytest.mark.parametrize("ask", [tcp_connections.established_peers, tcp_connections._proc])
def test_each_established_connection_to_the_port_is_seen_once(ask):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    other = socket.socket()  # a listener on another port, with a client of its own
    other.bind(("127.0.0.1", 0))
    other.listen(1)
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    stranger = socket.create_connection(("127.0.0.1", other.getsockname()[1]))
    accepted = [server.accept()[0] for _ in range(3)]
    try:
        seen = ask(port)
        assert len(seen) == 3
        clients[0].close()
        accepted[0].close()
        assert len(ask(port)) == 2  # the closed one is gone (no longer ESTABLISHED)
        assert ask(other.getsockname()[1]) and not ask(1)  # only the port asked about
    finally:
        for s in [*clients, *accepted, stranger, server, other]:
            s.close()
