"""The logits of a tiny, randomly initialised ModernBERT (transformers, PyTorch on the CPU) for a list of runs, in an
interpreter of its own: PyTorch loads triton, whose LLVM aborts the process where TensorFlow's is already loaded
(other tests of the same pytest worker import it). tests/test_attention_forms.py runs it.

    python modernbert_logits.py RUNS OUT

RUNS is a pickle of (attention, inputs) pairs: attention "sdpa", or "varlen" for a stand-in of flash-attention's
varlen kernel (sdpa on each cu_seq_lens_q span, registered as an attention implementation: flash-attention itself
needs a GPU); inputs the model's keyword arguments, numpy arrays and ints. OUT gets a pickle of {"logits": one
array per run, "flash_keywords": the names transformers' FlashAttentionKwargs lists, "transformers": its version}.
"""

from __future__ import annotations

import pickle
import sys

import numpy as np
import torch
import transformers
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface
from transformers.modeling_flash_attention_utils import FlashAttentionKwargs

VOCAB_SIZE, SEQ_LENGTH, CLS, SEP = 30522, 128, 101, 102  # the tests' BERT vocab and sample length


def tiny_modernbert():
    """Weights large enough that attention is far from uniform; three layers: one of global attention, two of local
    (sliding-window) attention, as ModernBERT alternates them."""
    config = transformers.ModernBertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=SEQ_LENGTH,
        initializer_range=0.2,
        pad_token_id=0,
        cls_token_id=CLS,
        sep_token_id=SEP,
        bos_token_id=CLS,
        eos_token_id=SEP,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    return transformers.ModernBertForMaskedLM(config).eval()


def varlen(module, query, key, value, attention_mask, cu_seq_lens_q, cu_seq_lens_k, sliding_window=None, **options):
    """What flash_attn_varlen_func computes, on the CPU: each span of cu_seq_lens attends to itself only, and in a
    local layer to the tokens within its window (flash's window_size is sliding_window - 1 on each side)."""
    assert attention_mask is None and torch.equal(cu_seq_lens_q, cu_seq_lens_k)
    options = {k: v for k, v in options.items() if k in ("dropout", "scaling")}
    parts = []
    for a, b in zip(cu_seq_lens_q[:-1].tolist(), cu_seq_lens_q[1:].tolist()):
        mask = None
        if sliding_window is not None:
            distance = (torch.arange(b - a)[:, None] - torch.arange(b - a)[None, :]).abs()
            mask = (distance <= sliding_window - 1)[None, None]
        span = (query[:, :, a:b], key[:, :, a:b], value[:, :, a:b])
        parts.append(sdpa_attention_forward(module, *span, mask, **options)[0])
    return torch.cat(parts, dim=1), None


def main(runs_path: str, out_path: str) -> None:
    with open(runs_path, "rb") as f:
        runs = pickle.load(f)
    AttentionInterface.register("varlen", varlen)
    AttentionMaskInterface.register("varlen", lambda *args, **kw: None)  # the spans are the only mask
    model = tiny_modernbert()
    found = []
    with torch.no_grad():
        for attention, inputs in runs:
            model.set_attn_implementation(attention)
            tensors = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
            found.append(model(**tensors).logits.numpy())
    with open(out_path, "wb") as f:
        pickle.dump(
            {
                "logits": found,
                "flash_keywords": sorted(FlashAttentionKwargs.__annotations__),
                "transformers": transformers.__version__,
            },
            f,
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
