"""Packed batches in Hugging Face's ModernBERT (a tiny random one, PyTorch on the CPU): each instance through the
documented forms gives the logits it gives alone, while the packed row as it is lets instances attend to each other.

The model runs in an interpreter of its own (tests/modernbert_logits.py): PyTorch's triton cannot share a process
with TensorFlow, which other tests of the same worker import."""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_load_time_masking import SPECIAL, L
from test_packed_batches import packed

from bertcorpus import packed_to_flash_kwargs, packed_to_padded

if not (importlib.util.find_spec("torch") and importlib.util.find_spec("transformers")):  # found, not imported
    pytest.skip("needs torch and transformers (the test extra has them)", allow_module_level=True)

TOLERANCE = 1e-4  # float32 on the CPU: the same instance padded or alone differs by ~1e-7
RUNNER = Path(__file__).with_name("modernbert_logits.py")
MODEL_INPUTS = ("input_ids", "attention_mask", "position_ids")  # what ModernBERT takes of the padded rows


def instance(batch: dict, j: int) -> slice:
    return slice(int(batch["cu_seqlens"][j]), int(batch["cu_seqlens"][j + 1]))


def instance_count(batch: dict) -> int:
    return len(batch["cu_seqlens"]) - 1


@pytest.fixture(scope="module")
def batches(sample_dynamic_copy, index_cache) -> list[dict]:
    loader = packed(sample_dynamic_copy, index_cache, seed=4, masked_lm_prob=0.3, tokens_per_batch=4 * L)
    return [loader[0], loader[1]]


@pytest.fixture(scope="module")
def runs(batches, tmp_path_factory) -> dict:
    """The model's logits for each batch: each instance alone, the padded rows, the packed row as it is, and the
    flash keywords (transformers 5) through a CPU stand-in of the varlen kernel."""
    assert (SPECIAL.cls, SPECIAL.sep, len(SPECIAL.is_continuation)) == (101, 102, 30522)  # modernbert_logits.py's
    planned, names = [], []
    for b, batch in enumerate(batches):
        for j in range(instance_count(batch)):
            planned.append(("sdpa", {"input_ids": batch["input_ids"][None, instance(batch, j)]}))
            names.append((b, "alone", j))
        rows = packed_to_padded(batch)
        planned.append(("sdpa", {k: rows[k] for k in MODEL_INPUTS}))
        names.append((b, "padded", None))
        planned.append(("sdpa", {"input_ids": batch["input_ids"][None], "position_ids": batch["position_ids"][None]}))
        names.append((b, "packed row", None))
        kwargs = packed_to_flash_kwargs(batch)
        planned.append(("varlen", {k: v for k, v in kwargs.items() if k != "labels"}))
        names.append((b, "flash", None))
    folder = tmp_path_factory.mktemp("modernbert")
    (folder / "runs.pkl").write_bytes(pickle.dumps(planned))
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(folder / "runs.pkl"), str(folder / "out.pkl")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = pickle.loads((folder / "out.pkl").read_bytes())
    return {"logits": dict(zip(names, out["logits"])), **{k: v for k, v in out.items() if k != "logits"}}


def alone(runs: dict, b: int, j: int) -> np.ndarray:
    return runs["logits"][(b, "alone", j)][0]


def test_padded_rows_give_each_instance_its_own_logits(batches, runs):
    for b, batch in enumerate(batches):
        rows = packed_to_padded(batch)
        n = instance_count(batch)
        assert rows["input_ids"].shape == (n, int(batch["max_seqlen"])) and rows["input_ids"].dtype == np.int64
        found = runs["logits"][(b, "padded", None)]
        for j in range(n):
            span, length = instance(batch, j), instance(batch, j).stop - instance(batch, j).start
            assert np.abs(found[j, :length] - alone(runs, b, j)).max() <= TOLERANCE
            # Each row holds its instance: tokens, labels (-100 but at predictions), segments; then padding.
            np.testing.assert_array_equal(rows["input_ids"][j, :length], batch["input_ids"][span])
            np.testing.assert_array_equal(rows["labels"][j, :length], batch["labels"][span])
            np.testing.assert_array_equal(rows["token_type_ids"][j, :length], batch["token_type_ids"][span])
            np.testing.assert_array_equal(rows["position_ids"][j, :length], np.arange(length))
            assert (rows["labels"][j, length:] == -100).all() and (rows["input_ids"][j, length:] == 0).all()
            assert rows["attention_mask"][j].tolist() == [1] * length + [0] * (rows["input_ids"].shape[1] - length)
        np.testing.assert_array_equal(rows["next_sentence_label"], batch["next_sentence_label"])


def test_the_packed_row_as_it_is_attends_across_instances_on_sdpa(batches, runs):
    """What packed_to_padded prevents: the flat stream as one row, position_ids and all, is one long sequence to
    sdpa, and every instance's logits change."""
    for b, batch in enumerate(batches):
        row = runs["logits"][(b, "packed row", None)][0]
        for j in range(instance_count(batch)):
            assert np.abs(row[instance(batch, j)] - alone(runs, b, j)).max() > 100 * TOLERANCE


def test_flash_keywords_reach_the_attention_and_keep_instances_apart(batches, runs):
    """transformers 5: the keywords packed_to_flash_kwargs gives are those flash_attention_2 reads
    (FlashAttentionKwargs), and ModernBERT hands them to its attention function: a CPU stand-in of the varlen kernel
    then gives each instance its own logits. benchmarks/bench_trainer_gpu.py runs the real kernel on a GPU."""
    assert runs["transformers"].split(".")[0] == "5"
    for b, batch in enumerate(batches):
        kwargs = packed_to_flash_kwargs(batch)
        assert set(runs["flash_keywords"]) <= set(kwargs)
        assert type(kwargs["max_length_q"]) is int and kwargs["cu_seq_lens_q"].dtype == np.int32
        found = runs["logits"][(b, "flash", None)][0]
        for j in range(instance_count(batch)):
            assert np.abs(found[instance(batch, j)] - alone(runs, b, j)).max() <= TOLERANCE


def test_flash_keywords_of_transformers_4_name_modernberts_unpadded_arguments(batches):
    """transformers 4's ModernBertForMaskedLM takes the unpadded stream itself: flat ids, cu_seqlens (int32),
    max_seqlen (an int), indices, batch_size and seq_len (the logits are padded back to (batch_size, seq_len))."""
    batch = batches[0]
    kwargs = packed_to_flash_kwargs(batch, transformers_major=4)
    tokens = len(batch["input_ids"])
    assert kwargs["input_ids"].shape == kwargs["labels"].shape == (tokens,)
    assert kwargs["cu_seqlens"].dtype == np.int32 and kwargs["cu_seqlens"][-1] == tokens
    assert type(kwargs["max_seqlen"]) is int and kwargs["max_seqlen"] == int(batch["max_seqlen"])
    np.testing.assert_array_equal(kwargs["indices"], np.arange(tokens))
    assert (kwargs["batch_size"], kwargs["seq_len"]) == (1, tokens)
    with pytest.raises(ValueError, match="transformers_major must be 4 or 5"):
        packed_to_flash_kwargs(batch, transformers_major=3)
