"""Java keystores and truststores as the PEM files the Python Kafka clients read.

Spark users pass ``ssl.truststore.location`` / ``ssl.keystore.location`` (JKS or PKCS12, with
passwords); kafka-python and librdkafka read PEM files only. :func:`truststore_pem` and
:func:`keystore_pem` convert once per store content: the JDK's ``keytool`` lists the
certificates and turns JKS into PKCS12, ``openssl pkcs12`` takes the private key out of a
PKCS12 store, encrypted again with the key password. Passwords reach the tools through their
environment (``-storepass:env``, ``-passin env:``), never the command line, and never appear in an
error. The PEM files go to a private folder (mode 0700, files 0600) named by a digest of the
store's bytes and passwords, on the host where the parameters are translated (the driver; in
local and single-host standalone mode the executors share it).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from dstream_kafka.errors import ConfigurationError, MissingDependencyError

__all__ = ["STORE_TYPES", "content_digest", "keystore_pem", "keytool", "pem_folder", "run_tool",
           "truststore_pem", "write_private"]

#: Store types Java accepts for ``ssl.truststore.type`` / ``ssl.keystore.type``.
STORE_TYPES = ("JKS", "PKCS12", "PEM")
_PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)
# Environment variable names that carry passwords to keytool / openssl.
_STORE_ENV = "DSTREAM_KAFKA_STOREPASS"
_KEY_ENV = "DSTREAM_KAFKA_KEYPASS"
_OUT_ENV = "DSTREAM_KAFKA_OUTPASS"


def _tool(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None and name == "keytool":
        java = shutil.which("java")
        if java is not None:
            candidate = Path(java).resolve().parent / "keytool"
            found = str(candidate) if candidate.is_file() else None
    if found is None:
        raise MissingDependencyError(
            f"{name} (Debian package {package}) is needed to convert Java keystores to PEM; "
            f"install it, or convert the store yourself and pass PEM files "
            "(ssl.truststore.type=PEM / ssl.keystore.type=PEM)")
    return found


def run_tool(argv: Sequence[str], secrets: Mapping[str, str], what: str, hint: str = "") -> str:
    """Run ``argv`` with ``secrets`` added to its environment; return its standard output.

    Raises
    ------
    ConfigurationError
        When the tool fails: names ``what``, quotes the tool's error line with every secret
        value removed from it, and ends with ``hint``.
    """
    env = {**os.environ, **secrets}
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, check=False,
                          timeout=120)
    if proc.returncode != 0:
        lines = (proc.stderr.strip() + "\n" + proc.stdout.strip()).strip().splitlines()
        errors = [line for line in lines if "error" in line.lower()]
        detail = (errors or lines or [f"exit code {proc.returncode}"])[0].strip()
        for secret in secrets.values():
            if secret:
                detail = detail.replace(secret, "*****")
        raise ConfigurationError(f"{what} failed: {detail.rstrip(' .?')}{hint}")
    return proc.stdout


def keytool(*args: str, secrets: Mapping[str, str] | None = None, what: str = "keytool",
            hint: str = "") -> str:
    """Run the JDK's ``keytool`` with ``args``; passwords go in ``secrets`` (environment)."""
    return run_tool([_tool("keytool", "openjdk-17-jre-headless"), *args], secrets or {}, what,
                    hint)


def pem_folder(digest: str) -> Path:
    """Return this user's private folder for the PEM files of one store (created, mode 0700)."""
    root = Path(tempfile.gettempdir()) / f"dstream-kafka-tls-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    if root.stat().st_uid != os.getuid() or root.stat().st_mode & 0o077:
        raise ConfigurationError(
            f"{root} is not a private folder of this user; remove it so the converted "
            "keystores can be written there safely")
    folder = root / digest
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` readable by this user only, atomically; return ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
    return path


def _read_store(location: str, field: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise ConfigurationError(
            f"{field}={location} cannot be read ({exc.strerror}); give the path of the store "
            "on this host") from None


def content_digest(*parts: bytes | str | None) -> str:
    sha = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else (part or b"")
        sha.update(len(data).to_bytes(8, "big") + data)
    return sha.hexdigest()[:32]


def _hint(store: str) -> str:
    return (f". Check ssl.{store}.password and that ssl.{store}.type names the store's format "
            "(JKS, PKCS12 or PEM)")


def _store_type(value: str | None, field: str) -> str:
    kind = (value or "JKS").strip().upper()
    if kind not in STORE_TYPES:
        raise ConfigurationError(
            f"{field} must be one of {', '.join(STORE_TYPES)}, got {kind!r}")
    return kind


def truststore_pem(location: str, store_type: str | None, password: str | None) -> str:
    """Return a PEM file holding the certificates of truststore ``location``.

    A PEM store is returned as it is. A JKS or PKCS12 store (Java's default type is JKS) is
    listed with ``keytool -list -rfc``; ``password`` may be None for stores whose
    certificates are readable without one.

    Raises
    ------
    ConfigurationError
        Naming ``ssl.truststore.location`` / ``ssl.truststore.password`` when the store is
        missing, of another type, has no certificate or the password does not open it.
    """
    kind = _store_type(store_type, "ssl.truststore.type")
    data = _read_store(location, "ssl.truststore.location")
    if kind == "PEM":
        return location
    folder = pem_folder(content_digest("trust", data, kind, password))
    target = folder / "truststore.pem"
    if target.is_file():
        return str(target)
    secrets = {_STORE_ENV: password} if password else {}
    args = ["-list", "-rfc", "-keystore", location, "-storetype", kind]
    if password:
        args += ["-storepass:env", _STORE_ENV]
    listed = keytool(*args, secrets=secrets,
                     what=f"Reading ssl.truststore.location={location} as {kind} with "
                          "ssl.truststore.password", hint=_hint("truststore"))
    certificates = _PEM_CERT.findall(listed)
    if not certificates:
        raise ConfigurationError(
            f"ssl.truststore.location={location} holds no certificate; add the CA that signed "
            "the brokers' certificates")
    write_private(target, "\n".join(certificates) + "\n")
    return str(target)


def keystore_pem(location: str, store_type: str | None, store_password: str | None,
                 key_password: str | None) -> tuple[str, str, str | None]:
    """Return ``(certfile, keyfile, key_password)`` for keystore ``location``.

    A PEM keystore (key and certificate chain in one file) is returned as it is. JKS is turned
    into PKCS12 by ``keytool -importkeystore``, and the PKCS12 store's first private key and
    its certificate are written as PEM by ``openssl pkcs12``, the key encrypted with
    ``key_password`` (Java's ``ssl.key.password``, by default the store password), which is
    returned for the client's ``ssl_password``.

    Raises
    ------
    ConfigurationError
        Naming ``ssl.keystore.location`` / ``ssl.keystore.password`` when the store is
        missing, of another type, or the passwords do not open it.
    """
    kind = _store_type(store_type, "ssl.keystore.type")
    data = _read_store(location, "ssl.keystore.location")
    if kind == "PEM":
        return location, location, key_password
    if not store_password:
        raise ConfigurationError(
            f"ssl.keystore.location={location} is a {kind} store: set ssl.keystore.password "
            "(and ssl.key.password if the key has its own)")
    key_password = key_password or store_password
    folder = pem_folder(content_digest("key", data, kind, store_password, key_password))
    certfile, keyfile = folder / "certificate.pem", folder / "key.pem"
    if certfile.is_file() and keyfile.is_file():
        return str(certfile), str(keyfile), key_password
    secrets = {_STORE_ENV: store_password, _KEY_ENV: key_password, _OUT_ENV: key_password}
    what = f"Reading ssl.keystore.location={location} as {kind} with ssl.keystore.password"
    pkcs12 = location
    if kind == "JKS":
        pkcs12 = str(folder / "keystore.p12")
        Path(pkcs12).unlink(missing_ok=True)
        listed = keytool("-list", "-keystore", location, "-storetype", "JKS",
                         "-storepass:env", _STORE_ENV, secrets=secrets, what=what,
                         hint=_hint("keystore"))
        # "<alias>, <date>, PrivateKeyEntry," lines: a key password needs its alias named.
        aliases = re.findall(r"(?m)^([^,\n]+), .*, PrivateKeyEntry,\s*$", listed)
        if not aliases:
            raise ConfigurationError(
                f"ssl.keystore.location={location} holds no private key; the keystore must "
                "hold the client's key and certificate")
        keytool("-importkeystore", "-noprompt", "-srckeystore", location, "-srcstoretype", "JKS",
                "-srcalias", aliases[0],
                "-srcstorepass:env", _STORE_ENV, "-srckeypass:env", _KEY_ENV,
                "-destkeystore", pkcs12, "-deststoretype", "PKCS12",
                "-deststorepass:env", _KEY_ENV, "-destkeypass:env", _KEY_ENV,
                secrets=secrets, what=what + " and ssl.key.password", hint=_hint("keystore"))
        os.chmod(pkcs12, 0o600)
        secrets[_STORE_ENV] = key_password
    openssl = _tool("openssl", "openssl")
    common = [openssl, "pkcs12", "-in", pkcs12, "-passin", f"env:{_STORE_ENV}"]
    chain = run_tool([*common, "-clcerts", "-nokeys"], secrets, what, _hint("keystore"))
    key = run_tool([*common, "-nocerts", "-passout", f"env:{_OUT_ENV}"], secrets,
                   what + " and ssl.key.password", _hint("keystore"))
    if "PRIVATE KEY" not in key:
        raise ConfigurationError(
            f"ssl.keystore.location={location} holds no private key; the keystore must hold the "
            "client's key and certificate")
    write_private(certfile, chain)
    write_private(keyfile, key)
    return str(certfile), str(keyfile), key_password
