"""`bertcorpus vocab`: word counts (locally or as a Beam job) → a WordPiece vocab and its files."""
