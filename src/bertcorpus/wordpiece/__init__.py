"""WordPiece vocabulary files, training and the shared tokenizer configuration."""
