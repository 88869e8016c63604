"""`bertcorpus dedup`: exact and near copies across sources, and benchmark text, removed; every removal on a ledger."""
