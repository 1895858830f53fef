"""Namespace bundles: the ranges of the 32-bit hash space a namespace is
cut into, and which bundle a topic belongs to (DESIGN §5).

Theory of operation. A namespace's boundaries are sorted hash values from
0x00000000 to 0xffffffff; bundle i covers ``[b[i], b[i+1])`` and the last
one also holds 0xffffffff itself. A topic lands in the bundle holding
``crc32(full topic name)`` (Pulsar's choice; each partition hashes on its
own name). A bundle is named ``0xLOWER_0xUPPER``. Splitting a bundle adds
the midpoint of its range as a boundary; bundles never merge. I/O-free.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

from protos.hashing import topic_crc32

HASH_MAX = 0xFFFFFFFF
_NAME = re.compile(r"^0x([0-9a-f]{8})_0x([0-9a-f]{8})$")


class InvalidBundleError(ValueError):
    """A bundle name or boundary list that does not describe the hash space."""


@dataclass(frozen=True, order=True)
class BundleRange:
    lower: int
    upper: int  # exclusive, except that the last bundle also holds HASH_MAX

    @property
    def name(self) -> str:
        return f"0x{self.lower:08x}_0x{self.upper:08x}"

    @classmethod
    def parse(cls, name: str) -> BundleRange:
        m = _NAME.match(name)
        if m is None:
            raise InvalidBundleError(f"bundle name {name!r} is not 0xLOWER_0xUPPER (8 hex digits)")
        lower, upper = int(m.group(1), 16), int(m.group(2), 16)
        if lower >= upper:
            raise InvalidBundleError(f"bundle {name}: lower must be below upper")
        return cls(lower, upper)

    def contains(self, h: int) -> bool:
        return self.lower <= h < self.upper or (h == self.upper == HASH_MAX)

    def halves(self) -> tuple[BundleRange, BundleRange]:
        if self.upper - self.lower < 2:
            raise InvalidBundleError(f"bundle {self.name} is too small to split")
        middle = self.lower + (self.upper - self.lower) // 2
        return BundleRange(self.lower, middle), BundleRange(middle, self.upper)


class NamespaceBundles:
    def __init__(self, boundaries: list[int]) -> None:
        if (
            len(boundaries) < 2
            or boundaries[0] != 0
            or boundaries[-1] != HASH_MAX
            or any(b >= c for b, c in itertools.pairwise(boundaries))
        ):
            raise InvalidBundleError(
                "bundle boundaries must rise strictly from 0x00000000 to 0xffffffff, "
                f"got {[hex(b) for b in boundaries[:6]]}"
            )
        self.boundaries = list(boundaries)

    @classmethod
    def equal(cls, count: int) -> NamespaceBundles:
        """``count`` bundles of equal size (Pulsar's default cut)."""
        if not 1 <= count <= 1 << 16:
            raise InvalidBundleError(f"{count} bundles: a namespace has 1 to 65536")
        size = (HASH_MAX + 1) // count
        return cls([i * size for i in range(count)] + [HASH_MAX])

    @property
    def bundles(self) -> list[BundleRange]:
        b = self.boundaries
        return [BundleRange(lo, hi) for lo, hi in itertools.pairwise(b)]

    def bundle_for_hash(self, h: int) -> BundleRange:
        return self.bundle_at(self.index_for_hash(h))

    def index_for_hash(self, h: int) -> int:
        """The index of the bundle holding hash ``h`` (see :meth:`bundle_at`)."""
        if not 0 <= h <= HASH_MAX:
            raise InvalidBundleError(f"hash {h} is outside the 32-bit space")
        return min(bisect.bisect_right(self.boundaries, h) - 1, len(self.boundaries) - 2)

    def bundle_at(self, index: int) -> BundleRange:
        """The ``index``-th bundle, lowest first."""
        return BundleRange(self.boundaries[index], self.boundaries[index + 1])

    def bundle_for_topic(self, full_topic_name: str) -> BundleRange:
        return self.bundle_for_hash(topic_crc32(full_topic_name))

    def index_for_topic(self, full_topic_name: str) -> int:
        return self.index_for_hash(topic_crc32(full_topic_name))

    def split(self, bundle: BundleRange) -> NamespaceBundles:
        """The bundles after cutting ``bundle`` in two halves."""
        if bundle not in self.bundles:
            raise InvalidBundleError(f"bundle {bundle.name} is not a bundle of this namespace")
        low, _ = bundle.halves()
        return NamespaceBundles(sorted([*self.boundaries, low.upper]))

    def to_policy(self) -> dict[str, object]:
        """The ``bundles`` field of namespace policies (Pulsar's shape)."""
        return {
            "boundaries": [f"0x{b:08x}" for b in self.boundaries],
            "numBundles": len(self.boundaries) - 1,
        }

    @classmethod
    def from_policy(cls, policy: object, default_count: int) -> NamespaceBundles:
        """From a namespace policy's ``bundles``: a count (older policies) or
        Pulsar's ``{"boundaries": [...]}``; missing means ``default_count``."""
        if policy is None:
            return cls.equal(default_count)
        if isinstance(policy, int):
            return cls.equal(policy)
        if isinstance(policy, dict) and isinstance(policy.get("boundaries"), list):
            try:
                return cls([int(str(b), 16) for b in policy["boundaries"]])
            except ValueError:
                raise InvalidBundleError(
                    f"bad bundle boundaries {policy['boundaries']!r}"
                ) from None
        raise InvalidBundleError(f"namespace bundles policy {policy!r} is not understood")
