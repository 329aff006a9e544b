"""Store URIs parse into one store per scheme; bad ones name the field and the fix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.stores.uri import StoreURI, open_store, parse_store_uri
from dstream_kafka.stores import (
    CheckpointOffsetStore,
    KafkaGroupOffsetStore,
    PostgresOffsetStore,
    SqliteOffsetStore,
)

hosts = st.from_regex(r"[a-z][a-z0-9]{0,10}(\.[a-z][a-z0-9]{0,5}){0,2}", fullmatch=True)
ports = st.integers(1, 65535)
names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)


@pytest.mark.parametrize("uri, expected", [
    ("checkpoint:/data/ckpt", StoreURI("checkpoint", path="/data/ckpt")),
    ("checkpoint:hdfs://nn:8020/app", StoreURI("checkpoint", path="hdfs://nn:8020/app")),
    ("kafka://127.0.0.1:9092", StoreURI("kafka", (("127.0.0.1", 9092),))),
    ("kafka://a:1,b", StoreURI("kafka", (("a", 1), ("b", 9092)))),
    ("sqlite:///offsets.db", StoreURI("sqlite", path="offsets.db")),
    ("sqlite:////var/lib/offsets.db", StoreURI("sqlite", path="/var/lib/offsets.db")),
    ("postgresql://etl@db.local:5433/streams", StoreURI("postgresql", (("db.local", 5433),), "streams", "etl")),
    ("postgresql://etl@db.local/streams", StoreURI("postgresql", (("db.local", 5432),), "streams", "etl")),
    ("zookeeper://zk:2181/apps/etl", StoreURI("zookeeper", (("zk", 2181),), "apps/etl")),
    ("zookeeper://zk", StoreURI("zookeeper", (("zk", 2181),), "")),
    ("hbase://127.0.0.1:9090/offsets", StoreURI("hbase", (("127.0.0.1", 9090),), "offsets")),
    ("HBASE://h", StoreURI("hbase", (("h", 9090),), "")),
])
def test_each_documented_scheme_parses_into_its_parts(uri: str, expected: StoreURI) -> None:
    assert parse_store_uri(uri) == expected


@given(st.sampled_from(["kafka", "zookeeper", "hbase"]), hosts, ports, names)
def test_a_parsed_uri_prints_back_to_a_uri_that_parses_the_same(scheme: str, host: str, port: int,
                                                                 name: str) -> None:
    tail = "" if scheme == "kafka" else f"/{name}"
    parsed = parse_store_uri(f"{scheme}://{host}:{port}{tail}")
    assert parsed.hosts == ((host, port),)
    assert parse_store_uri(str(parsed)) == parsed


@given(st.text(max_size=60))
def test_any_text_either_parses_or_raises_a_configuration_error_naming_the_store_option(text: str) -> None:
    try:
        parse_store_uri(text)
    except ConfigurationError as exc:
        assert str(exc).startswith("--store: ")
        assert "\n" not in str(exc)


@given(st.from_regex(r"[a-z][a-z0-9+.-]{0,15}", fullmatch=True).filter(
    lambda s: s not in ("checkpoint", "kafka", "sqlite", "postgresql", "zookeeper", "hbase")))
def test_an_unknown_scheme_is_refused_with_the_list_of_schemes(scheme: str) -> None:
    with pytest.raises(ConfigurationError, match="unknown store scheme .*postgresql://USER@HOST:PORT/DB"):
        parse_store_uri(f"{scheme}://host/x")


@given(st.text(alphabet="abcdefghijkXYZ0123456789!$%&*()", min_size=1, max_size=30))
def test_a_postgresql_password_in_the_uri_is_refused_and_never_repeated(password: str) -> None:
    secret = "S3cr3t-" + password
    with pytest.raises(ConfigurationError) as caught:
        parse_store_uri(f"postgresql://etl:{secret}@127.0.0.1:5432/db")
    assert secret not in str(caught.value)
    assert "PGPASSWORD" in str(caught.value)


@pytest.mark.parametrize("uri, fragment", [
    ("", "empty"),
    ("/just/a/path", "unknown store scheme"),
    ("checkpoint:", "checkpoint directory is empty"),
    ("kafka:127.0.0.1:9092", "must be followed by //"),
    ("kafka://", "names no host"),
    ("kafka://h:0", "port of 'h:0'"),
    ("kafka://h:x", "port of 'h:x'"),
    ("kafka://h:9092/topic", "no path"),
    ("kafka://u@h:9092", "take no user"),
    ("sqlite://host/file.db", "three slashes"),
    ("sqlite:///", "path is empty"),
    ("postgresql://h:5432/db", "no USER"),
    ("postgresql://u@h:5432", "no DB"),
    ("postgresql://u@h:5432/db?sslmode=require", "query strings"),
    ("postgresql://u@a,b/db", "one HOST:PORT"),
    ("zookeeper://zk:2181/x?y=1", "query strings"),
    ("hbase://h:9090/a/b", "not one HBase table"),
    ("hbase://h_1:9090/t", "not HOST or HOST:PORT"),
])
def test_a_malformed_uri_names_what_is_wrong_and_the_expected_form(uri: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match="--store: ") as caught:
        parse_store_uri(uri)
    assert fragment in str(caught.value)


def test_open_store_builds_the_store_of_each_scheme_without_connecting(tmp_path: object) -> None:
    assert isinstance(open_store(f"checkpoint:{tmp_path}"), CheckpointOffsetStore)
    assert isinstance(open_store(f"sqlite:///{tmp_path}/o.db"), SqliteOffsetStore)
    kafka = open_store("kafka://127.0.0.1:1", timeout=2.0)
    assert isinstance(kafka, KafkaGroupOffsetStore)
    postgres = open_store("postgresql://etl@127.0.0.1:1/db", timeout=2.0)
    assert isinstance(postgres, PostgresOffsetStore)
    assert "user=etl" in repr(postgres) and "dbname=db" in repr(postgres)


def test_a_structured_streaming_uri_names_the_query_checkpoint_folder() -> None:
    from dstream_kafka.stores.uri import open_store, parse_store_uri
    from dstream_kafka.stores.structured_streaming import StructuredStreamingCheckpoint

    parsed = parse_store_uri("structured-streaming:/data/query/checkpoint")
    assert (parsed.scheme, parsed.path, str(parsed)) == (
        "structured-streaming", "/data/query/checkpoint", "structured-streaming:/data/query/checkpoint")
    assert isinstance(open_store("structured-streaming:ck"), StructuredStreamingCheckpoint)
