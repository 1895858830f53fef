"""The synchronous API: the asyncio engines run on a private loop thread.

Sends and receives do not hop threads per message: the producer batches in
the caller's thread and wakes the loop once per batch, and received messages
wait in a thread-safe queue (see ``_producer.py``, ``_consumer.py`` and
``_receiver_queue.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from client import aio
from client._batch_receive import batch_receive_blocking
from client._factory_options import prepare_send
from client.enums import ProducerAccessMode, Result
from client.exceptions import AlreadyClosed, InvalidConfiguration, MagnetarError, Timeout
from client.message import Message
from protos.message_id import MessageId

log = logging.getLogger(__name__)

_OK = Result.Ok  # an enum member's lookup costs ~0.15 µs; a send_async callback makes one


def _ignore_outcome(exc: BaseException | None, mid: MessageId | None) -> None:
    """The engine's callback of a ``send_async`` given no callback."""


def _result_of(exc: BaseException) -> Result:
    return exc.result if isinstance(exc, MagnetarError) else Result.UnknownError


T = TypeVar("T")


def _listen(
    closed: Callable[[], bool],
    take: Callable[[], Message],
    deliver: Callable[[Message], Any],
    resumed: threading.Event | None,
    what: str,
) -> threading.Thread:
    """A listener's thread: ``deliver`` each message ``take`` gives (it raises
    Timeout when none came) while not ``closed`` and, with ``resumed``, while
    it is set; an exception in ``deliver`` is logged and the next goes on."""

    def run() -> None:
        while not closed():
            if resumed is not None and not resumed.wait(0.2):
                continue
            try:
                msg = take()
            except Timeout:
                continue
            except MagnetarError:
                return
            try:
                deliver(msg)
            except Exception:
                log.exception("%s failed on %s", what, msg.message_id())

    thread = threading.Thread(target=run, name=f"magnetar-{what}", daemon=True)
    thread.start()
    return thread


# How long stopping a sync client's loop waits for its cancelled tasks.
STOP_TIMEOUT_S = 5.0


async def _cancel_the_rest() -> None:
    me = asyncio.current_task()
    rest = [t for t in asyncio.all_tasks() if t is not me]
    for task in rest:
        task.cancel()
    if rest:
        await asyncio.wait(rest, timeout=STOP_TIMEOUT_S)
    await asyncio.get_running_loop().shutdown_asyncgens()


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="magnetar-client", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise Timeout(f"the operation did not finish within {timeout:g} s") from None
        except concurrent.futures.CancelledError:  # by stop(): the client closed
            raise AlreadyClosed("the client was closed while this was pending") from None

    def stop(self) -> None:
        """Cancel what still runs on the loop (awaited up to STOP_TIMEOUT_S),
        then stop and close it: nothing is left to be collected after."""
        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(_cancel_the_rest(), self.loop).result(
                    STOP_TIMEOUT_S + 1
                )
            except Exception:
                log.warning("the client's loop did not wind down its tasks in time")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


class Producer:
    def __init__(self, inner: aio.Producer, runner: _LoopThread, timeout_s: float) -> None:
        self._inner = inner
        self._engine = inner._engine
        self._runner = runner
        self._timeout_s = timeout_s

    def send(self, content: Any, **kwargs: Any) -> MessageId:
        """Publish and wait until the message is stored; returns its MessageId."""
        done = threading.Event()
        outcome: list[Any] = [None, None]

        def callback(exc: BaseException | None, mid: MessageId | None) -> None:
            outcome[0], outcome[1] = exc, mid
            done.set()

        payload, args = prepare_send(self._engine.opts.schema, content, kwargs)
        self._engine.enqueue(payload, callback, flush_now=True, **args)
        limit = self._engine.opts.send_timeout_millis / 1000 or None
        if not done.wait(None if limit is None else limit + 5):
            raise Timeout(f"no receipt within {limit:g} s on {self._engine.topic}")
        if outcome[0] is not None:
            raise outcome[0]
        return outcome[1]  # type: ignore[no-any-return]

    def send_async(
        self,
        content: Any,
        callback: Callable[[Result, MessageId | None], None] | None,
        **kwargs: Any,
    ) -> None:
        """Publish without waiting; ``callback(result, msg_id)`` runs on the client thread."""

        done: Callable[[BaseException | None, MessageId | None], None] = _ignore_outcome
        if callback is not None:

            def done(exc: BaseException | None, mid: MessageId | None) -> None:
                try:
                    callback(_OK if exc is None else _result_of(exc), mid)
                except Exception:
                    log.exception("send_async callback raised; ignored")

        engine = self._engine
        if kwargs or engine.opts.schema is not None:
            payload, args = prepare_send(engine.opts.schema, content, kwargs)
            engine.enqueue(payload, done, **args)
        else:  # the common send, once per message: no keywords to pass on
            engine.enqueue(content, done)

    def flush(self) -> None:
        self._runner.run(self._engine.flush(), None)

    def close(self) -> None:
        self._runner.run(self._engine.close(), self._timeout_s)

    def topic(self) -> str:
        return self._inner.topic()

    def producer_name(self) -> str:
        return self._inner.producer_name()

    def last_sequence_id(self) -> int:
        return self._inner.last_sequence_id()

    def is_connected(self) -> bool:
        return self._inner.is_connected()


class Consumer:
    def __init__(self, inner: aio.Consumer, runner: _LoopThread, timeout_s: float) -> None:
        self._inner = inner
        self._engine = inner._engine
        self._runner = runner
        self._timeout_s = timeout_s

    def receive(self, timeout_millis: int | None = None) -> Message:
        return self._engine.receive_blocking(timeout_millis)

    def batch_receive(self) -> list[Message]:
        """Messages per the consumer's ``batch_receive_policy`` (maybe none)."""
        return batch_receive_blocking(self._engine, self._engine.opts.batch_receive_policy)

    def reconsume_later(
        self, message: Message, delay_ms: int, properties: dict[str, str] | None = None
    ) -> None:
        """Consume ``message`` again after ``delay_ms`` via the retry letter topic."""
        self._runner.run(
            self._inner.reconsume_later(message, delay_ms, properties), self._timeout_s + 1
        )

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Deliver this message again after the nack delay (or its backoff)."""
        self._engine.negative_acknowledge(message)

    def acknowledge(self, message: Message | MessageId) -> None:
        self._engine.acknowledge(message)

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        self._engine.acknowledge_cumulative(message)

    def redeliver_unacknowledged_messages(self) -> None:
        """Have every unacknowledged message delivered again (redelivery count + 1)."""
        self._runner.run(self._engine.redeliver_unacknowledged(), self._timeout_s)

    def unsubscribe(self) -> None:
        """Delete the subscription; refused while other consumers are connected."""
        self._runner.run(self._engine.unsubscribe(self._timeout_s), self._timeout_s + 1)

    def seek(self, target: MessageId | int) -> None:
        """Next message: ``target`` (a MessageId) or the first published at or after it (ms)."""
        self._runner.run(self._engine.seek(target, self._timeout_s), self._timeout_s + 1)

    def get_last_message_id(self) -> MessageId:
        return self._runner.run(  # type: ignore[no-any-return]
            self._engine.get_last_message_id(self._timeout_s), self._timeout_s + 1
        )

    def _start_listener(self, listener: Callable[[Consumer, Message], Any]) -> None:
        """Call ``listener(consumer, message)`` on a thread of its own for each
        message; an exception in it is logged and the next message follows."""
        self._resumed = threading.Event()
        self._resumed.set()
        engine = self._engine
        self._listener = _listen(
            lambda: engine.closed,
            lambda: engine.receive_blocking(200),
            lambda msg: listener(self, msg),
            self._resumed,
            "message_listener",
        )

    def pause_message_listener(self) -> None:
        self._resumed.clear()

    def resume_message_listener(self) -> None:
        self._resumed.set()

    def close(self) -> None:
        self._runner.run(self._inner.close(), self._timeout_s)
        listener = getattr(self, "_listener", None)
        if listener is not None and listener is not threading.current_thread():
            listener.join(5)

    def topic(self) -> str:
        return self._inner.topic()

    def subscription_name(self) -> str:
        return self._inner.subscription_name()

    def consumer_name(self) -> str:
        return self._inner.consumer_name()

    def is_connected(self) -> bool:
        return self._inner.is_connected()


class Reader:
    """A non-durable exclusive subscription read from a chosen position."""

    def __init__(self, inner: aio.Reader, runner: _LoopThread, timeout_s: float) -> None:
        self._inner = inner
        self._engine = inner._engine
        self._runner = runner
        self._timeout_s = timeout_s

    def read_next(self, timeout_millis: int | None = None) -> Message:
        msg = self._engine.receive_blocking(timeout_millis)
        self._engine.acknowledge_cumulative(msg)
        return msg

    def has_message_available(self) -> bool:
        return self._runner.run(  # type: ignore[no-any-return]
            aio.has_message_available(self._engine, self._timeout_s), self._timeout_s + 1
        )

    def has_reached_end_of_topic(self) -> bool:
        """The topic was terminated and everything in it has been read."""
        return self._runner.run(  # type: ignore[no-any-return]
            aio.reached_end_of_topic(self._engine, self._timeout_s), self._timeout_s + 1
        )

    def seek(self, target: MessageId | int) -> None:
        self._runner.run(self._engine.seek(target, self._timeout_s), self._timeout_s + 1)

    def topic(self) -> str:
        return self._inner.topic()

    def is_connected(self) -> bool:
        return self._inner.is_connected()

    def _start_listener(self, listener: Callable[[Reader, Message], Any]) -> None:
        """Call ``reader_listener(reader, message)`` on a thread of its own for
        each message, in order; an exception in it is logged."""
        self._listener = _listen(
            lambda: self._engine.closed,
            lambda: self.read_next(200),
            lambda msg: listener(self, msg),
            None,
            "reader_listener",
        )

    def close(self) -> None:
        """Close the reader and remove its subscription (``client._reader``)."""
        self._runner.run(self._inner.close(), self._timeout_s * 2 + 1)


class Client:
    """A connection to a Magnetar cluster (``magnetar://host:port``)."""

    def __init__(
        self,
        service_url: str,
        authentication: Any = None,
        operation_timeout_seconds: int = 30,
        connection_timeout_ms: int = 10000,
        **kwargs: Any,
    ) -> None:
        self._timeout_s = float(operation_timeout_seconds)
        self._runner = _LoopThread()
        try:
            self._inner = aio.Client(
                service_url,
                authentication=authentication,
                operation_timeout_seconds=operation_timeout_seconds,
                connection_timeout_ms=connection_timeout_ms,
                **kwargs,
            )
        except BaseException:
            self._runner.stop()
            raise
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise AlreadyClosed("the client is closed")

    def create_producer(self, topic: str, **options: Any) -> Producer:
        self._check()
        # WaitForExclusive stays pending until this producer is the only one.
        waits = options.get("access_mode") == ProducerAccessMode.WaitForExclusive
        inner = self._runner.run(
            self._inner.create_producer(topic, **options), None if waits else self._timeout_s + 1
        )
        return Producer(inner, self._runner, self._timeout_s)

    def get_topic_partitions(self, topic: str) -> list[str]:
        self._check()
        return self._runner.run(self._inner.get_topic_partitions(topic), self._timeout_s + 1)

    def subscribe(
        self, topic: str | list[str] | re.Pattern, subscription_name: str, **options: Any
    ) -> Consumer:
        self._check()
        listener = options.pop("message_listener", None)
        if listener is not None and not callable(listener):
            raise InvalidConfiguration("message_listener must be callable (consumer, message)")
        inner = self._runner.run(
            self._inner.subscribe(topic, subscription_name, **options), self._timeout_s + 1
        )
        consumer = Consumer(inner, self._runner, self._timeout_s)
        if listener is not None:
            consumer._start_listener(listener)
        return consumer

    def create_reader(self, topic: str, start_message_id: MessageId, **options: Any) -> Reader:
        self._check()
        listener = options.pop("reader_listener", None)
        if listener is not None and not callable(listener):
            raise InvalidConfiguration("reader_listener must be callable (reader, message)")
        inner = self._runner.run(
            self._inner.create_reader(topic, start_message_id, **options), self._timeout_s + 1
        )
        reader = Reader(inner, self._runner, self._timeout_s)
        if listener is not None:
            reader._start_listener(listener)
        return reader

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._runner.run(self._inner.close(), self._timeout_s)
        finally:
            self._runner.stop()

    def shutdown(self) -> None:
        self.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
