"""Where a broker listens, by its name in the cluster.

A broker is named by its plaintext address, or by its TLS address when it
has no plaintext port (``protos.serving.Listeners.identity``): that name is
what bundle records, lookups and load reports carry. Its load report also
says whether it has a plaintext port and where its TLS port is, so a lookup
can answer both URLs (Pulsar's ``brokerServiceUrl``/``brokerServiceUrlTls``)
and a broker's own TLS calls to another find its TLS port. What was read is
remembered for ``REMEMBER_S`` (a broker restarted on a new TLS port is
seen again within that), at most ``MAX_REMEMBERED`` brokers. A broker with
no load report (not registered, or gone) is SERVICE_NOT_READY: the lookup
is tried again, and by then its bundles have moved or it has registered.
"""

from __future__ import annotations

import json
import time

from broker.errors import BrokerError
from metastore.client import MetastoreClient
from protos import common_pb2, metadata_paths
from protos.serving import Listeners

MAX_REMEMBERED = 1000  # brokers; a cluster has far fewer
REMEMBER_S = 10.0


class BrokerAddresses:
    def __init__(self, metastore: MetastoreClient, own: Listeners) -> None:
        self.metastore = metastore
        self.own = own
        self._known: dict[str, tuple[Listeners, float]] = {}  # broker -> (ports, read at)

    async def of(self, broker: str) -> Listeners:
        if broker == self.own.identity:
            return self.own
        now = time.monotonic()
        known = self._known.get(broker)
        if known is not None and now - known[1] < REMEMBER_S:
            return known[0]
        stat = await self.metastore.get(metadata_paths.broker_load(broker))
        if stat is None:
            raise BrokerError(
                f"broker {broker} is not registered (yet, or any more)",
                common_pb2.SERVICE_NOT_READY,
            )
        report = json.loads(stat.value)
        plaintext = bool(report.get("plaintext", True))
        found = Listeners(
            plain=broker if plaintext else "", tls=str(report.get("address_tls") or "")
        )
        if len(self._known) >= MAX_REMEMBERED:
            self._known.clear()
        self._known[broker] = (found, now)
        return found
