"""Processing steps: pure functions on plain data, each followed by its thin Beam wrapper."""
