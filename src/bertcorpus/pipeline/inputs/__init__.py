"""Which files an input names, their formats, and reading them in parallel spans."""
