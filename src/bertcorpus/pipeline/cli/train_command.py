"""`bertcorpus train`: the compact BERT pretraining module in trainer/, on Keras's TensorFlow, JAX or PyTorch backend.

Its flags come without any of them (trainer/config.py), so `train --help` is quick and works where no extra is
installed; the backend is chosen before Keras loads, and loads only to train."""

from __future__ import annotations

import os

ACCEPTS_BEAM_OPTIONS = False
INTERRUPTED_NOTE = "run the same command again to resume from the last checkpoint"
BACKEND_MODULES = {"tensorflow", "keras", "jax", "jaxlib", "torch"}
BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}


def add_arguments(parser) -> None:
    from bertcorpus.trainer.config import add_train_arguments

    add_train_arguments(parser)


def choose_backend(requested: str | None = None) -> str:
    """The Keras backend (--backend, $KERAS_BACKEND, else the first installed), put in the environment for Keras."""
    from bertcorpus.trainer.config import choose_backend as choose

    backend = choose(requested, os.environ.get("KERAS_BACKEND"))
    os.environ["KERAS_BACKEND"] = backend
    return backend


def trainer_missing(requested: str | None = None) -> str | None:
    """None when the trainer loads on the chosen backend, else one line that names the extra to install."""
    from bertcorpus.trainer.config import BACKENDS, TrainerError, backend_extra

    try:
        backend = choose_backend(requested)
    except TrainerError as e:
        return str(e)
    try:
        load_trainer()
    except ImportError as e:
        if not _raised_by_backend(e):
            raise
        cause = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return (
            f"training needs {BACKEND_NAMES[backend]} and Keras, from the {BACKENDS[backend]} extra: "
            f"{backend_extra(backend)} ({cause})"
        )
    return None


def _raised_by_backend(error: ImportError) -> bool:
    """Whether Keras or a backend is what could not be imported, missing or broken (not a module of ours)."""

    def extra(module: str | None) -> bool:
        return (module or "").split(".")[0] in BACKEND_MODULES

    frames = error.__traceback__
    while frames is not None and not extra(frames.tb_frame.f_globals.get("__name__")):
        frames = frames.tb_next
    return extra(error.name) or frames is not None


def load_trainer():
    """trainer.train, loaded with the backend's start-up lines (from its C++ code and absl, before any Python logging)
    kept off the terminal unless --verbose."""
    import importlib
    import logging
    import sys

    from bertcorpus.pipeline.engines.run_watch import stderr_silenced

    if "bertcorpus.trainer.train" in sys.modules or logging.getLogger().isEnabledFor(logging.INFO):
        return importlib.import_module("bertcorpus.trainer.train")
    with stderr_silenced():
        return importlib.import_module("bertcorpus.trainer.train")


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.errors import UserError
    from bertcorpus.trainer.config import config_from_args

    missing = trainer_missing(args.backend)
    if missing:
        raise UserError(missing)
    load_trainer().train(config_from_args(args))  # a TrainerError is one line (pipeline.errors)
    return 0
