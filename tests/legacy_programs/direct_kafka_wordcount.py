# A PySpark 2.4 streaming program, kept as it was written for Spark 2.4 (modeled on Spark's
# examples/src/main/python/streaming/direct_kafka_wordcount.py). Only the import lines were
# changed to run it on dstream_kafka. The original imports were:
#
#     from pyspark import SparkContext
#     from pyspark.streaming import StreamingContext
#     from pyspark.streaming.kafka import KafkaUtils
#
"""
 Word count over a Kafka direct stream: every 2 seconds, prints how often each word occurred
 in the messages (UTF-8 text lines) that arrived on the topic during that batch.
 Usage: direct_kafka_wordcount.py <broker_list> <topic>

 Run it with the Kafka 0-8 assembly jar on the classpath, for example
    `$ bin/spark-submit --jars spark-streaming-kafka-0-8-assembly_2.11-2.4.8.jar \
      direct_kafka_wordcount.py localhost:9092 test`
"""
from __future__ import print_function

import sys

from pyspark import SparkContext
from dstream_kafka.streaming import StreamingContext
from dstream_kafka.streaming.kafka import KafkaUtils

if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("Usage: direct_kafka_wordcount.py <broker_list> <topic>", file=sys.stderr)
        exit(-1)

    sc = SparkContext(appName="PythonStreamingDirectKafkaWordCount")
    ssc = StreamingContext(sc, 2)

    brokers, topic = sys.argv[1:]
    kvs = KafkaUtils.createDirectStream(ssc, [topic], {"metadata.broker.list": brokers})
    lines = kvs.map(lambda x: x[1])
    counts = lines.flatMap(lambda line: line.split(" ")) \
        .map(lambda word: (word, 1)) \
        .reduceByKey(lambda a, b: a+b)
    counts.pprint()

    ssc.start()
    ssc.awaitTermination()
