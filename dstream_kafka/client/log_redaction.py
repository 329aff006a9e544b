"""Secret values kept out of what the Kafka client libraries log with our clients' settings.

kafka-python logs its whole configuration at DEBUG when an admin client starts
(``Starting KafkaAdminClient with configuration: {...}``), ``sasl_plain_password`` included,
and at its trace level (5) every request it sends, both decoded and as raw bytes, the SASL
PLAIN login's ``auth_bytes`` (user and password) included.
:func:`protect_client_logs` puts :class:`SecretRedactingFilter` on kafka-python's loggers and on
the logger our confluent-kafka backend gives librdkafka; it runs whenever security settings are
translated for a client (:func:`~dstream_kafka.client.security.security_config`), so before any
of our clients exists, and registers the secret values it was given. The filter replaces
every secret value with :data:`~dstream_kafka.client.param_checks.REDACTED` and keeps the rest of the
line: values of the keys :func:`~dstream_kafka.client.param_checks.is_secret_key` names,
``password=...`` inside a JAAS text, SASL ``auth_bytes``, and anywhere in the line (a raw
request dump) each registered value, as text or as Python escapes it in bytes.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from dstream_kafka.client.param_checks import REDACTED, redact

__all__ = ["SecretRedactingFilter", "protect_client_logs"]

#: The logger our confluent-kafka backend hands librdkafka (``logger`` setting).
LIBRDKAFKA_LOGGER = "dstream_kafka.read.backends.librdkafka"

# A quoted (optionally bytes) or bare value after "key: " or "key=".
_VALUE = r"""(?:b?'(?:[^'\\]|\\.)*'|b?"(?:[^"\\]|\\.)*"|[^\s,;)}\]]+)"""
_SECRET_PAIR = re.compile(
    r"""(?P<key>['"]?[\w.-]*(?:password|secret|token|jaas|credential|keystore[._]key|"""
    rf"""private[._]?key|auth[._]?bytes)[\w.-]*['"]?\s*[:=]\s*){_VALUE}""",
    re.IGNORECASE)


# Registered secret values, longest first: a secret that holds another is replaced whole.
_secrets: tuple[str, ...] = ()

#: Registered values shorter than this are not replaced inside free text: a one- or
#: two-letter value (a test's "s", a placeholder) would match inside every word and leave no
#: log line readable. Such values are still redacted by key, in JAAS text and in auth_bytes.
MIN_FREE_TEXT_SECRET = 4


def redact_text(text: str) -> str:
    """Return ``text`` with the value of every ``secret-key: value`` or ``secret-key=value``
    pair, and every registered secret value, replaced by :data:`REDACTED`."""
    text = _SECRET_PAIR.sub(lambda m: m.group("key") + REDACTED, text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _forms(secret: str) -> set[str]:
    # As printed in a str, and inside the repr of bytes holding its UTF-8 encoding.
    if len(secret) < MIN_FREE_TEXT_SECRET:
        return set()
    return {secret, repr(secret.encode())[2:-1]}


class SecretRedactingFilter(logging.Filter):
    """Rewrites a log record so that no secret value of a client's settings is in it.

    Mapping arguments (a client's configuration) lose their secret values by key; the
    formatted line is then scanned for ``key: value`` pairs of secret keys. The record is
    never dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, Mapping):
            record.args = _redact_mapping(args)
        elif isinstance(args, tuple) and any(isinstance(a, Mapping) for a in args):
            record.args = tuple(_redact_mapping(a) if isinstance(a, Mapping) else a for a in args)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: logging reports it itself
            return True
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def _redact_mapping(args: Mapping[Any, Any]) -> dict[Any, Any]:
    return redact({str(k): v for k, v in args.items()})


_FILTER = SecretRedactingFilter()
_lock = threading.Lock()
_seen_loggers = -1


def protect_client_logs(secrets: Iterable[Any] = ()) -> None:
    """Put the redacting filter on every kafka-python logger and on librdkafka's logger, and
    have it replace each of ``secrets`` (passwords a client is about to use) wherever it shows.

    Cheap when nothing changed; called again, it covers loggers created since (a filter on a
    logger applies only to records logged there, not to its children's).
    """
    global _seen_loggers, _secrets
    import kafka  # noqa: F401  (its modules create their loggers when imported)

    loggers = logging.Logger.manager.loggerDict
    with _lock:
        new = {form for secret in secrets if secret is not None for form in _forms(str(secret))}
        if not new <= set(_secrets):
            _secrets = tuple(sorted(new | set(_secrets), key=len, reverse=True))
        if len(loggers) == _seen_loggers:
            return
        names = ["kafka", LIBRDKAFKA_LOGGER, "kafka.admin.client",
                 *[n for n in list(loggers) if n.startswith("kafka.")]]
        for name in names:
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)
        _seen_loggers = len(loggers)
