"""Namespaces on real processes: public/default is created with the
broker's default number of bundles (it used to be 4 whatever the setting),
and a namespace's topics land in those bundles."""

from __future__ import annotations

from broker.bundles import NamespaceBundles
from client import Client, InitialPosition
from client.admin import Admin


def test_public_default_gets_default_number_of_namespace_bundles(fresh_cluster, tmp_path):
    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\ndefault_number_of_namespace_bundles = 8\n")
    fresh_cluster.extra_args = ["--config", str(config)]
    cluster = fresh_cluster.start()
    expected = NamespaceBundles.equal(8)
    with Admin(cluster.service_url) as admin:
        bundles = admin.namespaces.bundles("public/default")["bundles"]
        assert [b["bundle"] for b in bundles] == [b.name for b in expected.bundles]
        with Client(cluster.service_url) as c:
            consumer = c.subscribe("ns-t", "s", initial_position=InitialPosition.Earliest)
            c.create_producer("ns-t").send(b"hello")
            assert consumer.receive(timeout_millis=10000).data() == b"hello"
        name = "persistent://public/default/ns-t"
        owned = {
            b["bundle"]
            for b in admin.namespaces.bundles("public/default")["bundles"]
            if b["state"] == "owned"
        }
        assert expected.bundle_for_topic(name).name in owned
