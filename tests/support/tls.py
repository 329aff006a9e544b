"""Test-time TLS material and SASL users for a secured local Kafka broker.

:func:`make_pki` builds, with the JDK's ``keytool`` only, a throw-away certificate authority,
a broker keystore (certificate for ``127.0.0.1`` and ``localhost``), a client keystore (for
mutual TLS) and the truststores a client may be given: PEM, JKS and PKCS12. Every store and
key shares one random password. :class:`BrokerSecurity` is what
:class:`~dstream_kafka.operate.services.kafka.KafkaCluster` needs to open its ``SSL``,
``SASL_PLAINTEXT`` and ``SASL_SSL`` listeners: the material and the PLAIN / SCRAM-SHA-512
users, and it builds the Java-spelled ``kafkaParams`` a client passes to reach each listener.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from dstream_kafka.client.keystores import keystore_pem, keytool, write_private
from dstream_kafka.operate.services.kafka import SECURE_PROTOCOLS, listener_properties

__all__ = ["SECURE_PROTOCOLS", "SASL_MECHANISMS", "BrokerSecurity", "Pki", "listener_properties",
           "make_pki"]

#: SASL mechanisms the secured broker enables.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-512")
_PASS_ENV = "DSTREAM_KAFKA_PKI_PASS"
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class Pki:
    """Paths of the generated stores and their common password."""

    folder: Path
    password: str = field(repr=False)

    @property
    def ca_pem(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.folder / "broker.p12"

    def client_keystore(self, store_type: str = "PKCS12") -> Path:
        """The client's key and certificate: ``PKCS12``, ``JKS`` or ``PEM`` (key + chain)."""
        return self.folder / {"PKCS12": "client.p12", "JKS": "client.jks",
                              "PEM": "client-keystore.pem"}[store_type]

    def truststore(self, store_type: str = "PEM") -> Path:
        """The CA certificate as a truststore: ``PEM``, ``JKS`` or ``PKCS12``."""
        return self.folder / {"PEM": "ca.pem", "JKS": "truststore.jks",
                              "PKCS12": "truststore.p12"}[store_type]


def _keytool(pki_password: str, *args: str) -> str:
    return keytool(*args, secrets={_PASS_ENV: pki_password}, what="Generating test certificates")


def _entity(folder: Path, password: str, name: str, ca: Path) -> Path:
    """Create ``<name>.p12`` with a key and a certificate signed by the CA in ``ca``."""
    store = folder / f"{name}.p12"
    pw = ("-storepass:env", _PASS_ENV)
    _keytool(password, "-genkeypair", "-alias", name, "-keyalg", "RSA", "-keysize", "2048",
             "-dname", f"CN={name},O=dstream-kafka-test", "-validity", "30",
             "-keystore", str(store), "-storetype", "PKCS12", *pw)
    request = _keytool(password, "-certreq", "-alias", name, "-keystore", str(store), *pw)
    (folder / f"{name}.csr").write_text(request)
    _keytool(password, "-gencert", "-alias", "ca", "-keystore", str(ca), *pw, "-rfc",
             "-infile", str(folder / f"{name}.csr"), "-outfile", str(folder / f"{name}.crt"),
             "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "30")
    _keytool(password, "-importcert", "-noprompt", "-alias", "ca", "-file",
             str(folder / "ca.pem"), "-keystore", str(store), *pw)
    _keytool(password, "-importcert", "-noprompt", "-alias", name, "-file",
             str(folder / f"{name}.crt"), "-keystore", str(store), *pw)
    return store


def make_pki(folder: str | Path, password: str | None = None) -> Pki:
    """Generate a CA, broker and client keystores and truststores under ``folder``.

    Takes about ten ``keytool`` runs (some seconds). Certificates are valid for 30 days.
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    password = password or "pki-" + secrets.token_hex(12)
    pw = ("-storepass:env", _PASS_ENV)
    ca = root / "ca.p12"
    _keytool(password, "-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048",
             "-dname", "CN=dstream-kafka-test-ca", "-ext", "bc:c", "-validity", "30",
             "-keystore", str(ca), "-storetype", "PKCS12", *pw)
    _keytool(password, "-exportcert", "-rfc", "-alias", "ca", "-keystore", str(ca), *pw,
             "-file", str(root / "ca.pem"))
    _entity(root, password, "broker", ca)
    client = _entity(root, password, "client", ca)
    for kind, name in (("JKS", "truststore.jks"), ("PKCS12", "truststore.p12")):
        _keytool(password, "-importcert", "-noprompt", "-alias", "ca", "-file",
                 str(root / "ca.pem"), "-keystore", str(root / name), "-storetype", kind, *pw)
    _keytool(password, "-importkeystore", "-noprompt", "-srckeystore", str(client),
             "-srcstoretype", "PKCS12", "-srcstorepass:env", _PASS_ENV,
             "-destkeystore", str(root / "client.jks"), "-deststoretype", "JKS",
             "-deststorepass:env", _PASS_ENV, "-destkeypass:env", _PASS_ENV)
    certfile, keyfile, _ = keystore_pem(str(client), "PKCS12", password, password)
    write_private(root / "client-keystore.pem",
                  Path(keyfile).read_text() + Path(certfile).read_text())
    return Pki(root, password)


@dataclass(frozen=True)
class BrokerSecurity:
    """TLS material and SASL users of a secured broker.

    ``users`` maps user name to password; every user exists for PLAIN and for SCRAM-SHA-512.
    The first user is the broker's own (the listeners' JAAS entries name it).
    """

    pki: Pki
    users: dict[str, str] = field(repr=False)

    @classmethod
    def generate(cls, folder: str | Path,
                 users: tuple[str, ...] = ("admin", "alice")) -> BrokerSecurity:
        """Return new material under ``folder`` and random passwords for ``users``."""
        return cls(make_pki(folder), {u: f"{u}-" + secrets.token_hex(12) for u in users})

    def server_properties(self) -> dict[str, Any]:
        """Return the listener settings for ``server.properties`` (all but the ports)."""
        admin, admin_pw = next(iter(self.users.items()))
        plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.users.items())
        props: dict[str, Any] = {
            "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
            "ssl.keystore.location": str(self.pki.broker_keystore),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": self.pki.password,
            "ssl.key.password": self.pki.password,
            "ssl.truststore.location": str(self.pki.truststore("PKCS12")),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.password": self.pki.password,
            # The SSL listener wants a client certificate: the client keystore is exercised.
            "listener.name.ssl.ssl.client.auth": "required",
        }
        for listener in ("sasl_plaintext", "sasl_ssl"):
            props[f"listener.name.{listener}.plain.sasl.jaas.config"] = (
                f'{_LOGIN_MODULES["PLAIN"]} required username="{admin}" password="{admin_pw}" '
                f"{plain_users};")
            props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = (
                f"{_LOGIN_MODULES['SCRAM-SHA-512']} required;")
        return props

    def scram_arguments(self) -> list[str]:
        """Return ``kafka-storage format`` arguments creating every SCRAM-SHA-512 user."""
        args: list[str] = []
        for user, password in self.users.items():
            args += ["--add-scram", f'SCRAM-SHA-512=[name={user},password={password}]']
        return args

    def client_params(self, protocol: str, mechanism: str = "PLAIN", user: str = "alice",
                      password: str | None = None, truststore_type: str = "PEM",
                      keystore_type: str = "PKCS12") -> dict[str, str]:
        """Return Java-spelled client settings for a listener of ``protocol``.

        SASL protocols get ``sasl.mechanism`` and ``sasl.jaas.config`` for ``user`` (with
        ``password`` instead of the real one when given); SSL protocols get a truststore of
        ``truststore_type``; ``SSL`` (mutual TLS) also the client keystore of
        ``keystore_type``. No ``bootstrap.servers``: the cluster knows the ports.
        """
        params: dict[str, str] = {"security.protocol": protocol}
        if protocol.startswith("SASL"):
            secret = self.users[user] if password is None else password
            params["sasl.mechanism"] = mechanism
            params["sasl.jaas.config"] = (
                f'{_LOGIN_MODULES[mechanism]} required username="{user}" password="{secret}";')
        if protocol.endswith("SSL"):
            params["ssl.truststore.location"] = str(self.pki.truststore(truststore_type))
            params["ssl.truststore.type"] = truststore_type
            if truststore_type != "PEM":
                params["ssl.truststore.password"] = self.pki.password
        if protocol == "SSL":
            params["ssl.keystore.location"] = str(self.pki.client_keystore(keystore_type))
            params["ssl.keystore.type"] = keystore_type
            if keystore_type != "PEM":
                params["ssl.keystore.password"] = self.pki.password
            params["ssl.key.password"] = self.pki.password
        return params
