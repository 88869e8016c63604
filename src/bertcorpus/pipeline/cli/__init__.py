"""The command line: the `bertcorpus` command, its shared flags, and the commands of no job of their own (run, demo,
train, order, graph)."""
