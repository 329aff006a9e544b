// Spark's own kafka010 DStream on an idle topic: the JVM baseline of the empty-batch overhead.
//
// Usage: DStreamOverhead <bootstrap> <topic> <intervalsMs,...> <outputs,...> <seconds> <minBatches>
//                        <warmupBatches> <resultJson>
//
// For every output (count | job | job-nocommit) and interval, one JavaStreamingContext on the same
// SparkContext runs a direct stream (Assign from offset 0) until warm-up + measured batches have
// completed, then stops. Per batch: BatchInfo (submission, processing start and end; from a
// StreamingListener) and, for "job", the wall time of mapPartitions(...).collect() split by the
// tasks' own System.nanoTime stamps (one JVM in local mode, so one clock). Spark's kafka010 sends
// the offsets queued by commitAsync in the *next* batch's compute(), so its commit cost is inside
// that batch's plan (submission - batch time), not a phase of its own.
import java.io.FileWriter;
import java.util.*;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.streaming.Duration;
import org.apache.spark.streaming.api.java.JavaInputDStream;
import org.apache.spark.streaming.api.java.JavaStreamingContext;
import org.apache.spark.streaming.kafka010.*;
import org.apache.spark.streaming.scheduler.BatchInfo;
import org.apache.spark.streaming.scheduler.StreamingListener;
import org.apache.spark.streaming.scheduler.StreamingListenerBatchCompleted;

public final class DStreamOverhead {
    private static String num(double v) {
        return String.format(Locale.ROOT, "%.3f", v);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        String[] intervals = args[2].split(","), outputs = args[3].split(",");
        double seconds = Double.parseDouble(args[4]);
        int minBatches = Integer.parseInt(args[5]), warmup = Integer.parseInt(args[6]);
        String resultPath = args[7];

        Map<String, Object> params = new HashMap<>();
        params.put("bootstrap.servers", bootstrap);
        params.put("key.deserializer", ByteArrayDeserializer.class);
        params.put("value.deserializer", ByteArrayDeserializer.class);
        params.put("auto.offset.reset", "earliest");
        params.put("enable.auto.commit", false);
        List<TopicPartition> tps = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(params)) {
            for (PartitionInfo p : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, p.partition()));
        }

        SparkConf conf = new SparkConf().setMaster("local[2]").setAppName("bench-java-overhead")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1");
        JavaSparkContext jsc = new JavaSparkContext(conf);
        jsc.setLogLevel("WARN");
        jsc.parallelize(Arrays.asList(1, 2), 2).count();  // warm-up: executors and task path

        StringBuilder json = new StringBuilder("{\"records\": 0, \"seconds\": 0, \"latency\": {");
        boolean firstConfig = true;
        for (String output : outputs) {
            for (String intervalText : intervals) {
                long intervalMs = Long.parseLong(intervalText);
                double interval = intervalMs / 1000.0;
                int batches = Math.max(minBatches, (int) Math.ceil(seconds / interval - 1e-9));
                int want = warmup + batches;
                Map<Long, double[]> jobs = new ConcurrentHashMap<>();
                List<BatchInfo> infos = Collections.synchronizedList(new ArrayList<>());
                CountDownLatch done = new CountDownLatch(want);

                Map<String, Object> p = new HashMap<>(params);
                p.put("group.id", "bench-java-overhead-" + UUID.randomUUID());
                Map<TopicPartition, Long> from = new HashMap<>();
                for (TopicPartition tp : tps) from.put(tp, 0L);
                JavaStreamingContext ssc = new JavaStreamingContext(jsc, new Duration(intervalMs));
                ssc.addStreamingListener(new StreamingListener() {
                    @Override
                    public void onBatchCompleted(StreamingListenerBatchCompleted completed) {
                        infos.add(completed.batchInfo());
                        done.countDown();
                    }
                });
                JavaInputDStream<ConsumerRecord<byte[], byte[]>> stream = KafkaUtils.createDirectStream(
                    ssc, LocationStrategies.PreferConsistent(),
                    ConsumerStrategies.<byte[], byte[]>Assign(new ArrayList<>(from.keySet()), p, from));
                final String out = output;
                stream.foreachRDD((rdd, time) -> {
                    long t0 = System.nanoTime();
                    double[] phases;
                    if (out.equals("count")) {
                        rdd.count();  // KafkaRDD.count() sums the offset ranges: no job
                        phases = new double[] {(System.nanoTime() - t0) / 1e6, Double.NaN, Double.NaN, Double.NaN};
                    } else {
                        List<long[]> stamps = rdd.mapPartitions(it -> {
                            long s = System.nanoTime();
                            long bytes = 0;
                            while (it.hasNext()) {
                                ConsumerRecord<byte[], byte[]> r = it.next();
                                if (r.value() != null) bytes += r.value().length;
                            }
                            return Collections.singletonList(new long[] {s, System.nanoTime(), bytes}).iterator();
                        }).collect();
                        long t1 = System.nanoTime();
                        long first = Long.MAX_VALUE, last = Long.MIN_VALUE;
                        for (long[] st : stamps) {
                            first = Math.min(first, st[0]);
                            last = Math.max(last, st[1]);
                        }
                        phases = stamps.isEmpty()
                            ? new double[] {(t1 - t0) / 1e6, Double.NaN, Double.NaN, Double.NaN}
                            : new double[] {(t1 - t0) / 1e6, (first - t0) / 1e6, (last - first) / 1e6, (t1 - last) / 1e6};
                    }
                    if (!out.equals("job-nocommit")) {
                        OffsetRange[] ranges = ((HasOffsetRanges) rdd.rdd()).offsetRanges();
                        ((CanCommitOffsets) stream.inputDStream()).commitAsync(ranges);
                    }
                    jobs.put(time.milliseconds(), phases);
                });
                ssc.start();
                // Same cap as benchmarks.adapter.overhead_cap_seconds: a stream that falls behind
                // stops once twice its planned length (at least 5 s) has passed and >= 3 batches
                // are measured.
                long capMs = Math.max(5000L, 2L * want * intervalMs);
                boolean finished = done.await(capMs, TimeUnit.MILLISECONDS);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(300);
                while (!finished && infos.size() < warmup + 3 && System.nanoTime() < deadline) {
                    finished = done.await(50, TimeUnit.MILLISECONDS);  // fell behind: a few batches
                }
                boolean capped = !finished && infos.size() >= warmup + 3;
                ssc.stop(false, false);
                if (!finished && !capped) throw new IllegalStateException("timed out at " + intervalMs + " ms / " + output);

                List<BatchInfo> sorted = new ArrayList<>(infos);
                sorted.sort(Comparator.comparingLong(b -> b.batchTime().milliseconds()));
                StringBuilder rows = new StringBuilder(), warm = new StringBuilder();
                int index = 0;
                for (BatchInfo b : sorted) {
                    if (index >= want) break;
                    long bt = b.batchTime().milliseconds();
                    long submitted = b.submissionTime();
                    long start = (Long) b.processingStartTime().get();
                    long end = (Long) b.processingEndTime().get();
                    double[] ph = jobs.getOrDefault(bt, new double[] {Double.NaN, Double.NaN, Double.NaN, Double.NaN});
                    StringBuilder row = new StringBuilder("{\"batch_time\": " + bt + ", \"records\": " + b.numRecords()
                        + ", \"plan\": " + (submitted - bt) + ", \"queue\": " + (start - submitted)
                        + ", \"output\": " + (end - start) + ", \"output_end\": " + (end - bt)
                        + ", \"total\": " + (end - bt) + ", \"job\": " + num(ph[0]));
                    if (!Double.isNaN(ph[1])) {
                        row.append(", \"job_launch\": ").append(num(ph[1])).append(", \"job_tasks\": ")
                            .append(num(ph[2])).append(", \"job_return\": ").append(num(ph[3]));
                    }
                    row.append("}");
                    StringBuilder target = index < warmup ? warm : rows;
                    if (target.length() > 0) target.append(", ");
                    target.append(row);
                    index++;
                }
                if (!firstConfig) json.append(", ");
                firstConfig = false;
                json.append(String.format(Locale.ROOT,
                    "\"%s@%ss\": {\"params\": {\"interval\": %s, \"output\": \"%s\"}, \"records\": 0, "
                    + "\"capped\": %s, \"rows\": [%s], \"warmup_rows\": [%s]}",
                    output, java.math.BigDecimal.valueOf(intervalMs, 3).stripTrailingZeros().toPlainString(),
                    num(interval), output, capped, rows, warm));
            }
        }
        json.append("}}\n");
        try (FileWriter w = new FileWriter(resultPath)) {
            w.write(json.toString());
        }
        jsc.stop();
    }
}
