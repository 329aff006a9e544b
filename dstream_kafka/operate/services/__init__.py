"""Real local services the dstream-kafka command starts: a KRaft Kafka broker, HBase with its
Thrift gateway, and what they share (free ports, Maven jars, start/stop/status life cycle)."""
