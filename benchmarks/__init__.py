"""Side-by-side benchmarks of dstream_kafka, Structured Streaming, Spark's kafka010 DStream and raw clients.

Run ``python -m benchmarks --help``. One command starts a local Kafka broker on 127.0.0.1, fills
the topics, runs every contender of every selected workload in fresh processes, alternating
repetitions (ABCABC) after a labelled warm-up round, and writes ``results.json``, ``report.md``
(medians, spread and ratios computed within the run) and ``chart.png`` to the output folder.

Modules: :mod:`benchmarks.harness` (command line and schedule), :mod:`benchmarks.broker` (broker
and topic filling), :mod:`benchmarks.monitor` (CPU and memory of process trees),
:mod:`benchmarks.runner` (the child process that runs one Python contender),
:mod:`benchmarks.contenders` (one module per family), :mod:`benchmarks.adapter` (the only place
that touches dstream_kafka's API), :mod:`benchmarks.report` (pure statistics and tables).
"""
