"""Error codes shared by every process, and the server-side exception.

The wire carries ``common_pb2.Error{code, message}``. Servers raise
:class:`MagnetarServerError` (or a subclass) from their logic and the gRPC
layer turns it into that message; the SDK maps codes to Pulsar-named
exceptions (``client/exceptions.py``).
"""

from __future__ import annotations

from protos import common_pb2

ErrorCode = common_pb2.ErrorCode


class MagnetarServerError(Exception):
    """A domain error with a wire code and a message for people."""

    code: int = common_pb2.UNKNOWN_ERROR

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def to_proto(self) -> common_pb2.Error:
        return common_pb2.Error(code=self.code, message=self.message)  # type: ignore[arg-type]

    @classmethod
    def from_proto(cls, err: common_pb2.Error) -> MagnetarServerError:
        return cls(err.message, err.code)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({common_pb2.ErrorCode.Name(self.code)}: {self.message})"


class InvalidTopicNameError(MagnetarServerError, ValueError):
    code = common_pb2.INVALID_TOPIC_NAME


class InvalidArgumentError(MagnetarServerError, ValueError):
    code = common_pb2.INVALID_ARGUMENT


def code_name(code: int) -> str:
    try:
        return common_pb2.ErrorCode.Name(code)  # type: ignore[arg-type]
    except ValueError:
        return f"UNKNOWN({code})"


def error(code: int, message: str) -> common_pb2.Error:
    return common_pb2.Error(code=code, message=message)  # type: ignore[arg-type]


def error_of(exc: BaseException) -> common_pb2.Error:
    """The wire error for any exception: its own code for a domain error,
    UNKNOWN_ERROR (naming the exception) for anything else."""
    if isinstance(exc, MagnetarServerError):
        return exc.to_proto()
    return error(common_pb2.UNKNOWN_ERROR, f"{type(exc).__name__}: {exc}")
