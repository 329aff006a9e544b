"""Driver side, once per batch: where a batch is planned (positions, limits, offset ranges) and its offsets committed."""
