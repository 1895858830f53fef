"""Who is who in a metastore cluster: this node's addresses and every
node's client address, from the ``node_id`` and ``peers`` settings.

Membership is static. Each peer entry gives a node's client (gRPC) and Raft
ports, ``ID=HOST:CLIENT_PORT:RAFT_PORT``, so a follower can name the
leader's client address when it answers NOT_LEADER (Raft only knows the
leader's Raft address). Empty ``peers`` is a one-node cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from metastore.settings import MetastoreSettings
from protos.serving import advertised


@dataclass(frozen=True)
class ClusterLayout:
    """Who is who: this node's addresses and every node's client address."""

    node_id: str
    client_address: str
    raft_address: str
    partners: list[str]
    client_of_raft: dict[str, str]

    @classmethod
    def from_settings(cls, s: MetastoreSettings, port: int, raft_port: int) -> ClusterLayout:
        if not s.peers.strip():
            host = advertised(s.bind_address or "127.0.0.1", s.advertised_address)
            client, raft = f"{host}:{port}", f"{host}:{raft_port}"
            return cls(s.node_id or "1", client, raft, [], {raft: client})
        nodes: dict[str, tuple[str, str]] = {}
        for part in s.peers.split(","):
            part = part.strip()
            if not part:
                continue
            node_id, sep, addr = part.partition("=")
            pieces = addr.rsplit(":", 2)
            if not sep or len(pieces) != 3 or not all(p.isdigit() for p in pieces[1:]):
                raise ValueError(f"peer {part!r}: expected ID=HOST:CLIENT_PORT:RAFT_PORT")
            host, cport, rport = pieces
            nodes[node_id.strip()] = (f"{host}:{cport}", f"{host}:{rport}")
        if s.node_id not in nodes:
            raise ValueError(f"node_id {s.node_id!r} is not one of the peers {sorted(nodes)}")
        client, raft = nodes[s.node_id]
        host = client.rsplit(":", 1)[0]
        if s.advertised_address and s.advertised_address != host:
            raise ValueError(
                f"advertised_address {s.advertised_address!r} differs from node {s.node_id}'s "
                f"host {host!r} in peers; peers decide it (leave advertised_address empty)"
            )
        return cls(
            s.node_id,
            client,
            raft,
            [r for i, (_, r) in nodes.items() if i != s.node_id],
            {r: c for c, r in nodes.values()},
        )
