"""What each broker RPC needs, and of what: the broker's gatekeeper
(``protos.access.Gatekeeper``) in front of its gRPC services.

Every method of the ``Broker`` and ``BrokerAdmin`` services has a row in
:data:`RPC_RULES`; the access guard refuses to register a method without
one (``protos/access.py``), and a test reads the service descriptors to
check the table. A stream is judged by its first message (the producer's
topic, the subscription), so seek, unsubscribe and acknowledgements on a
consumer stream are covered by the ``consume`` its subscription needed.
``Call`` is judged by its operation (``broker.authorizer.OPERATION_RULES``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from broker.authorizer import (
    OPERATION_RULES,
    BrokerAuthorizer,
    arguments_target,
    namespace_target,
    topic_target,
)
from broker.permissions import Need, Target
from protos import broker_pb2
from protos.access import AccessDenied


@dataclass(frozen=True)
class Rule:
    need: Need
    target: Callable[[Any], Target] | None  # None: about the whole cluster
    # The call carries many streams, each judged before its producer is
    # created (broker/producer_mux.py): the call itself needs only a role.
    per_stream: bool = False


def _producer(req: broker_pb2.ProducerRequest) -> Target:
    return topic_target(req.create.topic)


def _consumer(req: broker_pb2.ConsumerRequest) -> Target:
    return topic_target(req.subscribe.topic, req.subscribe.subscription)


def _topic(req: Any) -> Target:
    return topic_target(req.topic)


def _subscription(req: Any) -> Target:
    return topic_target(req.topic, req.subscription)


def _namespace(req: Any) -> Target:
    return namespace_target(req.namespace)


RPC_RULES: dict[str, Rule] = {
    "Broker/Produce": Rule(Need.PRODUCE, _producer),
    # Each producer of the call is judged before it is created; one refused
    # topic must not end the call (and its other producers) for good.
    "Broker/ProduceMany": Rule(Need.PRODUCE, None, per_stream=True),
    "Broker/Consume": Rule(Need.CONSUME, _consumer),
    "Broker/Lookup": Rule(Need.LOOKUP, _topic),
    "Broker/GetPartitionedTopicMetadata": Rule(Need.LOOKUP, _topic),
    "Broker/GetSchema": Rule(Need.LOOKUP, _topic),
    "Broker/GetTopicsOfNamespace": Rule(Need.NAMESPACE_LOOKUP, _namespace),
    "BrokerAdmin/KeySharedLookup": Rule(Need.CONSUME, _subscription),
    "BrokerAdmin/CreatePartitionedTopic": Rule(Need.TENANT_ADMIN, _topic),
    "BrokerAdmin/CreateSubscription": Rule(Need.CONSUME, _subscription),
    "BrokerAdmin/ListBrokers": Rule(Need.SUPERUSER, None),
    "BrokerAdmin/NamespaceBundles": Rule(Need.TENANT_ADMIN, _namespace),
    "BrokerAdmin/Unload": Rule(Need.SUPERUSER, None),
    "BrokerAdmin/SplitBundle": Rule(Need.SUPERUSER, None),
    "BrokerAdmin/LeaderBroker": Rule(Need.SUPERUSER, None),
    # Judged by its operation (_call_rule); superuser for an unknown one.
    "BrokerAdmin/Call": Rule(Need.SUPERUSER, None),
}


def _call_rule(req: broker_pb2.AdminCallRequest) -> tuple[Need, Target | None]:
    need = OPERATION_RULES.get(req.operation)
    if need is None or need is Need.SUPERUSER:
        # An unknown operation is refused by name by the broker; only a
        # superuser gets that far (nothing about it can be judged).
        return Need.SUPERUSER, None
    try:
        arguments = json.loads(req.arguments or "{}")
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        raise ValueError("the arguments are not a JSON object")
    return need, arguments_target(arguments)


class BrokerGatekeeper:
    def __init__(self, authorizer: BrokerAuthorizer) -> None:
        self.authorizer = authorizer

    def methods(self) -> Collection[str]:
        return RPC_RULES.keys()

    async def admit(self, method: str, role: str, request: Any) -> None:
        if role in self.authorizer.superusers:
            return
        rule = RPC_RULES.get(method)
        if rule is None:
            raise AccessDenied(f"{method} has no authorization rule")
        if rule.per_stream:
            return
        try:
            if method == "BrokerAdmin/Call":
                need, target = _call_rule(request)
            else:
                need, target = rule.need, (rule.target(request) if rule.target else None)
        except ValueError as exc:
            raise AccessDenied(f"{method}: cannot tell what the call is about ({exc})") from None
        ok, why = await self.authorizer.allowed(role, need, target)
        if not ok:
            what = f"{request.operation} " if method == "BrokerAdmin/Call" else ""
            raise AccessDenied(f"{what}refused: {why}")
