"""Everything under tests/integration talks to real services."""

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _no_streaming_context_outlives_its_test():
    """Stop a StreamingContext a failed test left active, so one failure cannot cascade."""
    yield
    import sys

    streaming = sys.modules.get("dstream_kafka.streaming.context")
    if streaming is None:
        return
    active = streaming.StreamingContext.getActive()
    if active is not None:
        active.stop(stopSparkContext=False, stopGraceFully=False)


@pytest.fixture(params=["kafka-python", "confluent-kafka"])
def backend(request, sc):
    """Run the test once per executor consumer backend (spark.streaming.kafka.consumer.backend).

    Opt in per module with ``pytestmark = pytest.mark.usefixtures("backend")``.
    """
    sc._conf.set("spark.streaming.kafka.consumer.backend", request.param)
    yield request.param
    sc._conf.set("spark.streaming.kafka.consumer.backend", "kafka-python")
