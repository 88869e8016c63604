"""Reading what was built: the data card of `bertcorpus stats`, and `bertcorpus inspect`."""
