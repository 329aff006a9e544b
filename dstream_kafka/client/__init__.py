"""Client settings: kafkaParams in, Kafka client configurations out."""
