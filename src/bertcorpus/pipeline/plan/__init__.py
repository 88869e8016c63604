"""`bertcorpus plan`: a run sized and priced before anything runs, from its inputs' listing and measured rates."""
