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

    def key_shared_mode(self) -> KeySharedMode:
        return self._mode

    def allow_out_of_order_delivery(self) -> bool:
        return self._allow_out_of_order

    def sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._ranges)

    def __repr__(self) -> str:
        return (
            f"ConsumerKeySharedPolicy({self._mode.name}, allow_out_of_order_delivery="
            f"{self._allow_out_of_order}, sticky_ranges={self._ranges})"
        )
