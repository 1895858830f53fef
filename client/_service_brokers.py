"""Which broker of the service URL to ask next.

Theory of operation.

A service URL may list several brokers, and any of them answers the calls
that need "any broker": a topic lookup, a topic's partition metadata, the
topics of a namespace, every admin call. :class:`ServiceBrokers` decides
which one to ask; it does no I/O and reads no clock (the caller passes
``now_ms``), so its rules are table-tested (tests/unit/test_service_brokers.py).

- **Random start, then sticky.** A client starts at a listed broker drawn
  at random by its caller, so a dead first entry costs only the clients
  that drew it, and it keeps asking the broker that last answered (one
  channel in use, not one per listed broker).
- **Down for a backoff.** A broker that cannot be connected to, or answers
  a status of :data:`TRY_NEXT_CODES`, is down until ``now_ms`` plus its
  backoff: :data:`DOWN_MS_FIRST`, doubled for each failure in a row, at
  most :data:`DOWN_MS_MAX`. An answer ends it and resets the count.
- **Rounds: one try each, the soonest back last.** :meth:`order` lists
  every broker once: those not down, in listed order from the current one
  (wrapping), then those down, the one whose backoff ends first first. A
  round walks it (:meth:`pick`), so when every broker is down they are all
  still tried instead of the call failing untried. A caller that may wait
  starts its next round after :meth:`wait_ms`, when the soonest broker is
  back; the SDK does so until ``connection_timeout_ms``, the admin client
  gives up after one round.

Which answers mean "try the next": a channel that cannot connect, and gRPC
``UNAVAILABLE`` (the broker is gone or going). A typed error the broker
answers is its answer, whoever is asked; any other gRPC status is reported,
not retried elsewhere.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import grpc

# How long a broker that failed is down: the first time, and at most
# (doubled for each failure in a row in between).
DOWN_MS_FIRST = 1_000
DOWN_MS_MAX = 30_000
# gRPC statuses after which a call that any broker can answer goes to the next one.
TRY_NEXT_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})


def try_next(code: grpc.StatusCode | None) -> bool:
    """Whether a call that failed with ``code`` should go to the next broker."""
    return code in TRY_NEXT_CODES


class ServiceBrokers:
    """The listed brokers, the current one, and which are down until when."""

    def __init__(
        self,
        addresses: Sequence[str],
        start: int,
        down_ms_first: int = DOWN_MS_FIRST,
        down_ms_max: int = DOWN_MS_MAX,
    ) -> None:
        if not addresses:
            raise ValueError("a service URL lists at least one broker")
        if len(set(addresses)) != len(addresses):
            raise ValueError(f"a service URL lists each broker once, not {list(addresses)}")
        if not 0 <= start < len(addresses):
            raise ValueError(f"start {start} is not an index of {list(addresses)}")
        if not 0 < down_ms_first <= down_ms_max:
            raise ValueError(
                f"need 0 < down_ms_first <= down_ms_max, not {down_ms_first}, {down_ms_max}"
            )
        self.addresses = tuple(addresses)
        self.down_ms_first = down_ms_first
        self.down_ms_max = down_ms_max
        self._current = start
        self._failures = dict.fromkeys(self.addresses, 0)
        self._down_until_ms = dict.fromkeys(self.addresses, 0.0)

    @property
    def current(self) -> str:
        """The broker asked first while it is up: the last that answered."""
        return self.addresses[self._current]

    def is_down(self, address: str, now_ms: float) -> bool:
        return now_ms < self._down_until_ms[address]

    def down_until_ms(self, address: str) -> float:
        return self._down_until_ms[address]

    def order(self, now_ms: float) -> list[str]:
        """Every listed broker once, in the order to try them now."""
        n = len(self.addresses)
        rotation = [self.addresses[(self._current + i) % n] for i in range(n)]
        up = [a for a in rotation if not self.is_down(a, now_ms)]
        down = sorted(
            (a for a in rotation if self.is_down(a, now_ms)),
            key=lambda a: self._down_until_ms[a],
        )  # stable: equal ends keep the rotation's order
        assert len(up) + len(down) == n
        return up + down

    def wait_ms(self, now_ms: float) -> float:
        """How long until a listed broker is no longer down (0 while one is up)."""
        return max(0.0, min(self._down_until_ms.values()) - now_ms)

    def pick(self, now_ms: float, tried: Collection[str] = ()) -> str | None:
        """The next broker for a call that has already tried ``tried``;
        None when it has tried them all."""
        return next((a for a in self.order(now_ms) if a not in tried), None)

    def mark_down(self, address: str, now_ms: float) -> float:
        """``address`` failed to connect or was unavailable: down until the
        returned time. The broker asked first moves past it."""
        self._failures[address] += 1
        backoff_ms = min(
            self.down_ms_first * 2 ** min(self._failures[address] - 1, 30), self.down_ms_max
        )
        self._down_until_ms[address] = now_ms + backoff_ms
        if self.current == address:
            self._current = (self._current + 1) % len(self.addresses)
        return self._down_until_ms[address]

    def mark_up(self, address: str) -> None:
        """``address`` answered: it is up, and the broker asked first."""
        self._failures[address] = 0
        self._down_until_ms[address] = 0.0
        self._current = self.addresses.index(address)
