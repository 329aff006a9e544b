"""Consumer lag measured on its own driver timer, and the verdict on why a stream is behind.

:mod:`.lookup_table` turns an offset into the time the log reached it (kafka-lag-exporter's
interpolation table), :mod:`.lag` is the per-stream timer that samples the log end of every
partition and keeps the lag in offsets and seconds, and :mod:`.verdict` judges a window of
samples with Burrow's status words and names the likely cause.
"""
