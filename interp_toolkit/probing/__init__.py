"""Linear probes at every layer boundary, their control task and the data they read."""
