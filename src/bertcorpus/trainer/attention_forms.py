"""A packed batch (layout="packed") in the form each Hugging Face attention implementation handles correctly.

A packed batch is one flat stream of instances, told apart only by cu_seqlens and position_ids. Hugging Face's
encoders read those boundaries on one path alone, flash-attention's varlen kernels; on `sdpa` and `eager` a packed
row is one long sequence, and every instance attends to the others in it, with no error and a normal-looking loss.
So:

- `packed_to_padded(batch)`: padded rows and an attention mask, which every attention implementation of every
  encoder takes (docs/loader.md);
- `packed_to_flash_kwargs(batch)`: the flat stream with the boundaries under the names that ModernBERT's
  `flash_attention_2` path reads. Those names differ between transformers 4 (ModernBERT's own unpadding:
  cu_seqlens, max_seqlen, indices, batch_size, seq_len) and transformers 5 (the shared flash-attention keywords:
  cu_seq_lens_q/k, max_length_q/k).

Both return numpy arrays and Python ints (no torch here); a training loop moves the arrays to its device.
"""

from __future__ import annotations

import functools

import numpy as np

from bertcorpus.trainer.packed_layout import IGNORE_INDEX

PAD_ID = 0  # [PAD] in a BERT vocab, as the padded layouts pad


def _rows(values: np.ndarray, real: np.ndarray, fill: int) -> np.ndarray:
    """The flat stream's instances as rows, each left-aligned where `real` holds and filled with `fill` after it."""
    rows = np.full(real.shape, fill, np.int64)
    rows[real] = values
    return rows


def packed_to_padded(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A packed batch as padded rows, one instance a row, as long as the batch's longest instance: `input_ids`
    (padded with [PAD], id 0), `attention_mask` (1 on the instance's tokens), `position_ids` (0, 1, ... in each
    row), `labels` (-100 but at the predictions, as in the packed batch); `token_type_ids` and
    `next_sentence_label` where the batch has a pair objective (nsp, sop). All int64, (instances, longest)."""
    lengths = np.diff(np.asarray(batch["cu_seqlens"], np.int64))
    width = int(lengths.max(initial=0))
    real = np.arange(width)[None, :] < lengths[:, None]  # (instances, longest): where each row holds a token
    out = {
        "input_ids": _rows(batch["input_ids"], real, PAD_ID),
        "attention_mask": real.astype(np.int64),
        "position_ids": np.broadcast_to(np.arange(width, dtype=np.int64), real.shape).copy(),
        "labels": _rows(batch["labels"], real, IGNORE_INDEX),
    }
    # Segments exist only with a pair objective: a model without token types (ModernBERT) refuses the key.
    if "next_sentence_label" in batch:
        out["token_type_ids"] = _rows(batch["token_type_ids"], real, 0)
        out["next_sentence_label"] = np.asarray(batch["next_sentence_label"], np.int64)
    return out


@functools.cache  # read once: the flash form asks for every batch
def installed_transformers_major() -> int:
    """The major version of the installed transformers, read from its metadata (nothing is imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("transformers").split(".")[0])
    except PackageNotFoundError:
        raise ValueError("transformers is not installed; pass transformers_major=4 or 5") from None


def packed_to_flash_kwargs(batch: dict[str, np.ndarray], transformers_major: int | None = None) -> dict:
    """The keyword arguments of `ModernBertForMaskedLM(...)` with attn_implementation="flash_attention_2" for one
    packed batch, each instance attending to itself only. transformers_major: 4 or 5 (default: the installed one).

    transformers 4 (ModernBERT's unpadded path, as in 4.57): input_ids and labels flat (T,); cu_seqlens int32
    (instances + 1,); max_seqlen a Python int; indices (T,) int64, batch_size 1 and seq_len T, so that the logits
    come back as (1, T, vocab), token t's at [0, t].
    transformers 5 (the shared flash-attention keywords, as in 5.24): input_ids, position_ids and labels as one row
    (1, T); cu_seq_lens_q and cu_seq_lens_k int32 (instances + 1,); max_length_q and max_length_k Python ints."""
    major = installed_transformers_major() if transformers_major is None else transformers_major
    cu_seqlens = np.asarray(batch["cu_seqlens"], np.int32)
    longest = int(np.diff(cu_seqlens).max(initial=0))
    tokens = len(batch["input_ids"])
    if major == 4:
        return {
            "input_ids": np.asarray(batch["input_ids"], np.int64),
            "labels": np.asarray(batch["labels"], np.int64),
            "cu_seqlens": cu_seqlens,
            "max_seqlen": longest,
            "indices": np.arange(tokens, dtype=np.int64),
            "batch_size": 1,
            "seq_len": tokens,
        }
    if major == 5:
        return {
            "input_ids": np.asarray(batch["input_ids"], np.int64)[None, :],
            "position_ids": np.asarray(batch["position_ids"], np.int64)[None, :],
            "labels": np.asarray(batch["labels"], np.int64)[None, :],
            "cu_seq_lens_q": cu_seqlens,
            "cu_seq_lens_k": cu_seqlens,
            "max_length_q": longest,
            "max_length_k": longest,
        }
    raise ValueError(f"transformers_major must be 4 or 5, not {major!r}")
