"""The broker core's typed error: a wire code and a message for people.

Front-ends turn it into their protocol's error (``protos.errors`` codes);
the core raises it for anything a client asked that cannot be done.
"""

from __future__ import annotations

from protos.errors import MagnetarServerError


class BrokerError(MagnetarServerError):
    pass
