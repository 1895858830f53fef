"""Where a broker listens, by its name in the cluster.

A broker is named by its plaintext address, or by its TLS address when it
has no plaintext port (``protos.serving.Listeners.identity``): that name is
what bundle records, lookups and load reports carry. Its load report also
says whether it has a plaintext port and where its TLS port is, so a lookup
can answer both URLs (Pulsar's ``brokerServiceUrl``/``brokerServiceUrlTls``)
and a broker's own TLS calls to another find its TLS port. What was read is
remembered (a broker's ports do not change while it runs), at most
``MAX_REMEMBERED`` brokers; a broker gone from the registry is answered as
a plaintext one with no TLS port, and read again next time.
"""

from __future__ import annotations

import json

from metastore.client import MetastoreClient
from protos import metadata_paths
from protos.serving import Listeners

MAX_REMEMBERED = 1000  # brokers; a cluster has far fewer


class BrokerAddresses:
    def __init__(self, metastore: MetastoreClient, own: Listeners) -> None:
        self.metastore = metastore
        self._known: dict[str, Listeners] = {own.identity: own}

    async def of(self, broker: str) -> Listeners:
        known = self._known.get(broker)
        if known is not None:
            return known
        stat = await self.metastore.get(metadata_paths.broker_load(broker))
        if stat is None:
            return Listeners(plain=broker)  # not registered (now): the name is all there is
        report = json.loads(stat.value)
        plaintext = bool(report.get("plaintext", True))
        found = Listeners(
            plain=broker if plaintext else "", tls=str(report.get("address_tls") or "")
        )
        if len(self._known) >= MAX_REMEMBERED:
            self._known.clear()
        self._known[broker] = found
        return found
