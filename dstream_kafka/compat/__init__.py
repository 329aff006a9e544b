"""The PySpark 2.4 Kafka 0-8 vocabulary, for porting old programs."""
