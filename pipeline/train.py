"""`bertcorpus train`: the compact BERT pretraining module in trainer/ (TensorFlow loads only for this command)."""
from __future__ import annotations

ACCEPTS_BEAM_OPTIONS = False


def add_arguments(parser) -> None:
    from trainer.train import add_train_arguments

    add_train_arguments(parser)


def run(args, beam_args: list[str]) -> int:
    from trainer.train import run_train

    return run_train(args)
