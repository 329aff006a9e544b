# A PySpark 2.4 streaming program, kept as it was written for Spark 2.4 (a Kafka version of
# Spark's stateful_network_wordcount.py and recoverable_network_wordcount.py examples). Only
# the import lines were changed to run it on dstream_kafka. The original imports were:
#
#     from pyspark import SparkContext
#     from pyspark.streaming import StreamingContext
#     from pyspark.streaming.kafka import KafkaUtils
#
"""
 Counts words in UTF8 encoded, '\n' delimited text read from Kafka every second, keeping a
 running count per word. The counts and the Kafka offsets are checkpointed, so the program
 continues where it stopped when it is started again with the same checkpoint directory.

 Usage: stateful_kafka_wordcount.py <broker_list> <topic> <checkpoint_directory>

 and then run the example
    `$ bin/spark-submit --jars \
      external/kafka-assembly/target/spark-streaming-kafka-assembly-*.jar \
      stateful_kafka_wordcount.py localhost:9092 test /tmp/wordcount-checkpoint`
"""
from __future__ import print_function

import sys

from pyspark import SparkContext
from dstream_kafka.streaming import StreamingContext
from dstream_kafka.streaming.kafka import KafkaUtils


def createContext(brokers, topic, checkpointDirectory):
    sc = SparkContext(appName="PythonStreamingStatefulKafkaWordCount")
    ssc = StreamingContext(sc, 1)
    ssc.checkpoint(checkpointDirectory)

    kafkaParams = {"metadata.broker.list": brokers, "auto.offset.reset": "smallest"}
    kvs = KafkaUtils.createDirectStream(ssc, [topic], kafkaParams)

    def updateFunc(new_values, last_sum):
        return sum(new_values) + (last_sum or 0)

    running_counts = kvs.map(lambda x: x[1]) \
        .flatMap(lambda line: line.split(" ")) \
        .map(lambda word: (word, 1)) \
        .updateStateByKey(updateFunc)
    running_counts.pprint()
    return ssc


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print("Usage: stateful_kafka_wordcount.py <broker_list> <topic> <checkpoint_directory>",
              file=sys.stderr)
        exit(-1)

    brokers, topic, checkpoint = sys.argv[1:]
    ssc = StreamingContext.getOrCreate(checkpoint,
                                       lambda: createContext(brokers, topic, checkpoint))
    ssc.start()
    ssc.awaitTermination()
