"""Java-spelled security settings: JAAS entries, TLS versions, refused settings, no secret in
any message. Keystore conversion runs against real stores in tests/integration/test_security.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dstream_kafka.client.librdkafka import librdkafka_config
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.client.kafka_params import consumer_config, fix_kafka_params
from dstream_kafka.client.security import parse_jaas, security_config

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
BASE = {"bootstrap.servers": "127.0.0.1:9093", "group.id": "g"}


@pytest.mark.parametrize("module", [PLAIN, SCRAM])
def test_a_plain_or_scram_jaas_entry_gives_the_user_name_and_password(module):
    entry = f'{module} required username="alice" password="s3cr\\"et";'
    assert parse_jaas(entry) == {"username": "alice", "password": 's3cr"et'}


def test_unquoted_jaas_values_and_tokenauth_false_are_accepted():
    entry = f"{SCRAM} required username=alice password=pw tokenauth=false;"
    assert parse_jaas(entry) == {"username": "alice", "password": "pw"}


def test_a_kerberos_jaas_entry_is_refused_naming_kinit_as_the_alternative():
    with pytest.raises(ConfigurationError, match="kinit.*sasl.kerberos.service.name"):
        parse_jaas('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
                   'keyTab="/k.keytab" principal="kafka/host@REALM";')


def test_delegation_tokens_in_a_jaas_entry_are_refused():
    with pytest.raises(ConfigurationError, match="tokenauth=true"):
        parse_jaas(f'{SCRAM} required username="id" password="hmac" tokenauth=true;')


def test_an_unknown_jaas_option_is_refused_by_name_without_its_value():
    with pytest.raises(ConfigurationError, match="serviceName") as caught:
        parse_jaas(f'{PLAIN} required username="u" password="p" serviceName="hidden-value";')
    assert "hidden-value" not in str(caught.value)


def test_a_jaas_entry_without_a_control_flag_is_refused():
    with pytest.raises(ConfigurationError, match="control flag"):
        parse_jaas(f'{PLAIN} username="u" password="p";')


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters='"\\'),
               min_size=8))
def test_no_jaas_error_ever_quotes_the_password(password):
    for entry in (f'{PLAIN} required username="u" password="{password}" extra="x";',
                  f'{PLAIN} required password="{password}";',
                  f'{PLAIN} bogus password="{password}";',
                  f'com.example.Login required password="{password}";'):
        try:
            parse_jaas(entry)
        except ConfigurationError as exc:
            assert password not in str(exc)


@pytest.mark.parametrize("value", ["TLSv1.3", "TLSv1.2", "TLSv1.1,TLSv1.2,TLSv1.3"])
def test_restricting_tls_versions_is_refused_with_the_broker_side_alternative(value):
    with pytest.raises(ConfigurationError, match="ssl.enabled.protocols.*brokers"):
        consumer_config({**BASE, "ssl.enabled.protocols": value})


def test_javas_default_tls_versions_and_ssl_protocol_are_accepted():
    config = consumer_config({**BASE, "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
                              "ssl.protocol": "TLSv1.3"})
    assert "ssl_enabled_protocols" not in config and "ssl_protocol" not in config


def test_an_empty_endpoint_identification_algorithm_turns_host_name_checks_off():
    assert security_config({"ssl.endpoint.identification.algorithm": ""}) == {
        "ssl_check_hostname": False}
    assert security_config({"ssl.endpoint.identification.algorithm": "https"}) == {
        "ssl_check_hostname": True}


def test_a_missing_truststore_is_refused_naming_the_setting():
    with pytest.raises(ConfigurationError, match="ssl.truststore.location=/no/such.jks"):
        consumer_config({**BASE, "ssl.truststore.location": "/no/such.jks",
                         "ssl.truststore.password": "pw"})


def test_an_unknown_store_type_is_refused_with_the_accepted_types(tmp_path):
    store = tmp_path / "t.bks"
    store.write_bytes(b"x")
    with pytest.raises(ConfigurationError, match="ssl.truststore.type must be one of JKS, PKCS12"):
        consumer_config({**BASE, "ssl.truststore.location": str(store),
                         "ssl.truststore.type": "BKS"})


def test_a_pem_truststore_is_used_as_it_is(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    config = consumer_config({**BASE, "security.protocol": "SSL",
                              "ssl.truststore.location": str(ca), "ssl.truststore.type": "PEM"})
    assert config["ssl_cafile"] == str(ca)


def test_inline_pem_certificates_are_written_to_a_private_file(tmp_path):
    text = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----"
    config = consumer_config({**BASE, "ssl.truststore.certificates": text})
    with open(config["ssl_cafile"]) as handle:
        assert handle.read().strip() == text
    import os
    assert os.stat(config["ssl_cafile"]).st_mode & 0o077 == 0


def test_jaas_credentials_reach_both_backends():
    params = {**BASE, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.jaas.config": f'{SCRAM} required username="alice" password="pw";'}
    executor = fix_kafka_params(params)
    assert (executor["sasl_plain_username"], executor["sasl_plain_password"]) == ("alice", "pw")
    librdkafka = librdkafka_config(executor)
    assert (librdkafka["sasl.username"], librdkafka["sasl.password"]) == ("alice", "pw")
    assert librdkafka["sasl.mechanism"] == "SCRAM-SHA-512"
    assert librdkafka["security.protocol"] == "sasl_ssl"


@pytest.mark.parametrize("key", ["ssl.keystore.key", "ssl_keystore_key", "ssl.truststore.password",
                                 "ssl.keystore.password", "ssl.key.password"])
def test_keystore_keys_and_store_passwords_are_redacted(key):
    from dstream_kafka.client.kafka_params import REDACTED, redact

    assert redact({key: "-----BEGIN PRIVATE KEY-----"}) == {key: REDACTED}
