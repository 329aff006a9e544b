"""Side-by-side benchmarks of dstream_kafka, Structured Streaming, Spark's kafka010 DStream and raw clients.

Run ``python -m benchmarks --help``. One command starts a local Kafka broker on 127.0.0.1, fills
the topics, runs every contender of every selected workload in fresh processes, alternating
repetitions (ABCABC) after a labelled warm-up round, and writes ``results.json``, ``report.md``
(medians, spread and ratios computed within the run) and ``chart.png`` to the output folder.

Workloads: ``drain`` and ``json`` (throughput), ``overhead`` (empty batches on an idle topic per
interval and output, milliseconds per phase), ``steady`` (a producer at fixed rates: end-to-end
latency p50/p99 and the highest rate held with a stable lag), ``exactly-once`` (offset store
cost per batch, PostgreSQL results + offsets in one transaction), ``partitions`` (drain at
1-16 partitions) and ``planning`` (the driver's planning per batch at 1-1,000 partitions and
over 50 topics). dstream_kafka contenders named ``*-fast`` read with the confluent-kafka
backend.

Modules: :mod:`benchmarks.harness` (command line and schedule), :mod:`benchmarks.broker` (broker
and topic filling), :mod:`benchmarks.monitor` (CPU and memory of process trees),
:mod:`benchmarks.runner` (the child process that runs one Python contender),
:mod:`benchmarks.contenders` (one module per family), :mod:`benchmarks.adapter`,
:mod:`benchmarks.adapter_stores` and :mod:`benchmarks.adapter_planning` (the only code that
touches dstream_kafka's API),
:mod:`benchmarks.steady` (the steady workload's producer steps, probe and pure statistics),
:mod:`benchmarks.report` and :mod:`benchmarks.report_steady` (pure statistics and tables),
:mod:`benchmarks.chart` (the PNG).
"""
