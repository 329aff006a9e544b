"""Schema Registry settings that pickle to executors, and one registry client per process.

The driver holds only :class:`RegistrySettings` (plain values). Each Python worker builds its
``confluent_kafka.schema_registry.SchemaRegistryClient`` from them the first time a decoder needs
it (:func:`registry_client`) and keeps it, with every writer schema it fetched by id, for the life
of the process: a client holds an HTTP connection pool and is never pickled.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit, urlunsplit

from dstream_kafka.client.param_checks import REDACTED
from dstream_kafka.errors import ConfigurationError, MissingDependencyError, SchemaRegistryError

__all__ = ["RegistrySettings", "registry_client", "bounded_call", "cached_schema",
           "clear_registry_caches"]

_T = TypeVar("_T")


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{REDACTED}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True)
class RegistrySettings:
    """Where and how executors reach a Schema Registry (Confluent's REST API).

    Plain values only, so a decoder that holds them pickles to executors; the password never
    shows in ``repr``, in errors or in logs.

    Parameters
    ----------
    url : str
        Base URL of the Confluent-compatible API, e.g. ``http://host:8081`` for Confluent's
        registry or ``http://host:8080/apis/ccompat/v7`` for Apicurio; comma-separated for several.
    basic_auth : str, optional
        ``user:password`` for HTTP basic authentication (``basic.auth.user.info``).
    ssl_ca_location : str, optional
        PEM file of the certificate authorities that sign the registry's certificate.
    ssl_certificate_location, ssl_key_location : str, optional
        PEM certificate and key of the client, for mutual TLS.
    ssl_key_password : str, optional
        Password of an encrypted ``ssl_key_location``.
    timeout : float
        Seconds allowed for one registry call, its client's retries included: a registry that
        does not answer fails the call with :class:`~dstream_kafka.errors.SchemaRegistryError`
        after this long (each HTTP request gets the same bound).
    """

    url: str
    basic_auth: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not re.match(r"^(https?|mock)://", self.url.strip()):
            raise ConfigurationError(
                f"RegistrySettings url {self.display_url!r} must start with http:// or https:// "
                "(the Schema Registry's REST API base URL)")
        if self.basic_auth is not None and ":" not in self.basic_auth:
            raise ConfigurationError(
                "RegistrySettings basic_auth must be 'user:password' (the password was not shown)")
        if (self.ssl_certificate_location is None) != (self.ssl_key_location is None):
            raise ConfigurationError(
                "RegistrySettings needs ssl_certificate_location and ssl_key_location together "
                "for mutual TLS; give both or neither")
        if not self.timeout > 0:
            raise ConfigurationError(f"RegistrySettings timeout must be > 0 seconds, got {self.timeout!r}")

    @property
    def display_url(self) -> str:
        """The URL with any ``user:password@`` replaced, fit for messages."""
        return ",".join(_without_userinfo(u) for u in str(self.url).split(","))

    def __repr__(self) -> str:
        shown = [f"url={self.display_url!r}"]
        if self.basic_auth is not None:
            shown.append(f"basic_auth={REDACTED!r}")
        for name in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location"):
            if getattr(self, name) is not None:
                shown.append(f"{name}={getattr(self, name)!r}")
        if self.ssl_key_password is not None:
            shown.append(f"ssl_key_password={REDACTED!r}")
        shown.append(f"timeout={self.timeout!r}")
        return f"RegistrySettings({', '.join(shown)})"

    def secrets(self) -> list[str]:
        """The secret values, to scrub from any text that leaves this module."""
        found = [s for s in (self.ssl_key_password,) if s]
        if self.basic_auth:
            found += [self.basic_auth, self.basic_auth.split(":", 1)[1]]
        for url in str(self.url).split(","):
            parts = urlsplit(url)
            if parts.password:
                found.append(parts.password)
        return sorted((s for s in found if s), key=len, reverse=True)

    def scrub(self, text: str) -> str:
        """Return ``text`` without any of the secret values."""
        for secret in self.secrets():
            text = text.replace(secret, REDACTED)
        return text

    def client_conf(self) -> dict[str, Any]:
        """The ``SchemaRegistryClient`` configuration these settings stand for."""
        conf: dict[str, Any] = {"url": self.url, "timeout": self.timeout}
        optional = {
            "basic.auth.user.info": self.basic_auth,
            "ssl.ca.location": self.ssl_ca_location,
            "ssl.certificate.location": self.ssl_certificate_location,
            "ssl.key.location": self.ssl_key_location,
            "ssl.key.password": self.ssl_key_password,
        }
        conf.update({k: v for k, v in optional.items() if v is not None})
        return conf


_lock = threading.Lock()
_clients: dict[RegistrySettings, Any] = {}
_schemas: dict[tuple[RegistrySettings, object, object], Any] = {}


def registry_client(settings: RegistrySettings) -> Any:
    """Return this process's ``SchemaRegistryClient`` for ``settings``, built on first use."""
    with _lock:
        client = _clients.get(settings)
        if client is not None:
            return client
    try:
        from confluent_kafka.schema_registry import SchemaRegistryClient
    except ImportError:
        raise MissingDependencyError(
            "Schema Registry decoding needs confluent-kafka's registry client; install it with "
            "`pip install dstream_kafka[registry]`") from None
    try:
        client = SchemaRegistryClient(settings.client_conf())
    except Exception as exc:  # the client's own checks (bad ssl files, bad keys)
        raise ConfigurationError(
            f"cannot build a Schema Registry client for {settings!r}: "
            f"{settings.scrub(f'{type(exc).__name__}: {exc}')}") from None
    with _lock:
        return _clients.setdefault(settings, client)


def bounded_call(settings: RegistrySettings, call: Callable[[], _T]) -> _T:
    """Return ``call()`` (a request of the registry client), or raise :class:`TimeoutError`
    when it has not returned within ``settings.timeout`` seconds.

    The client retries a request that timed out or met a 5xx answer (``max.retries``, 3, with
    backoff), so its own per-request timeout bounds one attempt only: ``timeout=3`` took 18 s
    against a registry that accepted connections and never answered. The call runs on a daemon
    thread; one that is given up on ends by itself with the client's retries and its result is
    dropped. ``call``'s own exception is raised here unchanged.
    """
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="dstream-registry-call", daemon=True).start()
    if not done.wait(settings.timeout):
        raise TimeoutError(
            f"no answer within {settings.timeout:g} s (RegistrySettings.timeout bounds each "
            "registry call, the client's retries included)")
    ok, value = outcome[0]
    if not ok:
        raise value
    result: _T = value
    return result


def cached_schema(settings: RegistrySettings, kind: object, key: object,
                  build: Callable[[], _T]) -> _T:
    """Return what ``build()`` returns for (``kind``, ``key``), once per process and registry.

    Writer schemas never change under their id, so a fetched and parsed schema is kept for the
    life of the worker. ``build`` runs outside the lock (it may do HTTP); a race builds twice and
    keeps the first.
    """
    cache_key = (settings, kind, key)
    with _lock:
        if cache_key in _schemas:
            cached: _T = _schemas[cache_key]
            return cached
    value = build()
    with _lock:
        kept: _T = _schemas.setdefault(cache_key, value)
        return kept


def clear_registry_caches() -> None:
    """Forget this process's registry clients and fetched schemas (tests, credential rotation)."""
    with _lock:
        _clients.clear()
        _schemas.clear()


def registry_failure(settings: RegistrySettings, what: str, exc: BaseException) -> SchemaRegistryError:
    """Return a :class:`SchemaRegistryError` for ``exc`` raised while doing ``what``, secrets scrubbed."""
    detail = settings.scrub(f"{type(exc).__name__}: {exc}")
    return SchemaRegistryError(f"Schema Registry {settings.display_url} failed {what}: {detail}")
