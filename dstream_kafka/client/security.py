"""Kafka security settings in Spark's Java spelling, made usable by the Python clients.

:func:`security_config` reads ``sasl.jaas.config`` and the ``ssl.*`` store settings of a
``kafkaParams`` mapping and returns kafka-python keyword arguments; both executor backends take
them (the confluent-kafka backend translates them on to librdkafka). What can be converted is
converted (JKS and PKCS12 stores to PEM files, passwords to the key password the clients
take); what cannot is refused before any client exists, naming the setting and the
alternative. :func:`check_credentials` turns a refused SASL login into
:class:`~dstream_kafka.errors.KafkaAuthenticationError` within seconds, where kafka-python
alone would retry until its bootstrap timeout. No message quotes a secret value.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dstream_kafka.errors import ConfigurationError, KafkaAuthenticationError
from dstream_kafka.client.keystores import (
    content_digest,
    keystore_pem,
    pem_folder,
    truststore_pem,
    write_private,
)
from dstream_kafka.client.log_redaction import protect_client_logs
from dstream_kafka.client.param_checks import bootstrap_failure, is_secret_key

__all__ = ["SECURITY_KEYS", "check_credentials", "parse_jaas", "security_config"]

log = logging.getLogger(__name__)

#: Java settings read here rather than by the generic translation.
SECURITY_KEYS = frozenset({
    "sasl.jaas.config",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password",
    "ssl.enabled.protocols", "ssl.protocol", "ssl.endpoint.identification.algorithm",
})
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OTHER_MODULES = {
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule":
        "pass a token provider object as sasl_oauth_token_provider (kafka-python backend)",
    "com.sun.security.auth.module.Krb5LoginModule":
        "obtain a ticket with kinit on every host and set sasl.mechanism=GSSAPI and "
        "sasl.kerberos.service.name instead of sasl.jaas.config",
}
_FLAGS = ("required", "requisite", "sufficient", "optional")
# <module> <flag> then options key=value or key="value", ended by ';'.
_JAAS_OPTION = re.compile(r'\s*([A-Za-z_][\w.]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')
# Java's default protocols: the Python clients negotiate exactly these.
_DEFAULT_PROTOCOLS = frozenset({"TLSv1.2", "TLSv1.3"})
_SSL_CONTEXT_PROTOCOLS = frozenset({"TLS", "TLSv1.2", "TLSv1.3"})


def parse_jaas(value: Any) -> dict[str, str]:
    """Return the ``username`` and ``password`` of a PLAIN or SCRAM ``sasl.jaas.config``.

    Accepts one ``PlainLoginModule`` or ``ScramLoginModule`` entry with a control flag and
    ``username`` / ``password`` options (quoted or not); ``tokenauth=false`` is accepted.

    Raises
    ------
    ConfigurationError
        Naming the login module or the option that cannot be used (OAuth and Kerberos
        modules, delegation tokens, unknown options, several entries) and the alternative.
        Option values are never quoted.
    """
    text = str(value).strip()
    head = re.match(r"([\w.$]+)\s+(\w+)", text)
    if head is None:
        raise ConfigurationError(
            "sasl.jaas.config must read '<LoginModule class> required username=\"...\" "
            "password=\"...\";' (PlainLoginModule or ScramLoginModule)")
    module, flag = head.groups()
    if module in _OTHER_MODULES:
        raise ConfigurationError(
            f"sasl.jaas.config uses {module}, which the Python clients cannot run from a JAAS "
            f"entry; {_OTHER_MODULES[module]}")
    if module not in (_PLAIN, _SCRAM):
        raise ConfigurationError(
            f"sasl.jaas.config uses login module {module}; only {_PLAIN} and {_SCRAM} can be "
            "translated (or pass sasl_plain_username and sasl_plain_password)")
    if flag.lower() not in _FLAGS:
        raise ConfigurationError(
            f"sasl.jaas.config: {module} must be followed by a control flag ({', '.join(_FLAGS)}),"
            f" got {flag!r}")
    options: dict[str, str] = {}
    rest = text[head.end():]
    while True:
        match = _JAAS_OPTION.match(rest)
        if match is None:
            break
        raw = match.group(2)
        options[match.group(1)] = (re.sub(r"\\(.)", r"\1", raw[1:-1]) if raw.startswith('"')
                                   else raw)
        rest = rest[match.end():]
    if rest.strip() not in ("", ";"):
        raise ConfigurationError(
            "sasl.jaas.config holds something after its options that is not one final ';' "
            "(only one login module entry can be translated); check its quotes")
    if options.get("tokenauth", "false").lower() != "false":
        raise ConfigurationError(
            "sasl.jaas.config sets tokenauth=true (delegation tokens), which the Python clients "
            "do not support; authenticate with a SCRAM user name and password")
    unknown = sorted(set(options) - {"username", "password", "tokenauth"})
    if unknown:
        raise ConfigurationError(
            f"sasl.jaas.config option(s) {', '.join(unknown)} of {module} cannot be translated;"
            " give only username and password")
    if "username" not in options or "password" not in options:
        raise ConfigurationError(
            f"sasl.jaas.config: {module} needs both username=\"...\" and password=\"...\"")
    return {"username": options["username"], "password": options["password"]}


def _protocols(key: str, value: Any) -> None:
    names = {p.strip() for p in str(value).split(",") if p.strip()}
    allowed = _SSL_CONTEXT_PROTOCOLS if key == "ssl.protocol" else _DEFAULT_PROTOCOLS
    if key == "ssl.protocol" and len(names) == 1 and names <= allowed:
        return  # the context algorithm: every Python client context negotiates TLS 1.2-1.3
    if key == "ssl.enabled.protocols" and names == _DEFAULT_PROTOCOLS:
        return
    raise ConfigurationError(
        f"{key}={','.join(sorted(names))} cannot be honoured: kafka-python and librdkafka "
        "always offer TLSv1.2 and TLSv1.3 and cannot be restricted from kafkaParams. Remove "
        f"{key} (or set it to TLSv1.2,TLSv1.3) and restrict the versions on the brokers' "
        "listeners (their ssl.enabled.protocols)")


def _inline_pem(kind: str, text: Any, password: Any = None) -> str:
    target = pem_folder(content_digest(kind, str(text), password if password else None)) / \
        f"{kind}.pem"
    # Named by its content: written once, then reused by every later translation.
    return str(target if target.is_file() else write_private(target, str(text).strip() + "\n"))


def security_config(kafkaParams: Mapping[str, Any]) -> dict[str, Any]:
    """Return the kafka-python keyword arguments for the security settings of ``kafkaParams``.

    * ``sasl.jaas.config`` (PLAIN or SCRAM login module): ``sasl_plain_username`` and
      ``sasl_plain_password`` (:func:`parse_jaas`);
    * ``ssl.truststore.location`` of ``ssl.truststore.type`` PEM, JKS or PKCS12 (Java's
      default JKS) with ``ssl.truststore.password``, or ``ssl.truststore.certificates``
      (PEM text): ``ssl_cafile``, a PEM file;
    * ``ssl.keystore.location`` (PEM, JKS or PKCS12) with ``ssl.keystore.password`` and
      ``ssl.key.password``, or ``ssl.keystore.key`` with ``ssl.keystore.certificate.chain``
      (PEM text): ``ssl_certfile``, ``ssl_keyfile`` and ``ssl_password``;
    * ``ssl.endpoint.identification.algorithm``: ``https`` checks the broker's host name
      (``ssl_check_hostname``), empty does not;
    * ``ssl.protocol`` (TLS, TLSv1.2, TLSv1.3) and ``ssl.enabled.protocols=TLSv1.2,TLSv1.3``
      change nothing (the clients negotiate TLS 1.2 or 1.3); other values are refused.

    Raises
    ------
    ConfigurationError
        Naming the setting and the alternative for what cannot be honoured, unreadable stores
        or wrong store passwords. Secret values are never quoted, here or in the client
        libraries' log lines (:func:`~dstream_kafka.client.log_redaction.protect_client_logs`).
    MissingDependencyError
        When a JKS or PKCS12 store needs ``keytool`` or ``openssl`` and it is missing.
    """
    params = {str(k).strip(): v for k, v in kafkaParams.items() if str(k).strip() in SECURITY_KEYS}
    # Every client's settings pass here first: keep the libraries' own log lines (kafka-python
    # dumps an admin client's configuration at DEBUG, its requests' bytes at trace level) free
    # of the secrets given here and of those derived below.
    protect_client_logs(value for key, value in kafkaParams.items()
                        if is_secret_key(str(key)) and isinstance(value, str))
    out: dict[str, Any] = {}
    if "sasl.jaas.config" in params:
        login = parse_jaas(params["sasl.jaas.config"])
        protect_client_logs([login["password"]])  # the bare password is what requests carry
        out["sasl_plain_username"] = login["username"]
        out["sasl_plain_password"] = login["password"]
    for key in ("ssl.protocol", "ssl.enabled.protocols"):
        if params.get(key) is not None:
            _protocols(key, params[key])
    if "ssl.endpoint.identification.algorithm" in params:
        algorithm = str(params["ssl.endpoint.identification.algorithm"] or "").strip().lower()
        if algorithm not in ("", "https"):
            raise ConfigurationError(
                "ssl.endpoint.identification.algorithm must be https (check the broker's host "
                f"name) or empty (do not), got {algorithm!r}")
        out["ssl_check_hostname"] = algorithm == "https"
    trust = params.get("ssl.truststore.location")
    if trust is not None and params.get("ssl.truststore.certificates") is not None:
        raise ConfigurationError("set ssl.truststore.location or ssl.truststore.certificates, "
                                 "not both")
    if trust is not None:
        out["ssl_cafile"] = truststore_pem(str(trust), params.get("ssl.truststore.type"),
                                           params.get("ssl.truststore.password"))
    elif params.get("ssl.truststore.certificates") is not None:
        out["ssl_cafile"] = _inline_pem("truststore", params["ssl.truststore.certificates"])
    key_password = params.get("ssl.key.password")
    store = params.get("ssl.keystore.location")
    if store is not None:
        certfile, keyfile, key_password = keystore_pem(
            str(store), params.get("ssl.keystore.type"), params.get("ssl.keystore.password"),
            key_password)
        out.update(ssl_certfile=certfile, ssl_keyfile=keyfile)
    elif params.get("ssl.keystore.key") is not None:
        if params.get("ssl.keystore.certificate.chain") is None:
            raise ConfigurationError("ssl.keystore.key needs ssl.keystore.certificate.chain (the "
                                     "PEM certificates of the key)")
        out["ssl_certfile"] = _inline_pem("chain", params["ssl.keystore.certificate.chain"])
        out["ssl_keyfile"] = _inline_pem("key", params["ssl.keystore.key"], key_password)
    if key_password:
        out["ssl_password"] = str(key_password)
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        if name in out and not Path(out[name]).is_file():
            raise ConfigurationError(f"{name} {out[name]} is not a file")
    protect_client_logs(v for k, v in out.items() if is_secret_key(k))
    return out


class _AuthFailures(logging.Handler):
    """Notes how kafka-python's connections ended while logging in.

    A refused login reaches kafka-python as the broker's error response followed by the close
    of the connection; kafka-python 3.0 drops the response when both arrive in one read and
    then logs only "socket disconnected". So both count: the broker's reason when it was
    read, and connections the broker closed after they were established. A listener that
    is no SASL listener answers the handshake with ``IllegalSaslState``: noted as well.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reason = ""
        self.closed = 0
        self.not_sasl = False

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "IllegalSaslStateError" in message:
            self.not_sasl = True
        elif "SaslAuthenticationFailedError" in message and not self.reason:
            # kafka-python quotes the broker's reason, which never holds the password.
            reason = message.rsplit("SaslAuthenticationFailedError:", 1)[-1].strip()
            self.reason = reason.split(" (backoff")[0].rstrip(")")
        elif record.name == "kafka.net.transport" and message.endswith("socket disconnected"):
            self.closed += 1


#: Connections a broker may close during the login before the credentials count as refused.
CLOSED_LOGINS = 3


def check_credentials(config: Mapping[str, Any], attempt_ms: int = 1500) -> None:
    """Fail fast when the brokers refuse the SASL login of kafka-python settings ``config``.

    Does nothing without SASL PLAIN or SCRAM. Otherwise opens short-lived clients
    (``attempt_ms`` each) until one bootstraps (return), the brokers answer the login with an
    authentication error or close :data:`CLOSED_LOGINS` established connections (raise), a
    broker refuses the SASL handshake itself (raise at once: its listener is no SASL
    listener), or ``bootstrap_timeout_ms`` (default 30000) has passed (raise: the caller's
    client would report the same after waiting as long again).

    Raises
    ------
    KafkaAuthenticationError
        Naming the servers, the mechanism, the user and the brokers' reason; never the
        password.
    BrokerTimeoutError
        :func:`~dstream_kafka.client.param_checks.bootstrap_failure`'s error: no broker
        bootstrapped within ``bootstrap_timeout_ms``, or the listener refused the SASL
        handshake (a PLAINTEXT or SSL listener).
    """
    protocol = str(config.get("security_protocol", "PLAINTEXT"))
    if not protocol.startswith("SASL") or config.get("sasl_mechanism") not in (
            "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        return
    from kafka import KafkaConsumer
    from kafka.errors import KafkaTimeoutError

    probe = {k: v for k, v in config.items() if not k.endswith("_deserializer")}
    probe.update(group_id=None, enable_auto_commit=False)
    deadline = time.monotonic() + int(config.get("bootstrap_timeout_ms") or 30000) / 1000
    last_error: BaseException = KafkaTimeoutError("Unable to bootstrap")
    watcher = _AuthFailures()
    kafka_log = logging.getLogger("kafka")
    kafka_log.addHandler(watcher)
    silenced = kafka_log.getEffectiveLevel() > logging.WARNING
    saved = (kafka_log.level, kafka_log.propagate)
    if silenced:
        # Silenced above WARNING (the command-line tool does it, applications may): let the
        # login's lines reach the watcher during the probe, and nothing above it.
        kafka_log.setLevel(logging.WARNING)
        kafka_log.propagate = False
    try:
        while (time.monotonic() < deadline and not watcher.reason
               and watcher.closed < CLOSED_LOGINS and not watcher.not_sasl):
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            try:
                KafkaConsumer(**{**probe, "bootstrap_timeout_ms": max(1, min(attempt_ms,
                                                                             remaining_ms))}
                              ).close(autocommit=False)
                return
            except KafkaTimeoutError as exc:
                last_error = exc
                continue
    finally:
        kafka_log.removeHandler(watcher)
        if silenced:
            kafka_log.setLevel(saved[0])
            kafka_log.propagate = saved[1]
    where = (f"Kafka at bootstrap.servers={config.get('bootstrap_servers')} (security.protocol="
             f"{protocol})")
    login = (f"the {config.get('sasl_mechanism')} login of user "
             f"{config.get('sasl_plain_username')!r}")
    if watcher.reason:
        raise KafkaAuthenticationError(
            f"{where} refused {login} ({watcher.reason}); check the user name and password in "
            "sasl.jaas.config (and, for SCRAM, that the user exists for this mechanism)")
    if watcher.closed >= CLOSED_LOGINS:
        raise KafkaAuthenticationError(
            f"{where} closed the connection {watcher.closed} times during {login}: it refuses "
            f"these credentials, or the listener is not a {protocol} listener. Check the user "
            "name and password in sasl.jaas.config (for SCRAM, that the user exists for this "
            "mechanism) and security.protocol")
    error = bootstrap_failure(config, last_error, sasl_refused=watcher.not_sasl)
    assert error is not None  # last_error is kafka-python's "Unable to bootstrap"
    raise error
