"""bertcorpus: Beam jobs and the CLI."""
