"""Executor side: where records are read, exactly [fromOffset, untilOffset) of each range, through cached consumers."""
