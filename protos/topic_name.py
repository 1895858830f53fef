"""Topic names: ``{persistent|non-persistent}://tenant/namespace/topic``.

A bare ``my-topic`` means ``persistent://public/default/my-topic`` and
``tenant/ns/topic`` means ``persistent://tenant/ns/topic``. Partition ``i`` of
a partitioned topic is the topic ``<name>-partition-<i>``. Names are checked
the way Pulsar checks them: tenant and namespace are ``[A-Za-z0-9_=:.-]+``;
the local name is non-empty, has no ``/`` and none of the characters Pulsar
refuses in a topic (control characters, ``\\``, ``?``, ``#``, ``*``...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from protos.errors import InvalidTopicNameError

PERSISTENT = "persistent"
NON_PERSISTENT = "non-persistent"
DOMAINS = (PERSISTENT, NON_PERSISTENT)
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
# Topics the cluster keeps for itself (the stats history): listings and
# regex subscriptions leave them out unless asked, as Pulsar does with its
# system topics; so is any topic whose local name starts with "__".
SYSTEM_NAMESPACE = "magnetar/system"
SYSTEM_TOPIC_PREFIX = "__"
PARTITION_SUFFIX = "-partition-"
MAX_TOPIC_NAME_LENGTH = 1024

_NAME_PART = re.compile(r"^[A-Za-z0-9_=:.\-]+$")
_LOCAL_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f/\\?#*\"<>|%]")


def _check_part(what: str, value: str, full: str) -> None:
    if not value:
        raise InvalidTopicNameError(f"invalid topic name {full!r}: the {what} is empty")
    if not _NAME_PART.match(value):
        raise InvalidTopicNameError(
            f"invalid topic name {full!r}: the {what} {value!r} may only hold "
            "letters, digits and _ = : . -"
        )


def _check_local(local: str, full: str) -> None:
    if not local:
        raise InvalidTopicNameError(f"invalid topic name {full!r}: the topic part is empty")
    bad = _LOCAL_FORBIDDEN.search(local)
    if bad:
        raise InvalidTopicNameError(
            f"invalid topic name {full!r}: the topic part {local!r} holds the "
            f"forbidden character {bad.group()!r}"
        )


def _split(name: str) -> tuple[str, list[str]]:
    """The domain and the [tenant, namespace, topic] parts of ``name``,
    with the defaults of the short forms filled in (parts not checked yet)."""
    if "://" not in name:
        parts = name.split("/")
        if len(parts) == 1:
            return PERSISTENT, [DEFAULT_TENANT, DEFAULT_NAMESPACE, parts[0]]
        if len(parts) != 3:
            raise InvalidTopicNameError(
                f"invalid topic name {name!r}: expected 'topic', 'tenant/namespace/topic' "
                "or 'persistent://tenant/namespace/topic'"
            )
        return PERSISTENT, parts
    domain, rest = name.split("://", 1)
    if domain not in DOMAINS:
        raise InvalidTopicNameError(
            f"invalid topic name {name!r}: the domain {domain!r} is neither "
            f"'{PERSISTENT}' nor '{NON_PERSISTENT}'"
        )
    parts = rest.split("/")
    if len(parts) != 3:
        raise InvalidTopicNameError(
            f"invalid topic name {name!r}: expected {domain}://tenant/namespace/topic"
        )
    return domain, parts


@dataclass(frozen=True)
class TopicName:
    domain: str
    tenant: str
    namespace: str
    local_name: str

    @classmethod
    def parse(cls, name: str) -> TopicName:
        if not isinstance(name, str):
            raise InvalidTopicNameError(f"a topic name must be a str, not {type(name).__name__}")
        if not name:
            raise InvalidTopicNameError("invalid topic name '': the name is empty")
        if len(name) > MAX_TOPIC_NAME_LENGTH:
            raise InvalidTopicNameError(
                f"invalid topic name: {len(name)} characters, at most {MAX_TOPIC_NAME_LENGTH}"
            )
        domain, (tenant, namespace, local) = _split(name)
        _check_part("tenant", tenant, name)
        _check_part("namespace", namespace, name)
        _check_local(local, name)
        return cls(domain, tenant, namespace, local)

    @cached_property
    def full_name(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local_name}"

    def __str__(self) -> str:
        return self.full_name

    @property
    def is_persistent(self) -> bool:
        return self.domain == PERSISTENT

    @cached_property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def is_system(self) -> bool:
        """A system topic (see SYSTEM_NAMESPACE)."""
        return self.namespace_name == SYSTEM_NAMESPACE or self.local_name.startswith(
            SYSTEM_TOPIC_PREFIX
        )

    @property
    def partition_index(self) -> int:
        """The ``i`` of a ``-partition-i`` name, else -1."""
        head, sep, tail = self.local_name.rpartition(PARTITION_SUFFIX)
        if sep and head and tail.isdigit() and (tail == "0" or not tail.startswith("0")):
            return int(tail)
        return -1

    @property
    def is_partition(self) -> bool:
        return self.partition_index >= 0

    def partition(self, index: int) -> TopicName:
        if index < 0:
            raise InvalidTopicNameError(f"invalid partition index {index}: must be >= 0")
        if self.is_partition:
            raise InvalidTopicNameError(f"{self.full_name} is already a partition")
        return TopicName(
            self.domain, self.tenant, self.namespace, f"{self.local_name}{PARTITION_SUFFIX}{index}"
        )

    @property
    def partitioned_topic_name(self) -> TopicName:
        """The parent of a partition; the topic itself otherwise."""
        if not self.is_partition:
            return self
        head = self.local_name.rpartition(PARTITION_SUFFIX)[0]
        return TopicName(self.domain, self.tenant, self.namespace, head)

    @property
    def persistence_path(self) -> str:
        """Path segment under ``/managed-ledgers`` (DESIGN §3)."""
        return f"{self.tenant}/{self.namespace}/{self.domain}/{self.local_name}"
