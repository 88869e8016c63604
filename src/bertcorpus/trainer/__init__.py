"""Compact BERT pretraining module."""
