"""The Kafka output's settings, records and task logic, without a broker."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.errors import ConfigurationError, OutputFencedError
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.write import producer_cache
from dstream_kafka.write import task as write_task
from dstream_kafka.write.records import Message, message_builder
from dstream_kafka.write.settings import OutputSettings, serializer_for, transactional_id

SERVERS = {"bootstrap.servers": "broker1:9092"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="app" '
        'password="s3cret-pw";')


def _settings(params: dict[str, Any] | None = None, **options: Any) -> OutputSettings:
    options = {"topic": "out", "guarantee": "at-least-once", "backend": "kafka-python",
               **options}
    return OutputSettings.of({**SERVERS, **(params or {})}, options["topic"],
                             options["guarantee"], options["backend"],
                             options.get("application_id"))


def test_producer_params_take_java_names_and_typed_strings() -> None:
    settings = _settings({"linger.ms": "5", "acks": "all", "compression.type": "zstd"})
    assert settings.producer["linger_ms"] == 5
    assert settings.producer["compression_type"] == "zstd"
    assert settings.producer["acks"] == -1 and settings.producer["enable_idempotence"] is True


def test_a_misspelt_producer_param_is_refused_with_the_closest_name() -> None:
    with pytest.raises(ConfigurationError, match="did you mean linger.ms"):
        _settings({"lingr.ms": 5})


def test_a_consumer_param_given_to_the_output_is_named_as_one() -> None:
    with pytest.raises(ConfigurationError, match="group.id.*consumer setting"):
        _settings({"group.id": "app"})


def test_a_transactional_id_is_refused_because_the_output_derives_it() -> None:
    with pytest.raises(ConfigurationError, match="transactional.id.*applicationId"):
        _settings({"transactional.id": "mine"})


@pytest.mark.parametrize("params", [{"acks": "1"}, {"enable.idempotence": "false"}])
def test_settings_that_break_idempotence_are_refused(params: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="idempotent producer"):
        _settings(params)


@pytest.mark.parametrize("options, field", [
    ({"guarantee": "exactly_once"}, "guarantee"), ({"backend": "java"}, "backend"),
    ({"topic": ""}, "topic"), ({"application_id": "a b"}, "applicationId")])
def test_bad_output_options_are_refused_naming_the_option(options: dict[str, Any],
                                                         field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        _settings(**options)


def test_the_settings_repr_never_shows_a_sasl_password() -> None:
    settings = _settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                          "sasl.jaas.config": JAAS})
    assert settings.producer["sasl_plain_password"] == "s3cret-pw"
    assert "s3cret-pw" not in repr(settings)


def test_a_bad_value_of_an_unlisted_key_is_described_not_quoted() -> None:
    with pytest.raises(ConfigurationError) as caught:
        _settings({"linger.ms": "hunter2"})
    assert "hunter2" not in str(caught.value)


def test_the_librdkafka_translation_hashes_keys_as_java_and_keeps_producer_settings() -> None:
    pytest.importorskip("confluent_kafka")
    settings = _settings({"linger.ms": 7, "security.protocol": "SASL_SSL",
                          "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS},
                         backend="confluent-kafka")
    conf = settings.librdkafka
    assert conf is not None
    assert conf["partitioner"] == "murmur2_random" and conf["linger.ms"] == 7
    assert conf["acks"] == "all" and conf["enable.idempotence"] is True
    assert conf["sasl.username"] == "app" and conf["security.protocol"] == "sasl_ssl"
    assert "group.id" not in conf and "isolation.level" not in conf


def test_the_transactional_id_is_the_application_topic_and_partition() -> None:
    assert transactional_id("app", "orders", 3) == "app-orders-3"


def _build(topic: str | None = "out", key: Any = None, value: Any = None) -> Any:
    return message_builder(topic, serializer_for("key", key), serializer_for("value", value))


def test_pairs_and_dicts_become_messages_with_str_encoded_as_utf8() -> None:
    build = _build()
    assert build(("k", b"v")) == Message("out", None, b"k", b"v", [])
    assert build({"value": "v", "topic": "other", "partition": 2,
                  "headers": {"h": "x"}}) == Message("other", 2, None, b"v", [("h", b"x")])
    assert build({"key": b"k", "value": None}).value is None  # a tombstone


@pytest.mark.parametrize("record, match", [
    ({"key": b"k"}, "needs 'value'"), ({"value": b"v", "offset": 1}, "unknown field"),
    ([b"k", b"v"], "pairs or dicts"), ({"value": b"v", "partition": -1}, "partition"),
    ({"value": b"v", "headers": [("h", 1)]}, "headers"), ((b"k", 12), "value is int")])
def test_bad_records_are_refused_naming_the_field(record: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        _build()(record)


def test_a_record_without_a_topic_needs_one_from_the_output() -> None:
    with pytest.raises(ConfigurationError, match="topic"):
        _build(topic=None)((b"k", b"v"))


def test_a_java_serializer_name_admits_only_its_type_and_a_callable_must_return_bytes() -> None:
    build = _build(value="str")
    assert build((None, "v")).value == b"v"
    with pytest.raises(ConfigurationError, match="StringSerializer"):
        build((None, b"v"))
    with pytest.raises(ConfigurationError, match="must return bytes"):
        _build(value=lambda v: 42)((None, "v"))


class _Fenced(Exception):
    pass


class _FakeProducer:
    def __init__(self, committed: int | None = None, fail_send: bool = False,
                 fenced: bool = False, fail_commit: bool = False) -> None:
        self.calls: list[str] = []
        self._committed = committed
        self._fail_send = fail_send
        self._fenced = fenced
        self._fail_commit = fail_commit

    def fenced(self, error: BaseException) -> bool:
        return isinstance(error, _Fenced)

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append(name)
            if name == "send" and self._fail_send:
                raise RuntimeError("broker gone")
            if name in ("commit", "abort") and self._fail_commit:
                raise RuntimeError(f"{name} timed out")
            if name == "send_offsets" and self._fenced:
                raise _Fenced("another producer of this transactional.id was initialised")
            return self._committed if name == "committed" else None
        return call


@pytest.fixture
def no_kept_producers() -> Any:
    producer_cache.clear()
    yield
    producer_cache.clear()


def _run(monkeypatch: pytest.MonkeyPatch, producer: _FakeProducer, records: Any,
         until: int = 10, *more: _FakeProducer) -> list[int]:
    opened = iter((producer, *more))
    monkeypatch.setattr(producer_cache, "open_producer", lambda settings, tid: next(opened))
    settings = _settings(guarantee="exactly-once", application_id="app")
    return list(write_task.write_exactly_once(settings, "g", 0, OffsetRange("in", 0, 5, until),
                                              records))


def test_a_transaction_sends_the_offsets_and_records_then_commits_and_keeps_its_producer(
        monkeypatch, no_kept_producers) -> None:
    producer = _FakeProducer(committed=5)
    assert _run(monkeypatch, producer, [(b"k", b"v")] * 2) == [2]
    assert producer.calls == ["init", "committed", "begin", "send_offsets", "send", "send",
                              "commit"]
    assert _run(monkeypatch, producer, [(b"k", b"v")]) == [1]
    assert producer.calls[7:] == ["committed", "begin", "send_offsets", "send", "commit"]


def test_a_kept_producer_fenced_before_writing_is_replaced_and_the_transaction_redone(
        monkeypatch, no_kept_producers) -> None:
    kept = _FakeProducer(committed=5)
    assert _run(monkeypatch, kept, [(b"k", b"v")]) == [1]
    kept._fenced = True
    new = _FakeProducer(committed=5)
    records = iter([(b"k", b"v")] * 3)  # a task's iterator: it can be read once
    assert _run(monkeypatch, new, records) == [3]  # the cache still holds ``kept``
    assert kept.calls[6:] == ["committed", "begin", "send_offsets", "close"]
    assert new.calls == ["init", "committed", "begin", "send_offsets", "send", "send", "send",
                         "commit"]


def test_a_new_producer_found_fenced_fails_the_task_without_a_retry(
        monkeypatch, no_kept_producers) -> None:
    producer = _FakeProducer(committed=5, fenced=True)
    with pytest.raises(OutputFencedError, match="another driver of this application") as caught:
        _run(monkeypatch, producer, [(b"k", b"v")])
    assert isinstance(caught.value.__cause__, _Fenced)  # the client's own error, chained
    # A fenced producer cannot abort (the broker aborted its transaction) and is dropped.
    assert producer.calls.count("init") == 1 and "abort" not in producer.calls
    assert producer.calls[-1] == "close"


def test_a_failed_commit_replaces_the_producer_at_once_and_keeps_the_initialised_one(
        monkeypatch, no_kept_producers) -> None:
    failing = _FakeProducer(committed=5, fail_commit=True)
    replacement = _FakeProducer(committed=5)
    with pytest.raises(RuntimeError, match="commit timed out"):
        _run(monkeypatch, failing, [(b"k", b"v")], 10, replacement)
    assert failing.calls[-3:] == ["commit", "abort", "close"]
    assert replacement.calls == ["init"]  # its epoch fences the failed producer's requests
    assert producer_cache.stats()["unsettled_replacements"] >= 1
    # The next task takes the replacement as it is: no second init_transactions.
    assert _run(monkeypatch, _FakeProducer(), [(b"k", b"v")]) == [1]
    assert replacement.calls[1:] == ["committed", "begin", "send_offsets", "send", "commit"]


def test_a_failed_record_with_a_clean_abort_does_not_replace_the_producer_at_once(
        monkeypatch, no_kept_producers) -> None:
    producer = _FakeProducer(fail_send=True)
    unused = _FakeProducer()
    with pytest.raises(RuntimeError, match="broker gone"):
        _run(monkeypatch, producer, [(b"k", b"v")], 10, unused)
    assert unused.calls == []


@pytest.mark.parametrize("elapsed_s, kind, says", [
    (25.0, "KafkaWriteError", "outlived transaction.timeout.ms=20000"),
    (3.0, "OutputFencedError", "another driver of this application")])
def test_a_fenced_transaction_is_told_apart_by_whether_it_outlived_its_timeout(
        elapsed_s: float, kind: str, says: str) -> None:
    settings = _settings({"transaction.timeout.ms": 20000}, guarantee="exactly-once",
                         application_id="app")
    error = write_task._fenced_error(settings, OffsetRange("in", 0, 5, 10), "g", elapsed_s)
    assert type(error).__name__ == kind and says in str(error)
    if kind == "KafkaWriteError":
        assert "Raise transaction.timeout.ms" in str(error)
        assert "make the batches or tasks shorter" in str(error)


def test_the_driver_raises_the_write_task_s_own_error_found_in_spark_s_job_failure() -> None:
    from dstream_kafka.errors import KafkaWriteError
    from dstream_kafka.write.output import _task_error

    spark_text = ("An error occurred while calling o1.collect.\n"
                  "org.apache.spark.api.python.PythonException: Traceback (most recent call "
                  "last):\n  File ...\nkafka.errors.ProducerFencedError: [Error 90]\n"
                  "dstream_kafka.errors.KafkaWriteError: Kafka refused 1 record(s)\n\n"
                  "The above exception was the direct cause of the following exception:\n\n"
                  "dstream_kafka.errors.OutputFencedError: the transaction was fenced\n"
                  "\tat org.apache.spark...")
    found = _task_error(RuntimeError(spark_text))
    assert type(found) is OutputFencedError and str(found) == "the transaction was fenced"
    timed_out = _task_error(RuntimeError(
        "PythonException: ...\ndstream_kafka.errors.KafkaWriteError: outlived it\n"))
    assert type(timed_out) is KafkaWriteError and str(timed_out) == "outlived it"
    assert _task_error(RuntimeError("ValueError: a bad record")) is None


def test_a_failed_send_aborts_the_transaction_closes_the_producer_and_fails_the_task(
        monkeypatch, no_kept_producers) -> None:
    producer = _FakeProducer(fail_send=True)
    with pytest.raises(RuntimeError, match="broker gone"):
        _run(monkeypatch, producer, [(b"k", b"v")])
    assert producer.calls[-2:] == ["abort", "close"] and "commit" not in producer.calls


@pytest.mark.parametrize("committed, why", [(7, "inside this range"), (3, "behind")])
def test_a_group_not_at_the_range_start_is_refused_before_writing(
        monkeypatch, no_kept_producers, committed: int, why: str) -> None:
    producer = _FakeProducer(committed=committed)
    with pytest.raises(OutputFencedError, match=why):
        _run(monkeypatch, producer, [(b"k", b"v")])
    assert "send" not in producer.calls and "begin" not in producer.calls


def test_an_empty_range_without_records_opens_no_producer(monkeypatch,
                                                         no_kept_producers) -> None:
    producer = _FakeProducer()
    assert _run(monkeypatch, producer, [], until=5) == [0]
    assert producer.calls == []


def _exactly_once_output() -> Any:
    from dstream_kafka import KafkaOutput

    return KafkaOutput(SERVERS, topic="out", guarantee="exactly-once", backend="kafka-python")


def test_an_exactly_once_output_passed_to_foreach_rdd_is_refused_for_write_stream() -> None:
    with pytest.raises(ConfigurationError, match=r"writeStream\(stream\)"):
        _exactly_once_output()(None, None)


def test_an_exactly_once_rdd_write_needs_its_kafka_rdd_and_group() -> None:
    with pytest.raises(ConfigurationError, match="source=kafka_rdd"):
        _exactly_once_output().write(object())

    class Derived:
        def offsetRanges(self) -> list[OffsetRange]:
            return []

    with pytest.raises(ConfigurationError, match="groupId"):
        _exactly_once_output().write(object(), source=Derived())


@pytest.mark.parametrize("committed", [10, 12])
def test_a_range_the_group_has_passed_is_skipped_because_an_earlier_attempt_wrote_it(
        monkeypatch, no_kept_producers, committed: int) -> None:
    producer = _FakeProducer(committed=committed)
    assert _run(monkeypatch, producer, [(b"k", b"v")]) == [0]
    assert producer.calls == ["init", "committed"]  # kept for the next batch


@pytest.mark.parametrize("params, expected", [({}, 20), ({"retry.backoff.ms": "250"}, 250)])
def test_a_kafka_python_transactional_producer_retries_after_20_ms_unless_the_user_says(
        monkeypatch, params: dict[str, Any], expected: int) -> None:
    import kafka

    from dstream_kafka.write.producers import KafkaPythonProducer

    made: list[dict[str, Any]] = []

    class Recorder:  # takes the config, connects to nothing
        DEFAULT_CONFIG = kafka.KafkaProducer.DEFAULT_CONFIG

        def __init__(self, **config: Any) -> None:
            made.append(config)

    monkeypatch.setattr(kafka, "KafkaProducer", Recorder)
    KafkaPythonProducer(_settings(params, guarantee="exactly-once"), "app-in-0")
    KafkaPythonProducer(_settings(params), None)
    assert made[0]["retry_backoff_ms"] == expected
    assert made[1].get("retry_backoff_ms") == (None if not params else expected)
