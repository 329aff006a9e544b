"""Spark Connect sessions: recognised, and refused with the DataFrame alternative where RDDs are needed.

A Spark Connect client has no SparkContext, no RDDs and no JVM; PySpark itself answers
``spark.sparkContext`` with ``JVM_ATTRIBUTE_NOT_SUPPORTED``. The calls of dstream_kafka that
need them check here first, so a Connect session handed to them fails at once with
:class:`~dstream_kafka.errors.SparkConnectNotSupportedError` naming what to call instead.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from dstream_kafka.errors import SparkConnectNotSupportedError, SparkConnectUnreachableError

__all__ = ["CONNECT_CHECK_SECONDS", "check_connect_server", "is_connect_session", "refuse_connect"]

#: How long the first call of dstream_kafka on a Spark Connect session waits for its server
#: to accept the connection (PySpark's own retries on an unreachable server last minutes).
CONNECT_CHECK_SECONDS = 10.0

#: The sessions whose server answered once: the check runs once per session.
_reached: weakref.WeakSet[Any] = weakref.WeakSet()


def is_connect_session(spark: Any) -> bool:
    """Return True for a Spark Connect ``SparkSession`` (its class lives in pyspark.sql.connect).

    Decided by the class's module, so nothing is imported (Connect's client needs grpcio).
    """
    return type(spark).__module__.startswith("pyspark.sql.connect")


def refuse_connect(obj: Any, call: str, instead: str) -> None:
    """Raise :class:`SparkConnectNotSupportedError` when ``obj`` is a Spark Connect session.

    ``call`` names what was called; ``instead`` the DataFrame call to use.
    """
    if is_connect_session(obj):
        raise SparkConnectNotSupportedError(
            f"{call} needs a classic SparkContext, and a Spark Connect session has none: Spark "
            f"Connect has no RDDs. Use {instead}, which works on Spark Connect")


def check_connect_server(spark: Any, timeout_s: float = CONNECT_CHECK_SECONDS) -> None:
    """Make sure the Spark Connect server of ``spark`` accepts connections; once per session.

    The session's gRPC channel is asked to connect and watched until it is ready, fails or
    ``timeout_s`` passes. A refused connection fails at once; a server that answers is not
    asked again for this session (a connected channel is ready at once, so the healthy path
    costs no round trip).

    Raises
    ------
    SparkConnectUnreachableError
        When the channel failed or was not ready in time: the message names the endpoint (the
        URL's ``host:port``, without its token) and the fix.
    """
    import grpc

    from dstream_kafka._spark_internals import connect_channel

    try:
        if spark in _reached:
            return
    except TypeError:  # not weakly referable: checked every time (ready channels answer at once)
        pass
    channel, endpoint = connect_channel(spark)
    settled = threading.Event()
    states: list[Any] = []
    ended = (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.TRANSIENT_FAILURE,
             grpc.ChannelConnectivity.SHUTDOWN)

    def seen(state: Any) -> None:
        states.append(state)
        if state in ended:
            settled.set()

    channel.subscribe(seen, try_to_connect=True)
    try:
        settled.wait(timeout_s)
    finally:
        channel.unsubscribe(seen)
    state = states[-1] if states else None
    if state == grpc.ChannelConnectivity.READY:
        try:
            _reached.add(spark)
        except TypeError:
            pass
        return
    why = (f"not connected within {timeout_s:g} s" if not settled.is_set()
           else "the connection failed (refused, unresolvable host or TLS error)"
           if state == grpc.ChannelConnectivity.TRANSIENT_FAILURE else "the channel is closed")
    raise SparkConnectUnreachableError(
        f"no Spark Connect server answers at sc://{endpoint}, the URL of this session "
        f"(SparkSession.builder.remote): {why}. Start the server (Spark's "
        "sbin/start-connect-server.sh) or fix the URL's host and port; without this check "
        "PySpark would retry the first call for minutes")
