"""vocab.txt files: one token per line, line number = id, `##` marks a continuation piece."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
# A byte-order mark that an editor put before the first line would turn [PAD] into another, regular token.
BYTE_ORDER_MARK = "\ufeff"
# Bracketed entries such as [unused17] are placeholders, never real text.
PLACEHOLDER = re.compile(r"^\[[^\]]+\]$")


class VocabError(ValueError):
    """A vocab file that cannot be used; the message says why."""


def read_vocab_bytes(path: str) -> bytes:
    """The raw file, from any Beam filesystem."""
    from apache_beam.io.filesystems import FileSystems

    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            return f.read()
    except Exception as e:  # FileNotFoundError locally, various errors on remote filesystems
        cause = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise VocabError(f"cannot read vocab file {path}: {cause}") from None


def _decode_utf8(raw: bytes, name: str) -> str:
    """The file's text, without a leading byte-order mark; a byte that is not UTF-8 would silently become another
    token, so it is refused."""
    try:
        return raw.decode("utf-8").removeprefix(BYTE_ORDER_MARK)
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise VocabError(
            f"vocab file {name} is not UTF-8: line {line:,} has the byte 0x{raw[e.start]:02x} "
            f"({e.reason}); a vocab file must be UTF-8 text"
        ) from None


@dataclass(frozen=True)
class Vocab:
    tokens: tuple[str, ...]
    sha256: str

    @classmethod
    def load(cls, path: str) -> Vocab:
        return cls.from_bytes(read_vocab_bytes(path), path)

    @classmethod
    def from_bytes(cls, raw: bytes, name: str = "vocab") -> Vocab:
        text = _decode_utf8(raw, name)
        # The reference strips each line; keep the same ids (line numbers).
        tokens = tuple(line.strip() for line in text.splitlines())
        if not tokens:
            raise VocabError(f"vocab file {name} is empty")
        missing = [t for t in SPECIAL_TOKENS if t not in set(tokens)]
        if missing:
            raise VocabError(
                f"vocab file {name} lacks {', '.join(missing)}; a BERT vocab needs {', '.join(SPECIAL_TOKENS)}"
            )
        return cls(tokens, hashlib.sha256(raw).hexdigest())

    @property
    def ids(self) -> dict[str, int]:
        # Later duplicates win, as in the reference's OrderedDict.
        return {tok: i for i, tok in enumerate(self.tokens)}

    def id_of(self, token: str) -> int:
        return self.ids[token]

    def __len__(self) -> int:
        return len(self.tokens)

    def regular_token_ids(self) -> np.ndarray:
        """Ids that a random replacement may draw: everything but [PAD], [unusedN], [CLS], [SEP], [MASK], [UNK]."""
        keep = [i for i, t in enumerate(self.tokens) if t and not PLACEHOLDER.match(t)]
        return np.asarray(keep, dtype=np.int32)
