"""A Subscribe stream that test_driver_consumer kills with SIGKILL and starts again.

Run as its own process (started with ``start_new_session=True``, so that killing the process
group also kills Spark's JVM and Python workers)::

    python subscribe_restart_probe.py BOOTSTRAP TOPIC GROUP

The group's ``session.timeout.ms`` is 90 s: a driver that has to wait out its killed
predecessor's session gets no partition until 90 s after the kill, which is at least 50 s after
its ``ssc.start()`` even when its JVM took 40 s to start. It prints ``STARTING`` just
before ``ssc.start()`` and ``BATCH <records>`` after each batch with records; it never commits,
so every run reads the topic from the start.
"""

from __future__ import annotations

import sys

SESSION_TIMEOUT_MS = 90_000


def main() -> None:
    from pyspark import SparkContext

    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from dstream_kafka.spark_settings import local_spark_conf
    from dstream_kafka.streaming import StreamingContext

    bootstrap, topic, group = sys.argv[1:4]
    # A fresh, short-lived JVM per run: the C1 compiler alone and the serial GC start it faster.
    conf = local_spark_conf("local[1]", "subscribe-restart-probe", extra={
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"})
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    ssc = StreamingContext(sc, 0.5)
    params = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": SESSION_TIMEOUT_MS,
              "heartbeat.interval.ms": 3000}
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))

    def report(rdd: object) -> None:
        records = rdd.count()  # type: ignore[attr-defined]
        if records:
            print(f"BATCH {records}", flush=True)
    stream.foreachRDD(report)
    print("STARTING", flush=True)
    ssc.start()
    ssc.awaitTermination()


if __name__ == "__main__":
    main()
