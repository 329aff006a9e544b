"""What operators run at a terminal: the offsets commands, the demo, the live display and the local services."""
