"""A Hugging Face `tokenizer.json`, as a model's own tokenizer is published (ModernBERT's byte-level BPE, XLM-R's
SentencePiece Unigram, a WordPiece), read as `AutoTokenizer.from_pretrained(folder)` reads it and used as it is.

What `create`, the loader and `inspect` need of it, and nothing of transformers:
- the special tokens: from flags, else the folder's special_tokens_map.json, else its tokenizer_config.json,
  else the tokenizer.json itself (the ids its post-processor adds, its model's unknown token, and the mask and
  padding tokens known by their usual names);
- the templates its post-processor lays one and two sequences out in ([CLS] A [SEP] B [SEP], <s> A </s></s> B </s>),
  read off the tokenizer by encoding two letters, so that every kind of post-processor is read the same way;
- the ids a random replacement may draw: ordinary tokens only, never special, added, reserved or byte-fallback;
- the words: which tokens start one (a word starts at Ġ or ▁, at a token not marked ## as a continuation, at an
  ideograph, after a token of whitespace), for whole-word masking.

A special token's text in a document is text: it is encoded as the characters it is (`encode_special_tokens`),
so that no document can place a [MASK] or an </s> in the records, as the reference tokenises "[MASK]" as text.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import posixpath
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from tokenizers import Tokenizer

from bertcorpus.wordpiece.cjk import is_ideograph
from bertcorpus.wordpiece.sequence_layout import SequenceLayout

SPECIAL_ROLES = ("cls", "sep", "mask", "pad", "unk", "bos", "eos")
TOKENIZER_JSON = "tokenizer.json"
CONFIG_FILES = ("tokenizer_config.json", "special_tokens_map.json")  # the later one wins, as in transformers
# The names a tokenizer.json without configs gives its mask and padding tokens, by family.
USUAL_NAMES = {"mask": ("[MASK]", "<mask>", "<MASK>"), "pad": ("[PAD]", "<pad>", "<|padding|>", "<PAD>")}
# Entries kept for later use or for raw bytes, never ordinary text: a random replacement must not draw them.
RESERVED = re.compile(
    r"\[unused\d+\]|<unused\d+>|\[UNUSED_TOKEN_\d+\]|\[RESERVED[_\d]*\]|<\|reserved[^|]*\|>|<extra_id_\d+>|<0x[0-9A-F]{2}>"
)
_BYTE_FALLBACK = re.compile(r"<0x([0-9A-F]{2})>")  # a byte-fallback entry: <0xE4>
BYTE_LEVEL_SPACE, METASPACE = "\u0120", "\u2581"  # Ġ and ▁: the marks of a word's leading space
CONVERT_HINT = (
    'write one with transformers: python -c "from transformers import AutoTokenizer; '
    "AutoTokenizer.from_pretrained('FOLDER').save_pretrained('OUT')\" (OUT then holds tokenizer.json)"
)


class TokenizerFileError(ValueError):
    """A tokenizer that cannot be used as given; the message says why, in one line."""


@dataclass(frozen=True)
class TokenizerSource:
    """A tokenizer's files as read at launch: tokenizer.json's bytes, and the special tokens that its folder's
    configs and the command's flags name (role → token)."""

    name: str
    json_bytes: bytes
    named_specials: tuple[tuple[str, str], ...] = ()

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.json_bytes).hexdigest()


def read_tokenizer_source(path: str, flags: dict[str, str] | None = None) -> TokenizerSource:
    """A tokenizer.json, or a folder holding one (with tokenizer_config.json and special_tokens_map.json), from any
    Beam filesystem; flags (role → token) name special tokens over what the files name."""
    folder = None if path.endswith(".json") else path
    json_path = posixpath.join(path, TOKENIZER_JSON) if folder else path
    if folder is not None and not _exists(json_path):
        raise TokenizerFileError(_no_tokenizer_json(folder))
    named: dict[str, str] = {}
    for config in CONFIG_FILES if folder else ():
        config_path = posixpath.join(folder, config)
        if _exists(config_path):
            named.update(_named_tokens(_read(config_path), config_path))
    named.update({role: token for role, token in (flags or {}).items() if token})
    return TokenizerSource(path, _read(json_path), tuple(sorted(named.items())))


def _read(path: str) -> bytes:
    from apache_beam.io.filesystems import FileSystems

    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            return f.read()
    except Exception as e:  # FileNotFoundError locally, various errors on remote filesystems
        cause = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0]
        raise TokenizerFileError(f"cannot read tokenizer file {path}: {cause}") from None


def _exists(path: str) -> bool:
    from apache_beam.io.filesystems import FileSystems

    try:
        return FileSystems.exists(path)
    except Exception:
        return False


def _listing(folder: str) -> list[str]:
    from apache_beam.io.filesystems import FileSystems

    try:
        found = FileSystems.match([posixpath.join(folder, "*")])[0].metadata_list
    except Exception:
        return []
    return sorted(posixpath.basename(m.path) for m in found)


def _no_tokenizer_json(folder: str) -> str:
    """Why a folder is no tokenizer, naming what it holds instead and how to make a tokenizer.json of it."""
    names = _listing(folder)
    if not names:
        return f"--tokenizer {folder}: no such folder, or it is empty (give a tokenizer.json or a folder holding one)"
    held = None
    if {"vocab.json", "merges.txt"} <= set(names):
        held = "vocab.json and merges.txt (a BPE tokenizer in the older layout)"
    elif models := [n for n in names if n.endswith(".model")]:
        held = f"{models[0]} (a SentencePiece model)"
    elif "vocab.txt" in names:
        return (
            f"--tokenizer {folder}: the folder holds vocab.txt but no tokenizer.json; a WordPiece vocab.txt is "
            f"what --vocab takes (--vocab {posixpath.join(folder, 'vocab.txt')})"
        )
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    what = f"it holds {held}" if held else f"it holds {shown}"
    return f"--tokenizer {folder}: the folder has no tokenizer.json; {what}: {CONVERT_HINT}"


def _named_tokens(raw: bytes, name: str) -> dict[str, str]:
    """role → token of a tokenizer_config.json or special_tokens_map.json (a token is a string, or an object with
    its `content`, as transformers writes an AddedToken)."""
    try:
        config = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TokenizerFileError(f"{name} is not JSON: {e}") from None
    if not isinstance(config, dict):
        raise TokenizerFileError(f"{name} is not a JSON object")
    named = {}
    for role in SPECIAL_ROLES:
        value = config.get(f"{role}_token")
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str) and value:
            named[role] = value
    return named


class TokenizerFile:
    """A tokenizer.json as create, the loader and inspect use it (see the module's docstring)."""

    def __init__(self, source: TokenizerSource):
        self.source = source
        self.name = source.name
        self.sha256 = source.sha256
        try:
            self.tokenizer = Tokenizer.from_str(source.json_bytes.decode("utf-8"))
        except UnicodeDecodeError:
            raise TokenizerFileError(f"tokenizer file {self.name} is not UTF-8 text") from None
        except Exception as e:  # tokenizers raises its own Exception for JSON it cannot read
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise TokenizerFileError(f"tokenizer file {self.name} is not a tokenizer.json: {reason}") from None
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.tokenizer.encode_special_tokens = True  # a special token's text in a document is text
        self.config = json.loads(source.json_bytes)
        self.tokens = self._tokens()
        self.specials = self._specials(dict(source.named_specials))
        self.layout = self._layout()

    # ------------------------------------------------------------------------------------------ the vocabulary

    def _tokens(self) -> tuple[str, ...]:
        """Token string of every id, 0 to the largest (a gap, which no tokenizer.json should have, is '')."""
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        tokens = [""] * (max(vocab.values()) + 1 if vocab else 0)
        for token, i in vocab.items():
            tokens[i] = token
        return tuple(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def model_type(self) -> str:
        return (self.config.get("model") or {}).get("type") or "unknown"

    @cached_property
    def added(self) -> dict[int, bool]:
        """Id → special, of every added token."""
        return {a["id"]: bool(a.get("special")) for a in self.config.get("added_tokens") or []}

    def id_of(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def regular_token_ids(self) -> np.ndarray:
        """Ids a random replacement may draw: every token but added ones, the unknown token, and reserved or
        byte-fallback entries ([unused3], <0xE4>)."""
        unk = self.specials.get("unk")
        keep = [
            i for i, t in enumerate(self.tokens) if t and i not in self.added and i != unk and not RESERVED.fullmatch(t)
        ]
        return np.asarray(keep, dtype=np.int32)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    # ------------------------------------------------------------------------------------------ special tokens

    def _specials(self, named: dict[str, str]) -> dict[str, int]:
        """role → id: the named ones (flags and configs) first, then what the tokenizer.json itself says."""
        found: dict[str, int] = {}
        for role, token in named.items():
            i = self.id_of(token)
            if i is None:
                raise TokenizerFileError(f"tokenizer {self.name}: the {role} token {token!r} is not in its vocabulary")
            found[role] = i
        unk = (self.config.get("model") or {}).get("unk_token")
        if "unk" not in found and isinstance(unk, str) and self.id_of(unk) is not None:
            found["unk"] = self.id_of(unk)
        specials = [a["content"] for a in self.config.get("added_tokens") or [] if a.get("special")]
        for role, names in USUAL_NAMES.items():
            if role not in found:
                match = next((t for t in names if t in specials), None)
                if match is not None:
                    found[role] = self.id_of(match)
        return found

    # ------------------------------------------------------------------------------------------ the templates

    def _layout(self) -> SequenceLayout:
        """The templates, as the post-processor applies them; where it adds nothing, BERT's from the cls and sep
        tokens, or RoBERTa's from bos and eos."""
        pair = self.tokenizer.encode("a", "b", add_special_tokens=True)
        single = self.tokenizer.encode("a", add_special_tokens=True)
        if any(s is None for s in pair.sequence_ids):
            return self._layout_of(pair, single)
        cls, sep = self.specials.get("cls"), self.specials.get("sep")
        bos, eos = self.specials.get("bos"), self.specials.get("eos")
        if cls is not None and sep is not None:
            return SequenceLayout.bert(cls, sep)
        if bos is not None and eos is not None:
            return SequenceLayout((bos,), (eos, eos), (eos,), (bos,), (eos,), 0)
        raise TokenizerFileError(
            f"tokenizer {self.name} adds no special tokens around sequences (it has no post-processor that does) "
            "and names no cls/sep or bos/eos tokens: pass --special-token cls=TOKEN --special-token sep=TOKEN "
            "(BERT's layout) or --special-token bos=TOKEN --special-token eos=TOKEN (RoBERTa's)"
        )

    def _layout_of(self, pair, single) -> SequenceLayout:
        seq, types, ids = pair.sequence_ids, pair.type_ids, pair.ids
        a = [i for i, s in enumerate(seq) if s == 0]
        b = [i for i, s in enumerate(seq) if s == 1]
        single_a = [i for i, s in enumerate(single.sequence_ids) if s == 0]
        if not a or not b or not single_a:
            raise TokenizerFileError(f"tokenizer {self.name}: encoding two letters gave an empty sequence")
        parts = (ids[: a[0]], ids[a[-1] + 1 : b[0]], ids[b[-1] + 1 :])
        between = seq[a[-1] + 1 : b[0]]
        if any(s is not None for s in between) or len(a) + len(b) + sum(map(len, parts)) != len(ids):
            raise TokenizerFileError(f"tokenizer {self.name}: its pair template interleaves the two sequences")
        b_type = types[b[0]]
        first_types = set(types[: b[0]])
        if first_types != {0} or set(types[b[0] :]) != {b_type}:
            raise TokenizerFileError(
                f"tokenizer {self.name}: its pair template gives token types {types} to [A-part, B-part]; the "
                "records store only one boundary between the types (0 up to B, then one type to the end)"
            )
        return SequenceLayout(
            tuple(parts[0]),
            tuple(parts[1]),
            tuple(parts[2]),
            tuple(single.ids[: single_a[0]]),
            tuple(single.ids[single_a[-1] + 1 :]),
            int(b_type),
        )

    # ------------------------------------------------------------------------------------------ words

    @cached_property
    def word_flags(self) -> tuple[np.ndarray, np.ndarray]:
        """(continues, breaks) per id: a token that never starts a word (a ## piece, a byte inside a character,
        a piece without the mark of a leading space); a token of line breaks or tabs alone, after which a word
        starts."""
        continues = np.zeros(len(self.tokens), bool)
        breaks = np.zeros(len(self.tokens), bool)
        prefix = (self.config.get("model") or {}).get("continuing_subword_prefix")
        wordpiece = self.model_type == "WordPiece" and prefix
        if self.model_type == "WordLevel":  # every token is a word of its own
            return continues, breaks
        for i, token in enumerate(self.tokens):
            if not token or i in self.added:
                continue
            if wordpiece:
                continues[i] = token.startswith(prefix)
                continue
            surface = self._surface(token)
            if not surface.strip(b" \t\n\r\x0b\x0c"):
                # whitespace alone: a space (▁, Ġ) is the start of the word after it; a line break ends a word
                breaks[i] = bool(surface.strip(b" "))
            elif not (surface[:1] == b" " or token[:1] in (BYTE_LEVEL_SPACE, METASPACE) or _starts_ideograph(surface)):
                continues[i] = True
        return continues, breaks

    @cached_property
    def marks_words(self) -> bool:
        """Whether the vocabulary tells where words start: ## continuations, or Ġ/▁ (or a space) before words."""
        if self.model_type == "WordLevel" or (
            self.model_type == "WordPiece" and (self.config.get("model") or {}).get("continuing_subword_prefix")
        ):
            return True
        return any(self._surface(t)[:1] == b" " for i, t in enumerate(self.tokens) if t and i not in self.added)

    @cached_property
    def _byte_level(self) -> bool:
        parts = [self.config.get("pre_tokenizer"), self.config.get("decoder")]
        return "ByteLevel" in json.dumps(parts)

    def _surface(self, token: str) -> bytes:
        """The bytes a token stands for: a byte-level token's characters mapped back to bytes, ▁ as a space, a
        byte-fallback entry as its byte."""
        if token[:3] == "<0x" and (m := _BYTE_FALLBACK.fullmatch(token)):
            return bytes([int(m.group(1), 16)])
        if self._byte_level:
            # each stand-in becomes the Latin-1 character of its byte, any other character one past Latin-1
            with contextlib.suppress(UnicodeEncodeError):
                return token.translate(_byte_level_translation()).encode("latin-1")
        return token.replace(METASPACE, " ").encode("utf-8")

    # ------------------------------------------------------------------------------------------ the manifest

    def describe(self) -> dict:
        """What the manifest records of the tokenizer, so that a reader needs nothing else to decode and mask."""
        lay = self.layout
        names = [self.tokens[i] for i in lay.prefix], [self.tokens[i] for i in lay.middle]
        return {
            "model": self.model_type,
            "vocab_size": len(self),
            "sha256": self.sha256,
            "specials": {role: self.tokens[i] for role, i in sorted(self.specials.items())},
            "pair_template": " ".join([*names[0], "$A", *names[1], "$B", *[self.tokens[i] for i in lay.suffix]]),
            "single_template": " ".join(
                [*[self.tokens[i] for i in lay.single_prefix], "$A", *[self.tokens[i] for i in lay.single_suffix]]
            ),
            "second_segment_type": lay.b_type,
            "marks_words": self.marks_words,
        }


def tokenizer_folder(tokenizer: TokenizerFile) -> dict[str, bytes]:
    """The files of a folder that AutoTokenizer.from_pretrained reads as this tokenizer, its special tokens named as
    create resolved them: tokenizer.json byte for byte, tokenizer_config.json and special_tokens_map.json."""
    named = {f"{role}_token": tokenizer.tokens[i] for role, i in sorted(tokenizer.specials.items())}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False, **named}
    return {
        TOKENIZER_JSON: tokenizer.source.json_bytes,
        "tokenizer_config.json": (json.dumps(config, indent=2, sort_keys=True) + "\n").encode(),
        "special_tokens_map.json": (json.dumps(named, indent=2, sort_keys=True) + "\n").encode(),
    }


def _starts_ideograph(surface: bytes) -> bool:
    """Whether a token's bytes begin a CJK ideograph (the character, or the first bytes of its UTF-8): the start of a
    word, as an ideograph is in the reference's tokenisation, until a segmenter joins it to the one before."""
    lead = surface[:1]
    if not lead or lead[0] < 0xE3:
        return False
    text = surface[:4].decode("utf-8", "ignore")
    if text:
        return is_ideograph(text[0])
    # A lone lead byte: E4..E9 lead U+4000..U+9FFF (the main block); E3 with a second byte of 0x90 on leads U+3400+.
    return 0xE4 <= lead[0] <= 0xE9 or (lead[0] == 0xE3 and len(surface) > 1 and surface[1] >= 0x90)


@functools.cache
def _byte_level_translation() -> dict[int, str]:
    """str.translate's table from byte-level BPE's stand-ins to the Latin-1 characters of their bytes, and from
    every other Latin-1 character to one that Latin-1 cannot encode (they are no stand-ins)."""
    table = {ord(c): chr(b) for c, b in _bytes_of_byte_level_chars().items()}
    return {**{c: "\u0100" for c in range(256) if c not in table}, **table}


@functools.cache
def _bytes_of_byte_level_chars() -> dict[str, int]:
    """Byte-level BPE's printable stand-in of each byte (Ġ for a space) → the byte: the printable ASCII and
    Latin-1 bytes stand for themselves, the other 68 for the characters from U+0100 on, in byte order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {chr(b): b for b in kept}
    for shifted, b in enumerate(b for b in range(256) if b not in kept):
        chars[chr(256 + shifted)] = b
    return chars
