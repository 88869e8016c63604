"""`bertcorpus create`: documents → pretraining instances, as named Beam steps over transforms/."""
