"""The policy verbs that namespaces and topics share (``set-retention``,
``get-message-ttl``, ``remove-backlog-quota``, …), as methods of
``admin.namespaces`` and ``admin.topics``.

A value is Pulsar's JSON document of the policy (``{"retentionTimeInMinutes":
60, "retentionSizeInMB": 1024}``) or its scalar (a TTL in seconds, a limit);
the keyword methods build them. ``get_*`` answers the value set at that
level, ``None`` when none is, or with ``applied=True`` the value that
applies there (topic → namespace → broker). The broker validates every
value and stores nothing wrong (``InvalidConfiguration`` naming the value).
"""

from __future__ import annotations

from typing import Any, Protocol


class AdminCalls(Protocol):
    """What the groups need of :class:`client.admin.Admin`."""

    def _op(self, operation: str, idempotent: bool = True, **arguments: Any) -> Any: ...


class PolicyVerbs:
    _level = "namespace"  # or "topic": the keyword naming the target

    def __init__(self, admin: AdminCalls) -> None:
        self._admin = admin

    # ------------------------------------------------------------ generic

    def _target(self, target: str) -> dict[str, Any]:
        return {self._level: target}

    def get_policy(self, target: str, policy: str, applied: bool = False) -> Any:
        """One policy (pulsar-admin's verb stem, e.g. ``"retention"``)."""
        args = self._target(target)
        return self._admin._op("policies.get", policy=policy, applied=applied, **args)

    def set_policy(self, target: str, policy: str, value: Any, **extra: Any) -> Any:
        args = {**self._target(target), **extra}
        return self._admin._op("policies.set", policy=policy, value=value, **args)

    def remove_policy(self, target: str, policy: str, **extra: Any) -> Any:
        args = {**self._target(target), **extra}
        return self._admin._op("policies.remove", policy=policy, **args)

    # ------------------------------------------------------------ retention, TTL, quotas

    def set_retention(self, target: str, time_minutes: int, size_mb: int) -> Any:
        """Keep acknowledged data up to ``time_minutes`` and ``size_mb``
        (-1 = no limit; both 0 = none)."""
        doc = {"retentionTimeInMinutes": time_minutes, "retentionSizeInMB": size_mb}
        return self.set_policy(target, "retention", doc)

    def get_retention(self, target: str, applied: bool = False) -> Any:
        return self.get_policy(target, "retention", applied)

    def remove_retention(self, target: str) -> Any:
        return self.remove_policy(target, "retention")

    def set_message_ttl(self, target: str, seconds: int) -> Any:
        return self.set_policy(target, "message-ttl", seconds)

    def get_message_ttl(self, target: str, applied: bool = False) -> Any:
        return self.get_policy(target, "message-ttl", applied)

    def remove_message_ttl(self, target: str) -> Any:
        return self.remove_policy(target, "message-ttl")

    def set_backlog_quota(
        self,
        target: str,
        limit_size: int = -1,
        limit_time: int = -1,
        policy: str = "producer_request_hold",
        backlog_quota_type: str = "destination_storage",
    ) -> Any:
        """``limit_size`` bytes (destination_storage) or ``limit_time``
        seconds (message_age); ``policy`` producer_request_hold,
        producer_exception or consumer_backlog_eviction."""
        doc = {"limitSize": limit_size, "limitTime": limit_time, "policy": policy}
        return self.set_policy(target, "backlog-quota", doc, quota_type=backlog_quota_type)

    def get_backlog_quotas(self, target: str, applied: bool = False) -> Any:
        """``{type: {limitSize, limitTime, policy}}``."""
        return self.get_policy(target, "backlog-quota", applied)

    def remove_backlog_quota(
        self, target: str, backlog_quota_type: str = "destination_storage"
    ) -> Any:
        return self.remove_policy(target, "backlog-quota", quota_type=backlog_quota_type)

    # ------------------------------------------------------------ rates

    def set_dispatch_rate(
        self,
        target: str,
        msg_dispatch_rate: int = -1,
        byte_dispatch_rate: int = -1,
        dispatch_rate_period: int = 1,
        relative_to_publish_rate: bool = False,
        subscription: bool = False,
    ) -> Any:
        """Per topic (or, with ``subscription``, per subscription): at most
        this many messages and bytes per period of seconds (-1 = no limit)."""
        doc = {
            "dispatchThrottlingRateInMsg": msg_dispatch_rate,
            "dispatchThrottlingRateInByte": byte_dispatch_rate,
            "ratePeriodInSecond": dispatch_rate_period,
            "relativeToPublishRate": relative_to_publish_rate,
        }
        verb = "subscription-dispatch-rate" if subscription else "dispatch-rate"
        return self.set_policy(target, verb, doc)

    def set_publish_rate(
        self, target: str, msg_publish_rate: int = -1, byte_publish_rate: int = -1
    ) -> Any:
        doc = {
            "publishThrottlingRateInMsg": msg_publish_rate,
            "publishThrottlingRateInByte": byte_publish_rate,
        }
        return self.set_policy(target, "publish-rate", doc)

    def set_subscribe_rate(
        self, target: str, subscribe_rate: int = -1, subscribe_rate_period: int = 30
    ) -> Any:
        doc = {
            "subscribeThrottlingRatePerConsumer": subscribe_rate,
            "ratePeriodInSecond": subscribe_rate_period,
        }
        return self.set_policy(target, "subscribe-rate", doc)

    # ------------------------------------------------------------ the rest

    def set_persistence(
        self,
        target: str,
        bookkeeper_ensemble: int,
        bookkeeper_write_quorum: int,
        bookkeeper_ack_quorum: int,
        ml_mark_delete_max_rate: float = 0.0,
    ) -> Any:
        """E, Qw and Qa of the next ledgers (E >= Qw >= Qa >= 1, E <= writable bookies)."""
        doc = {
            "bookkeeperEnsemble": bookkeeper_ensemble,
            "bookkeeperWriteQuorum": bookkeeper_write_quorum,
            "bookkeeperAckQuorum": bookkeeper_ack_quorum,
            "managedLedgerMaxMarkDeleteRate": ml_mark_delete_max_rate,
        }
        return self.set_policy(target, "persistence", doc)

    def get_persistence(self, target: str, applied: bool = False) -> Any:
        return self.get_policy(target, "persistence", applied)

    def set_deduplication(self, target: str, enabled: bool) -> Any:
        """Turn broker-side deduplication on or off."""
        return self.set_policy(target, "deduplication", enabled)

    def set_inactive_topic_policies(
        self,
        target: str,
        delete_while_inactive: bool,
        max_inactive_duration_s: int,
        mode: str = "delete_when_no_subscriptions",
    ) -> Any:
        doc = {
            "inactiveTopicDeleteMode": mode,
            "maxInactiveDurationSeconds": max_inactive_duration_s,
            "deleteWhileInactive": delete_while_inactive,
        }
        return self.set_policy(target, "inactive-topic-policies", doc)

    def set_max_producers_per_topic(self, target: str, n: int) -> Any:
        return self.set_policy(target, "max-producers-per-topic", n)

    def set_max_consumers_per_topic(self, target: str, n: int) -> Any:
        return self.set_policy(target, "max-consumers-per-topic", n)

    def set_max_consumers_per_subscription(self, target: str, n: int) -> Any:
        return self.set_policy(target, "max-consumers-per-subscription", n)

    def set_max_subscriptions_per_topic(self, target: str, n: int) -> Any:
        return self.set_policy(target, "max-subscriptions-per-topic", n)

    def set_max_unacked_messages_per_consumer(self, target: str, n: int) -> Any:
        return self.set_policy(target, "max-unacked-messages-per-consumer", n)

    def set_max_unacked_messages_per_subscription(self, target: str, n: int) -> Any:
        return self.set_policy(target, "max-unacked-messages-per-subscription", n)
