"""Safe files: the one output writer, what an output path is, locks."""
