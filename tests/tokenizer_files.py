"""The published tokenizers of tests/data/tokenizers, written out as a model's folder is published: tokenizer.json
with the configs that name its special tokens (tests/data/tokenizers/DATA.md)."""

from __future__ import annotations

import json
from pathlib import Path

import zstandard

TOKENIZERS = Path(__file__).resolve().parent / "data" / "tokenizers"
# XLM-R's published tokenizer_config.json names these; the other two folders hold tokenizer.json alone.
CONFIGS = {
    "xlmr-shape": {
        "tokenizer_config.json": {
            "tokenizer_class": "XLMRobertaTokenizer",
            "bos_token": "<s>",
            "cls_token": "<s>",
            "eos_token": "</s>",
            "sep_token": "</s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "mask_token": {"content": "<mask>", "lstrip": True, "normalized": False, "special": True},
        }
    }
}
NAMES = ("xlmr-shape", "bert-base-uncased", "anthropic-claude-v1")


def tokenizer_folder(name: str, where: Path) -> Path:
    """The folder of tokenizer `name` (NAMES), written under `where`."""
    folder = where / name
    folder.mkdir(parents=True, exist_ok=True)
    raw = zstandard.ZstdDecompressor().decompress((TOKENIZERS / f"{name}-tokenizer.json.zst").read_bytes())
    (folder / "tokenizer.json").write_bytes(raw)
    for file_name, config in CONFIGS.get(name, {}).items():
        (folder / file_name).write_text(json.dumps(config, indent=2) + "\n")
    return folder
