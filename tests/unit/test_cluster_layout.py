import socket
from dataclasses import replace

import pytest

from metastore.cluster_layout import ClusterLayout
from metastore.settings import MetastoreSettings

PEERS = "1=h1:2379:2380, 2=h2:2479:2480,3=h3:2579:2580"


def test_a_node_finds_itself_and_its_partners_in_the_peer_list():
    layout = ClusterLayout.from_settings(MetastoreSettings(node_id="2", peers=PEERS), 0, 0)
    assert (layout.node_id, layout.client_address, layout.raft_address) == (
        "2",
        "h2:2479",
        "h2:2480",
    )
    assert layout.partners == ["h1:2380", "h3:2580"]
    # A follower names the leader's client address from its Raft address.
    assert layout.client_of_raft == {
        "h1:2380": "h1:2379",
        "h2:2480": "h2:2479",
        "h3:2580": "h3:2579",
    }


def test_no_peers_is_a_one_node_cluster_on_the_given_ports():
    layout = ClusterLayout.from_settings(
        MetastoreSettings(bind_address="127.0.0.1", peers=""), 7000, 7001
    )
    assert layout.client_address == "127.0.0.1:7000" and layout.raft_address == "127.0.0.1:7001"
    assert layout.partners == [] and layout.client_of_raft == {"127.0.0.1:7001": "127.0.0.1:7000"}


@pytest.mark.parametrize(
    ("node_id", "peers", "message"),
    [
        ("1", "1=h1:2379", "expected ID=HOST:CLIENT_PORT:RAFT_PORT"),
        ("1", "1=h1:x:2380", "expected ID=HOST:CLIENT_PORT:RAFT_PORT"),
        ("1", "h1:2379:2380", "expected ID=HOST:CLIENT_PORT:RAFT_PORT"),
        ("4", PEERS, "node_id '4' is not one of the peers"),
    ],
)
def test_a_bad_peer_list_is_refused_with_what_was_expected(node_id, peers, message):
    with pytest.raises(ValueError, match=message):
        ClusterLayout.from_settings(MetastoreSettings(node_id=node_id, peers=peers), 0, 0)


def test_a_node_bound_to_every_interface_advertises_its_advertised_address_or_host_name():
    named = MetastoreSettings(bind_address="0.0.0.0", advertised_address="meta-0.meta")
    layout = ClusterLayout.from_settings(named, 2379, 2380)
    assert (layout.client_address, layout.raft_address) == ("meta-0.meta:2379", "meta-0.meta:2380")
    layout = ClusterLayout.from_settings(MetastoreSettings(bind_address="0.0.0.0"), 2379, 2380)
    assert layout.client_address == f"{socket.gethostname()}:2379"


def test_peers_decide_a_node_s_advertised_host_and_a_different_one_is_refused():
    same = MetastoreSettings(node_id="2", peers=PEERS, advertised_address="h2")
    assert ClusterLayout.from_settings(same, 0, 0).client_address == "h2:2479"
    with pytest.raises(ValueError, match="advertised_address 'h9' differs"):
        ClusterLayout.from_settings(replace(same, advertised_address="h9"), 0, 0)


def test_a_metastore_of_a_cluster_listens_where_its_peers_look_for_it_unless_told_otherwise():
    from metastore.process_setup import ports_of as _ports

    _, bind, port, raft_port = _ports(MetastoreSettings(node_id="2", peers=PEERS))
    assert (bind, port, raft_port) == ("h2", 2479, 2480)
    told = MetastoreSettings(node_id="2", peers=PEERS, bind_address="0.0.0.0")
    assert _ports(told)[1] == "0.0.0.0"
    one_node = MetastoreSettings(port=7000, raft_port=7001)
    assert _ports(one_node)[1:] == ("127.0.0.1", 7000, 7001)
