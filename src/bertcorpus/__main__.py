from bertcorpus.pipeline.cli.commands import entry_point

entry_point()
