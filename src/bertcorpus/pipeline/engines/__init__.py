"""Where a job runs: the choice of runner and its options, the local shuffle, the watch over a local run, progress,
and the run to its end (run_and_wait.py)."""
