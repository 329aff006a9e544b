"""What may be shown of a Kafka parameter, and the checks of where the brokers are.

Secret values (passwords, tokens, JAAS configs) never reach a log line or an exception text:
everything that prints parameters goes through :func:`redact` or :func:`show_value`.
``bootstrap.servers`` is checked before any client exists (:func:`check_bootstrap_servers`),
and a client that could not reach it gets one explained error (:func:`bootstrap_failure`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from dstream_kafka.errors import BrokerTimeoutError, ConfigurationError

__all__ = ["REDACTED", "RENAMED", "bootstrap_failure", "check_bootstrap_servers",
           "is_secret_key", "redact", "show_value"]

#: Replacement text for secret values (Spark's ``Utils.REDACTION_REPLACEMENT_TEXT``).
REDACTED = "*********(redacted)"
# keystore.key: ssl.keystore.key holds a private key as PEM text.
_SECRET_RE = re.compile(r"(?i)secret|password|token|access[._]?key|jaas|keystore[._]key|"
                        r"private[._]?key|credential")

# Java names whose kafka-python name is not the dots-to-underscores spelling.
RENAMED = {
    "metadata.broker.list": "bootstrap_servers",  # Kafka 0-8 name, kept for old programs
    "ssl.key.password": "ssl_password",
}
# Settings (kafka-python names) whose values are names, addresses or one of a few words, so
# a bad value may be quoted back. Any other setting's value is described, never shown: a
# misplaced password lands in a non-secret key as easily as in a secret one.
_ECHO_SAFE = frozenset(
    {
        "bootstrap_servers",
        "group_id",
        "group_instance_id",
        "client_id",
        "auto_offset_reset",
        "isolation_level",
        "security_protocol",
        "sasl_mechanism",
        "client_dns_lookup",
    }
)
# host:port, where host is a name, an IPv4 address or a bracketed IPv6 address.
_SERVER_RE = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):([0-9]{1,5})")
_BOOTSTRAP_EXAMPLE = '"broker1:9092,broker2:9092"'


def is_secret_key(key: str) -> bool:
    """Return True when the value of parameter ``key`` must never be shown."""
    return bool(_SECRET_RE.search(str(key)))


def redact(params: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``params`` with every secret value replaced by :data:`REDACTED`.

    Secret keys match ``secret|password|token|access.key|jaas|keystore.key|private.key|
    credential`` in any case and any spelling (``sasl.jaas.config``, ``sasl_plain_password``,
    ``ssl.key.password``, ``ssl.keystore.key``).
    """
    return {k: (REDACTED if is_secret_key(k) and v is not None else v) for k, v in params.items()}


def show_value(key: str, value: Any) -> str:
    """Return how a bad ``value`` of parameter ``key`` may appear in a message.

    :data:`REDACTED` for secret keys (:func:`is_secret_key`); the value itself (``repr``)
    only for settings known to hold no secret (broker addresses, group and client ids, the
    few-word settings); otherwise only its length, so a password pasted into the wrong key
    is never printed.
    """
    if is_secret_key(key):
        return REDACTED
    name = RENAMED.get(str(key).strip(), str(key).strip().replace(".", "_"))
    if name in _ECHO_SAFE:
        return repr(value)
    if isinstance(value, (str, bytes)):
        return f"<{len(value)} characters, not shown>"
    return f"<{type(value).__name__}, not shown>"


def check_bootstrap_servers(value: Any) -> str | Sequence[str]:
    """Return ``value`` after checking that it lists ``host:port`` entries.

    ``value`` is a comma-separated string or a list of strings; every entry is ``host:port``
    with a port from 1 to 65535 (an IPv6 host in brackets: ``[::1]:9092``). The check runs
    before any client exists, so a typo never reaches the network layer.

    Raises
    ------
    ConfigurationError
        Naming ``bootstrap.servers``, the bad entry and the expected form.
    """
    if isinstance(value, str):
        entries = value.split(",")
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        entries = list(value)
    else:
        raise ConfigurationError(
            f"bootstrap.servers must be a comma-separated string or a list of host:port "
            f"strings, got {value!r}; e.g. {_BOOTSTRAP_EXAMPLE}"
        )
    if not any(e.strip() for e in entries):
        raise ConfigurationError(
            f"bootstrap.servers is empty; list the brokers as host:port, e.g. {_BOOTSTRAP_EXAMPLE}"
        )
    for entry in entries:
        match = _SERVER_RE.fullmatch(entry.strip())
        if match is None or not 1 <= int(match.group(1)) <= 65535:
            raise ConfigurationError(
                f"bootstrap.servers entry {entry.strip()!r} (in {value!r}) is not host:port "
                f"with a port from 1 to 65535; e.g. {_BOOTSTRAP_EXAMPLE} or \"[::1]:9092\""
            )
    checked: str | Sequence[str] = value  # a str, or a list or tuple of str (checked above)
    return checked


def bootstrap_failure(config: Mapping[str, Any], exc: BaseException,
                      sasl_refused: bool = False) -> BrokerTimeoutError | None:
    """Return the error to raise when a client could not reach any bootstrap server.

    ``config`` are the client's kafka-python settings and ``exc`` what its constructor
    raised. kafka-python gives up after ``bootstrap_timeout_ms`` (Java spelling
    ``bootstrap.timeout.ms``, default 30000) with ``KafkaTimeoutError: Unable to bootstrap``;
    the returned error names the servers, the bound and its key, and the likely causes: no
    broker at that address, or a ``security.protocol`` that does not match the listener (a
    SASL or SSL handshake against a PLAINTEXT listener never completes, and the reverse).
    ``sasl_refused``: the broker answered the SASL handshake with ``IllegalSaslState`` (its
    listener is no SASL listener), known at the first connection; the error says so instead
    of naming the bound. Returns None for any other exception.
    """
    from kafka.errors import KafkaTimeoutError

    if not isinstance(exc, KafkaTimeoutError) or "bootstrap" not in str(exc).lower():
        return None
    servers = config.get("bootstrap_servers")
    shown = servers if isinstance(servers, str) else ",".join(map(str, servers or ()))
    timeout = config.get("bootstrap_timeout_ms", 30000)
    protocol = config.get("security_protocol", "PLAINTEXT")
    if protocol == "PLAINTEXT":
        cause = ("no broker listens there (wrong host or port, broker down, firewall), or the "
                 "listener expects SSL or SASL: then set security.protocol to match it")
    else:
        cause = (f"the client uses security.protocol={protocol}: against a PLAINTEXT listener "
                 "(or one of another protocol) the handshake never completes, so set "
                 "security.protocol to the listener's protocol; or no broker listens there")
    if sasl_refused:
        return BrokerTimeoutError(
            f"Could not reach any Kafka broker at bootstrap.servers={shown}: the broker refused "
            "the SASL handshake (IllegalSaslState), so that listener is not a SASL listener. "
            f"Likely cause: the client uses security.protocol={protocol} against a PLAINTEXT "
            "listener (or one of another protocol): set security.protocol to the listener's "
            "protocol, or give bootstrap.servers the brokers' SASL listener"
        )
    return BrokerTimeoutError(
        f"Could not reach any Kafka broker at bootstrap.servers={shown} within "
        f"bootstrap.timeout.ms={timeout} ms. Likely cause: {cause}. Raise bootstrap.timeout.ms "
        "in kafkaParams to wait longer"
    )
