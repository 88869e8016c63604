"""bertcorpus: BERT pretraining corpora built with Apache Beam, and the loader that reads them.

The names a notebook or a training script uses, loaded on first use (so that `import bertcorpus` stays cheap):

    from bertcorpus import PretrainingLoader
    loader = PretrainingLoader("out", seq_length=128, batch_size=256)

    PretrainingLoader, LoaderError   batches of a `create` output (bertcorpus.loader; docs/loader.md)
    Vocab, VocabError                a vocab.txt in the BERT layout
    WordPieceTokenizer               text → WordPiece ids, as the reference FullTokenizer gives them
    document_sentences               a document's text → its sentences, as `create` splits them
    packed_to_padded                 a packed batch as padded rows, for any attention implementation
    packed_to_flash_kwargs           a packed batch as ModernBERT's flash_attention_2 path takes it

The sub-packages hold the rest: bertcorpus.pipeline (the Beam jobs and the command line), bertcorpus.transforms
(pure processing steps), bertcorpus.wordpiece (vocab training and tokenisation), bertcorpus.trainer (the compact
pretraining module).
"""

from __future__ import annotations

import importlib

__version__ = "0.3.0"

_PUBLIC = {
    "PretrainingLoader": "bertcorpus.trainer.loader",
    "LoaderError": "bertcorpus.trainer.loader",
    "Vocab": "bertcorpus.wordpiece.vocab",
    "VocabError": "bertcorpus.wordpiece.vocab",
    "WordPieceTokenizer": "bertcorpus.wordpiece.tokenizer",
    "document_sentences": "bertcorpus.transforms.sentences",
    "packed_to_padded": "bertcorpus.trainer.attention_forms",
    "packed_to_flash_kwargs": "bertcorpus.trainer.attention_forms",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'bertcorpus' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
