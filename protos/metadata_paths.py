"""Every key of the metastore layout (DESIGN §3), in one place.

Brokers and bookies share one key space; its shape is part of the contract
between processes, so it lives here beside the other shared value types and
no module spells a key out itself. Namespaces are ``tenant/ns`` strings;
topics are :class:`~protos.topic_name.TopicName` values.

::

    /admin/tenants/{tenant}                                  tenant info
    /admin/policies/{tenant}/{ns}                            namespace policies
    /admin/topic-policies/{tenant}/{ns}/{domain}/{topic}     a topic's policy overrides
    /admin/partitioned-topics/{tenant}/{ns}/{domain}/{topic} partition count
    /namespace/{tenant}/{ns}/{0xLOWER_0xUPPER}               bundle record
    /managed-ledgers/{tenant}/{ns}/{domain}/{topic}          a topic's ledger list
    /managed-ledgers/{tenant}/{ns}/{domain}/{topic}/{cursor} a subscription's cursor
    /ledgers/{ledger_id}                                     ledger metadata
    /ledgers/id-counter                                      ledger id allocation
    /bookies/available/{bookie_id}                           a live bookie (ephemeral)
    /bookies/cookies/{bookie_id}                             a bookie's identity cookie
    /bookies/retiring/{bookie_id}                            a bookie being decommissioned or recovered
    /underreplication/auditor                                the AutoRecovery auditor (ephemeral)
    /underreplication/ledgers/{ledger_id}                    an under-replicated ledger's task
    /underreplication/locks/{ledger_id}                      a replication worker's lock on it (ephemeral)
    /loadbalance/leader                                      the load manager leader (ephemeral)
    /loadbalance/brokers/{broker}                            a broker's load report (ephemeral)
    /loadbalance/bundle-data/{tenant}/{ns}/{bundle}          a bundle's long-term load
    /dedup/{tenant}/{ns}/{domain}/{topic}                    deduplication snapshot
    /terminated/{tenant}/{ns}/{domain}/{topic}               a terminated topic's last position
    /schemas/{tenant}/{ns}/{domain}/{topic}/{version}        a topic's schema versions
    /compaction/{tenant}/{ns}/{domain}/{topic}               a topic's compacted ledger and horizon
"""

from __future__ import annotations

from protos.topic_name import TopicName

TENANTS = "/admin/tenants"
POLICIES = "/admin/policies"
TOPIC_POLICIES = "/admin/topic-policies"
PARTITIONED_TOPICS = "/admin/partitioned-topics"
BUNDLES = "/namespace/"
MANAGED_LEDGERS = "/managed-ledgers"
LEDGERS = "/ledgers"
LEDGER_ID_COUNTER = "/ledgers/id-counter"
BOOKIES_AVAILABLE = "/bookies/available"
BOOKIE_COOKIES = "/bookies/cookies"
BOOKIES_RETIRING = "/bookies/retiring"
AUDITOR = "/underreplication/auditor"
UNDER_REPLICATED = "/underreplication/ledgers"
REPLICATION_LOCKS = "/underreplication/locks"
LOAD_BALANCE_LEADER = "/loadbalance/leader"
BROKER_LOADS = "/loadbalance/brokers/"
BUNDLE_DATA = "/loadbalance/bundle-data/"
DEDUP = "/dedup"
TERMINATED = "/terminated"
SCHEMAS = "/schemas"
COMPACTION = "/compaction"


def tenant(name: str) -> str:
    return f"{TENANTS}/{name}"


def namespace_policies(namespace: str) -> str:
    """``namespace`` is ``tenant/ns``."""
    return f"{POLICIES}/{namespace}"


def namespaces_of(tenant: str) -> str:
    """The parent of a tenant's namespace policies (list its children)."""
    return f"{POLICIES}/{tenant}"


def topic_policies(name: TopicName) -> str:
    return f"{TOPIC_POLICIES}/{name.persistence_path}"


def topic_of_policies_key(key: str) -> TopicName | None:
    """The topic of a ``/admin/topic-policies/t/ns/domain/topic`` key (None
    for any other key)."""
    if not key.startswith(TOPIC_POLICIES + "/"):
        return None
    parts = key.removeprefix(TOPIC_POLICIES + "/").split("/", 3)
    if len(parts) != 4:
        return None
    tenant, ns, domain, local = parts
    try:
        return TopicName.parse(f"{domain}://{tenant}/{ns}/{local}")
    except ValueError:
        return None


def partitioned_topic(name: TopicName) -> str:
    return f"{PARTITIONED_TOPICS}/{name.persistence_path}"


def partitioned_topics_of(namespace: str, domain: str) -> str:
    """The parent of a namespace's partitioned topics of one domain (list its children)."""
    return f"{PARTITIONED_TOPICS}/{namespace}/{domain}"


def bundle(namespace: str, bundle_name: str) -> str:
    """The record of one bundle (``0xLOWER_0xUPPER``) of ``namespace``."""
    return f"{BUNDLES}{namespace}/{bundle_name}"


def bundles_of(namespace: str) -> str:
    """The parent of a namespace's bundle records (list its children)."""
    return f"{BUNDLES}{namespace}"


def bundle_path(key: str) -> str:
    """``tenant/ns/0xLOWER_0xUPPER`` of a bundle record's key (load reports name bundles so)."""
    return key.removeprefix(BUNDLES)


def managed_ledger(name: TopicName) -> str:
    return f"{MANAGED_LEDGERS}/{name.persistence_path}"


def managed_ledgers_of(namespace: str, domain: str) -> str:
    """The parent of a namespace's managed ledgers of one domain (list its children)."""
    return f"{MANAGED_LEDGERS}/{namespace}/{domain}"


def cursor(name: TopicName, subscription: str) -> str:
    return f"{managed_ledger(name)}/{subscription}"


def ledger(ledger_id: int) -> str:
    return f"{LEDGERS}/{ledger_id}"


def bookie_available(bookie_id: str) -> str:
    return f"{BOOKIES_AVAILABLE}/{bookie_id}"


def bookie_cookie(bookie_id: str) -> str:
    return f"{BOOKIE_COOKIES}/{bookie_id}"


def bookie_retiring(bookie_id: str) -> str:
    return f"{BOOKIES_RETIRING}/{bookie_id}"


def under_replicated(ledger_id: int) -> str:
    return f"{UNDER_REPLICATED}/{ledger_id}"


def replication_lock(ledger_id: int) -> str:
    return f"{REPLICATION_LOCKS}/{ledger_id}"


def broker_load(broker: str) -> str:
    return f"{BROKER_LOADS}{broker}"


def bundle_data(path: str) -> str:
    """The long-term load record of ``tenant/ns/0xLOWER_0xUPPER``."""
    return f"{BUNDLE_DATA}{path}"


def dedup_snapshot(name: TopicName) -> str:
    return f"{DEDUP}/{name.persistence_path}"


def terminated(name: TopicName) -> str:
    return f"{TERMINATED}/{name.persistence_path}"


def compaction(name: TopicName) -> str:
    return f"{COMPACTION}/{name.persistence_path}"


def schemas(name: TopicName) -> str:
    """The directory of a topic's schema versions; the partitions of a
    partitioned topic share their topic's."""
    return f"{SCHEMAS}/{name.partitioned_topic_name.persistence_path}"


def schema_version(name: TopicName, version: int) -> str:
    """One version (zero-padded, so the keys list in version order)."""
    return f"{schemas(name)}/{version:010d}"
