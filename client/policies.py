"""Consumer policies with the Pulsar Python client's names."""

from __future__ import annotations

from client.enums import KeySharedMode
from client.exceptions import InvalidConfiguration

KEY_HASH_MAX = 65535


class ConsumerKeySharedPolicy:
    """How a Key_Shared consumer gets its keys.

    ``sticky_ranges`` (``KeySharedMode.Sticky`` only) are inclusive
    ``(start, end)`` pairs in 0..65535 over ``murmur3_32(key) % 65536``.
    """

    def __init__(
        self,
        key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
        allow_out_of_order_delivery: bool = False,
        sticky_ranges: list[tuple[int, int]] | None = None,
    ) -> None:
        if not isinstance(key_shared_mode, KeySharedMode):
            raise InvalidConfiguration(
                f"key_shared_mode {key_shared_mode!r} is not a KeySharedMode"
            )
        ranges: list[tuple[int, int]] = []
        for r in sticky_ranges or []:
            if (
                not isinstance(r, tuple | list)
                or len(r) != 2
                or not all(isinstance(v, int) for v in r)
                or not 0 <= r[0] <= r[1] <= KEY_HASH_MAX
            ):
                raise InvalidConfiguration(
                    f"sticky range {r!r} must be an inclusive (start, end) pair of ints with "
                    f"0 <= start <= end <= {KEY_HASH_MAX}"
                )
            ranges.append((r[0], r[1]))
        if key_shared_mode == KeySharedMode.Sticky and not ranges:
            raise InvalidConfiguration("KeySharedMode.Sticky needs sticky_ranges")
        if key_shared_mode == KeySharedMode.AutoSplit and ranges:
            raise InvalidConfiguration("sticky_ranges are only for KeySharedMode.Sticky")
        self._mode = key_shared_mode
        self._allow_out_of_order = bool(allow_out_of_order_delivery)
        self._ranges = ranges

    # Read-only properties, as the official client's policy wrappers have.
    @property
    def key_shared_mode(self) -> KeySharedMode:
        return self._mode

    @property
    def allow_out_of_order_delivery(self) -> bool:
        return self._allow_out_of_order

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._ranges)

    def __repr__(self) -> str:
        return (
            f"ConsumerKeySharedPolicy({self._mode.name}, allow_out_of_order_delivery="
            f"{self._allow_out_of_order}, sticky_ranges={self._ranges})"
        )


class MultiplierRedeliveryBackoff:
    """Redelivery delay growing with the redelivery count: ``min_delay_ms *
    multiplier ** count``, at most ``max_delay_ms`` (count 0 = the first
    redelivery: the seed's table 1, 2, 4, …, 32, 60, 60 s)."""

    def __init__(
        self, min_delay_ms: int = 1000, max_delay_ms: int = 60000, multiplier: float = 2.0
    ) -> None:
        if min_delay_ms < 0 or max_delay_ms < min_delay_ms or multiplier < 1:
            raise InvalidConfiguration(
                f"MultiplierRedeliveryBackoff({min_delay_ms}, {max_delay_ms}, {multiplier}): "
                "need 0 <= min_delay_ms <= max_delay_ms and multiplier >= 1"
            )
        self.min_delay_ms = min_delay_ms
        self.max_delay_ms = max_delay_ms
        self.multiplier = multiplier

    def next(self, redelivery_count: int) -> int:
        """Delay in ms before redelivery number ``redelivery_count + 1``."""
        if redelivery_count <= 0 or self.min_delay_ms <= 0:
            return self.min_delay_ms
        # Bounded exponent: past ~64 doublings the cap has long been reached.
        growth = self.multiplier ** min(redelivery_count, 64)
        return int(min(self.min_delay_ms * growth, self.max_delay_ms))


class ConsumerBatchReceivePolicy:
    """``batch_receive()`` returns when ``max_num_message`` messages (-1: no
    limit but the queue) or ``max_num_bytes`` are there, or after ``timeout_ms``."""

    def __init__(
        self,
        max_num_message: int = -1,
        max_num_bytes: int = 10 * 1024 * 1024,
        timeout_ms: int = 100,
    ) -> None:
        if max_num_message == 0 or max_num_message < -1 or max_num_bytes <= 0 or timeout_ms < 0:
            raise InvalidConfiguration(
                f"ConsumerBatchReceivePolicy({max_num_message}, {max_num_bytes}, {timeout_ms}): "
                "max_num_message is -1 or > 0, max_num_bytes > 0, timeout_ms >= 0"
            )
        self._max_num_message = max_num_message
        self._max_num_bytes = max_num_bytes
        self._timeout_ms = timeout_ms

    @property
    def max_num_message(self) -> int:
        return self._max_num_message

    @property
    def max_num_bytes(self) -> int:
        return self._max_num_bytes

    @property
    def timeout_ms(self) -> int:
        return self._timeout_ms


class ConsumerDeadLetterPolicy:
    """Messages redelivered more than ``max_redeliver_count`` times go to
    ``dead_letter_topic`` (default ``<topic>-<subscription>-DLQ``), where
    ``initial_subscription_name``, when given, is created with the dead-letter
    producer so nothing sent there is lost before anyone subscribes;
    ``reconsume_later`` uses ``retry_letter_topic`` (keyword only, **added**:
    default ``<topic>-<subscription>-RETRY``).

    The official client's positional order; the getters are read-only
    properties giving ``''`` where the default applies, as its are.
    """

    def __init__(
        self,
        max_redeliver_count: int,
        dead_letter_topic: str | None = None,
        initial_subscription_name: str | None = None,
        *,
        retry_letter_topic: str | None = None,
    ) -> None:
        if (
            not isinstance(max_redeliver_count, int)
            or isinstance(max_redeliver_count, bool)
            or max_redeliver_count < 1
        ):
            raise InvalidConfiguration(
                f"max_redeliver_count is {max_redeliver_count!r}; it must be an int >= 1"
            )
        for name, value in (
            ("dead_letter_topic", dead_letter_topic),
            ("initial_subscription_name", initial_subscription_name),
            ("retry_letter_topic", retry_letter_topic),
        ):
            if value is not None and not isinstance(value, str):
                raise InvalidConfiguration(
                    f"{name} is {value!r}; it must be a str (or None for the default)"
                )
        self._max = max_redeliver_count
        self._dlq = dead_letter_topic or ""
        self._retry = retry_letter_topic or ""
        self._initial = initial_subscription_name or ""

    @property
    def max_redeliver_count(self) -> int:
        return self._max

    @property
    def dead_letter_topic(self) -> str:
        return self._dlq

    @property
    def retry_letter_topic(self) -> str:
        return self._retry

    @property
    def initial_subscription_name(self) -> str:
        return self._initial

    def __repr__(self) -> str:
        return (
            f"ConsumerDeadLetterPolicy({self._max}, {self._dlq!r}, {self._initial!r}, "
            f"retry_letter_topic={self._retry!r})"
        )
