from pipeline.cli import entry_point

entry_point()
