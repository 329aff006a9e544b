"""Kafka from the driver's side: kafkaParams in, client configurations out, and the look-ups
(the pooled offset reader, latest offsets) that planning, stores and operator commands share."""
