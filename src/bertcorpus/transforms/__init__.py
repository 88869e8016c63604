"""Processing steps: pure functions on plain data (numpy, no Beam). Their DoFns and PTransforms live in
bertcorpus.pipeline, beside the jobs that use them."""
