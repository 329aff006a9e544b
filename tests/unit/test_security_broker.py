"""The secured test broker's settings: listeners, JAAS users, SCRAM users, client params."""

from __future__ import annotations

from pathlib import Path

from tests.support.tls import BrokerSecurity, Pki, listener_properties

SECURITY = BrokerSecurity(Pki(Path("/pki"), "store-pw"), {"admin": "admin-pw", "alice": "alice-pw"})


def test_each_secure_protocol_gets_its_own_listener_and_the_controller_stays_plaintext():
    props = listener_properties(9092, 9093, {"SSL": 9094, "SASL_PLAINTEXT": 9095,
                                             "SASL_SSL": 9096})
    assert props["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094,SASL_PLAINTEXT://127.0.0.1:9095,"
        "SASL_SSL://127.0.0.1:9096")
    assert props["listeners"].endswith(",CONTROLLER://127.0.0.1:9093")
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
        "CONTROLLER:PLAINTEXT")


def test_an_unsecured_node_listens_in_plain_text_only():
    assert listener_properties(1, 2, {})["advertised.listeners"] == "PLAINTEXT://127.0.0.1:1"


def test_both_sasl_listeners_know_every_plain_user_and_enable_scram():
    props = SECURITY.server_properties()
    assert props["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-512"
    for listener in ("sasl_plaintext", "sasl_ssl"):
        plain = props[f"listener.name.{listener}.plain.sasl.jaas.config"]
        assert 'user_admin="admin-pw"' in plain and 'user_alice="alice-pw"' in plain
        assert "ScramLoginModule" in props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"]
    assert props["listener.name.ssl.ssl.client.auth"] == "required"


def test_every_user_is_formatted_as_a_scram_user():
    assert SECURITY.scram_arguments() == [
        "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-pw]",
        "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-pw]"]


def test_client_params_use_javas_spelling_for_each_listener():
    sasl_ssl = SECURITY.client_params("SASL_SSL", "SCRAM-SHA-512", truststore_type="JKS")
    assert sasl_ssl["sasl.mechanism"] == "SCRAM-SHA-512"
    assert 'username="alice" password="alice-pw"' in sasl_ssl["sasl.jaas.config"]
    assert sasl_ssl["ssl.truststore.type"] == "JKS" and sasl_ssl["ssl.truststore.password"]
    assert "ssl.keystore.location" not in sasl_ssl
    mtls = SECURITY.client_params("SSL")
    assert mtls["ssl.keystore.location"].endswith("client.p12") and "sasl.mechanism" not in mtls


def test_the_security_objects_repr_shows_no_password():
    assert "pw" not in repr(SECURITY)
