// Spark's own kafka010 DStream (spark-streaming-kafka-0-10) draining a topic: the JVM baseline.
//
// Usage: DStreamDrain <bootstrap> <topic> <mode: rdd|stream> <batchMs> <maxRatePerPartition> <resultJson>
//
// rdd:    one KafkaUtils.createRDD over [beginning, end) of every partition, then count().
// stream: KafkaUtils.createDirectStream (Assign from the beginning), foreachRDD count, until every
//         record present at start has been counted; maxRatePerPartition splits it into batches.
// Every run starts its own JVM in local[2]. The timed region excludes SparkContext start-up and a
// trivial warm-up job, exactly like the Python contenders; it includes consumer creation.
import java.lang.management.ManagementFactory;
import java.io.FileWriter;
import java.util.*;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.streaming.Duration;
import org.apache.spark.streaming.api.java.JavaInputDStream;
import org.apache.spark.streaming.api.java.JavaStreamingContext;
import org.apache.spark.streaming.kafka010.*;

public final class DStreamDrain {
    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    // KafkaRDD.count() only sums the offset ranges without reading, so every count here walks
    // the records (and touches each value) like the Python contenders do.
    private static long drain(JavaRDD<ConsumerRecord<byte[], byte[]>> rdd) {
        return rdd.mapPartitions(it -> {
            long n = 0, bytes = 0;
            while (it.hasNext()) {
                ConsumerRecord<byte[], byte[]> r = it.next();
                n++;
                if (r.value() != null) bytes += r.value().length;
            }
            return Collections.singletonList(bytes >= 0 ? n : -1L).iterator();
        }).reduce(Long::sum);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], mode = args[2];
        long batchMs = Long.parseLong(args[3]);
        long maxRate = Long.parseLong(args[4]);
        String resultPath = args[5];

        Map<String, Object> params = new HashMap<>();
        params.put("bootstrap.servers", bootstrap);
        params.put("key.deserializer", ByteArrayDeserializer.class);
        params.put("value.deserializer", ByteArrayDeserializer.class);
        params.put("group.id", "bench-java-dstream-" + UUID.randomUUID());
        params.put("auto.offset.reset", "earliest");
        params.put("enable.auto.commit", false);

        Map<TopicPartition, Long> begin, end;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(params)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo p : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, p.partition()));
            begin = c.beginningOffsets(tps);
            end = c.endOffsets(tps);
        }
        long expected = 0;
        for (TopicPartition tp : end.keySet()) expected += end.get(tp) - begin.get(tp);

        SparkConf conf = new SparkConf().setMaster("local[2]").setAppName("bench-java-dstream")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1");
        if (maxRate > 0) conf.set("spark.streaming.kafka.maxRatePerPartition", Long.toString(maxRate));
        JavaSparkContext jsc = new JavaSparkContext(conf);
        jsc.setLogLevel("WARN");
        jsc.parallelize(Arrays.asList(1, 2), 2).count();  // warm-up: executors and task path

        long count = 0, batches = 0;
        double seconds;
        long cpu0 = cpuNanos();
        long t0 = System.nanoTime();
        if (mode.equals("rdd")) {
            List<OffsetRange> ranges = new ArrayList<>();
            for (TopicPartition tp : end.keySet())
                ranges.add(OffsetRange.create(tp.topic(), tp.partition(), begin.get(tp), end.get(tp)));
            JavaRDD<ConsumerRecord<byte[], byte[]>> rdd = KafkaUtils.createRDD(
                jsc, params, ranges.toArray(new OffsetRange[0]), LocationStrategies.PreferConsistent());
            count = drain(rdd);
            batches = 1;
            seconds = (System.nanoTime() - t0) / 1e9;
        } else {
            JavaStreamingContext ssc = new JavaStreamingContext(jsc, new Duration(batchMs));
            Map<TopicPartition, Long> from = new HashMap<>(begin);
            JavaInputDStream<ConsumerRecord<byte[], byte[]>> stream = KafkaUtils.createDirectStream(
                ssc, LocationStrategies.PreferConsistent(),
                ConsumerStrategies.<byte[], byte[]>Assign(new ArrayList<>(from.keySet()), params, from));
            AtomicLong total = new AtomicLong();
            AtomicLong nonEmpty = new AtomicLong();
            AtomicLong doneAt = new AtomicLong();
            final long want = expected;
            stream.foreachRDD(rdd -> {
                long n = rdd.isEmpty() ? 0 : drain(rdd);
                if (n > 0) nonEmpty.incrementAndGet();
                if (total.addAndGet(n) >= want && doneAt.get() == 0) doneAt.set(System.nanoTime());
            });
            t0 = System.nanoTime();
            ssc.start();
            while (doneAt.get() == 0) Thread.sleep(5);
            seconds = (doneAt.get() - t0) / 1e9;
            count = total.get();
            batches = nonEmpty.get();
            ssc.stop(false, false);
        }
        double cpu = (cpuNanos() - cpu0) / 1e9;
        try (FileWriter w = new FileWriter(resultPath)) {
            w.write(String.format(Locale.ROOT,
                "{\"records\": %d, \"expected\": %d, \"seconds\": %.6f, \"cpu_seconds\": %.3f, "
                + "\"extra\": {\"batches\": %d, \"mode\": \"%s\"}}\n",
                count, expected, seconds, cpu, batches, mode));
        }
        jsc.stop();
    }
}
