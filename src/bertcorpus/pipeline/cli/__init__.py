"""The command line: the `bertcorpus` command, its shared flags and the commands that run other commands."""
