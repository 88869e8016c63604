"""Checkpoints of a training run, local or remote: checkpoints/ckpt-STEP/ holds Keras's weights file (the weights
and the optimizer's variables, on any backend), the dropout layers' random state and checkpoint.json, written last.
A run resumes from its own last checkpoint exactly; phase 2 starts from another run's weights alone."""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import tempfile
import traceback

import keras
import numpy as np
from keras import ops

from bertcorpus.trainer.config import TrainerError
from bertcorpus.trainer.model import BertConfig, BertPretrainer, dummy_batch
from bertcorpus.trainer.storage import delete, exists, is_remote, join, match, read_bytes, write_bytes

CHECKPOINTS = "checkpoints"
CHECKPOINT_META = "checkpoint.json"  # written last: a checkpoint folder without it is unfinished
# Keras's weights file of the compiled model: the weights and the optimizer's variables, on any backend; a plain
# trainer.model.BertPretrainer loads the weights from it.
WEIGHTS_FILE = "model.weights.h5"
RANDOM_STATE_FILE = "random_state.npz"  # the dropout layers' generator states, which the weights file leaves out


def checkpoint_steps(output: str) -> dict[int, str]:
    """The finished checkpoints of a run directory: step -> folder."""
    directory = join(output, CHECKPOINTS)
    if is_remote(directory):
        folders = [path.rsplit("/", 1)[0] for path in match(join(directory, "ckpt-*", CHECKPOINT_META))]
    elif os.path.isdir(directory):
        folders = [
            os.path.join(directory, name)
            for name in os.listdir(directory)
            if os.path.exists(os.path.join(directory, name, CHECKPOINT_META))
        ]
    else:
        folders = []
    found = {}
    for folder in folders:
        if name := re.fullmatch(r"ckpt-(\d+)", folder.rstrip("/").rsplit("/", 1)[-1]):
            found[int(name.group(1))] = folder
    return dict(sorted(found.items()))


def refuse_old_checkpoints(output: str) -> None:
    if exists(join(output, CHECKPOINTS, "checkpoint")):  # tf.train.CheckpointManager's index of earlier versions
        raise TrainerError(
            f"{output} holds tf.train.Checkpoints of an earlier version of the trainer, which this one "
            "does not read; use another --output"
        )


def save_checkpoint(model: keras.Model, output: str, step: int, meta: dict, keep: int) -> None:
    """Write checkpoints/ckpt-STEP whole or not at all (locally renamed into place; remotely its checkpoint.json goes
    last), then remove all but the last `keep`. A write that fails (a full disk) leaves nothing of the new checkpoint
    and ends the run with one line; the run resumes from its last whole checkpoint."""
    final = join(output, CHECKPOINTS, f"ckpt-{step}")
    try:
        if is_remote(final):
            with tempfile.TemporaryDirectory() as scratch:
                _write_or_discard(model, scratch, step, meta)
                for name in (WEIGHTS_FILE, RANDOM_STATE_FILE, CHECKPOINT_META):
                    with open(os.path.join(scratch, name), "rb") as f:
                        write_bytes(join(final, name), f.read())
        else:
            staging = f"{final}.partial"
            shutil.rmtree(staging, ignore_errors=True)
            os.makedirs(staging)
            _write_or_discard(model, staging, step, meta)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(staging, final)
    except OSError as err:
        last = list(checkpoint_steps(output))
        resume = f"resumes from step {last[-1]}" if last else "starts again from step 0"
        raise TrainerError(
            f"cannot write the checkpoint {final}: {_reason(err)}; nothing of it is left: make room and run the same "
            f"command again (it {resume})"
        ) from None
    for folder in list(checkpoint_steps(output).values())[:-keep]:
        if is_remote(folder):
            delete(match(join(folder, "*")))
        else:
            shutil.rmtree(folder, ignore_errors=True)


def _write_or_discard(model: keras.Model, folder: str, step: int, meta: dict) -> None:
    """The checkpoint's files in `folder`; when a write fails, the folder goes, after the space its files hold is
    given back and HDF5 has let go of the weights file (Keras leaves it open on an error, and HDF5 would flush it to
    the full disk when Python exits, and crash)."""
    try:
        _write_checkpoint_files(model, folder, step, meta)
    except OSError as err:
        for name in os.listdir(folder):
            try:
                os.truncate(os.path.join(folder, name), 0)
            except OSError:
                pass
        traceback.clear_frames(err.__traceback__)  # the frames hold Keras's open weights store
        gc.collect()
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _reason(err: OSError) -> str:
    """The cause of a failed write in a few words: h5py puts HDF5's errno inside a long message of its own."""
    number = err.errno or next(iter(re.findall(r"errno = (\d+)", str(err))), None)
    return os.strerror(int(number)) if number else str(err).splitlines()[0]


def _write_checkpoint_files(model: keras.Model, folder: str, step: int, meta: dict) -> None:
    model.save_weights(os.path.join(folder, WEIGHTS_FILE))
    np.savez(
        os.path.join(folder, RANDOM_STATE_FILE),
        **{f"{i:05d}": ops.convert_to_numpy(v) for i, v in enumerate(model.non_trainable_variables)},
    )
    with open(os.path.join(folder, CHECKPOINT_META), "w") as f:
        json.dump({"step": step, **meta}, f, indent=2)


def read_checkpoint_meta(folder: str) -> dict:
    return json.loads(read_bytes(join(folder, CHECKPOINT_META)))


def _local_copy(folder: str, name: str, scratch: str) -> str:
    """A local path of the checkpoint's file: its own, or a copy in `scratch` of a remote one."""
    if not is_remote(folder):
        return join(folder, name)
    path = os.path.join(scratch, name)
    with open(path, "wb") as f:
        f.write(read_bytes(join(folder, name)))
    return path


def restore_checkpoint(model: keras.Model, folder: str) -> None:
    """Weights, optimizer variables and the model's random state, exactly as saved (same backend and model)."""
    with tempfile.TemporaryDirectory() as scratch:
        model.load_weights(_local_copy(folder, WEIGHTS_FILE, scratch))
        with np.load(_local_copy(folder, RANDOM_STATE_FILE, scratch)) as saved:
            values = [saved[name] for name in sorted(saved.files)]
    variables = model.non_trainable_variables
    if [value.shape for value in values] != [tuple(v.shape) for v in variables]:
        raise TrainerError(f"cannot resume from {folder}: its random state does not fit this model")
    for variable, value in zip(variables, values):
        variable.assign(value)


def find_init_checkpoint(path: str) -> str:
    """The checkpoint folder that --init-checkpoint names: a run directory (its last checkpoint), its checkpoints/
    folder (the same) or one ckpt-STEP folder."""
    if exists(join(path, CHECKPOINT_META)):
        return path
    for run in (path, path.rstrip("/").rsplit("/", 1)[0] if path.rstrip("/").endswith(CHECKPOINTS) else None):
        if run and (steps := checkpoint_steps(run)):
            return list(steps.values())[-1]
    raise TrainerError(f"no checkpoint found in --init-checkpoint {path}")


def load_init_checkpoint(model: keras.Model, path: str, bert_config: BertConfig) -> None:
    """Phase 2: start from the weights of another run, of any backend; the optimizer and the step start afresh."""
    folder = find_init_checkpoint(path)
    saved = read_checkpoint_meta(folder).get("model")
    if saved is not None and saved != bert_config.to_dict():
        raise TrainerError(f"--init-checkpoint {path} holds a different model than --config (saved: {saved})")
    # Loaded into a model of its own, without an optimizer, so that only the weights come across.
    weights_only = BertPretrainer(bert_config)
    weights_only(dummy_batch(1, 8, 1))
    try:
        with tempfile.TemporaryDirectory() as scratch:
            weights_only.load_weights(_local_copy(folder, WEIGHTS_FILE, scratch))
    except ValueError as err:
        raise TrainerError(f"--init-checkpoint {folder} does not fit this model: {str(err).splitlines()[0]}") from None
    for variable, value in zip(model.weights, weights_only.weights, strict=True):
        variable.assign(value)
    print(f"initialised the model from {folder}", flush=True)
