"""The vocab a `create` job tokenises and masks with: a WordPiece vocab.txt (--vocab) or a tokenizer.json
(--tokenizer), read and checked once at launch, then carried inside the job, so that every worker uses exactly the
file that was checked."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import zstandard

from bertcorpus.pipeline.sinks import output
from bertcorpus.wordpiece.tokenizer_file import (
    TokenizerFile,
    TokenizerFileError,
    TokenizerSource,
    read_tokenizer_source,
)
from bertcorpus.wordpiece.vocab import Vocab, VocabError, read_vocab_bytes

KINDS = ("vocab", "tokenizer")  # a vocab.txt, or a tokenizer.json

# Every step of a worker process loads the same checked file: it is built once per process (a tokenizer.json of
# 65k tokens takes ~0.2 s, and 0.12 s more for the word flags it then keeps), keyed by what makes it; a process
# that runs many jobs (tests) keeps the last few. Nothing mutates one.
_LOADED: dict[tuple, Vocab | TokenizerFile] = {}
_KEEP = 4


def _remember(key: tuple, loaded: Vocab | TokenizerFile) -> None:
    while len(_LOADED) >= _KEEP:
        del _LOADED[next(iter(_LOADED))]
    _LOADED[key] = loaded


@dataclass(frozen=True)
class JobVocab:
    """The vocab as read at launch. Its bytes travel inside the job, so that every worker, on this machine or
    elsewhere, tokenises with exactly the file that was checked; they are None only in a dry run that could not
    read a remote file, where the workers would read the path and check it against the digest. A tokenizer.json
    comes with the special tokens its folder's configs and the flags named (role → token)."""

    path: str
    sha256: str | None = None
    data: bytes | None = None
    kind: str = "vocab"
    specials: tuple[tuple[str, str], ...] = ()

    def __reduce__(self):
        # Beam pickles each step that carries the vocab with bz2 (three times as it builds the graph), which takes
        # 0.2 CPU-s over a tokenizer.json of 1.8 MB; a zstd frame of the bytes, made once, goes in their place.
        return _unpacked, (self.path, self.sha256, self._packed, self.kind, self.specials)

    @cached_property
    def _packed(self) -> bytes | None:
        return zstandard.ZstdCompressor(level=3).compress(self.data) if self.data is not None else None

    @property
    def key(self) -> tuple:
        return (self.kind, self.path, self.sha256, self.specials)

    def load(self) -> Vocab | TokenizerFile:
        if self.sha256 and self.key in _LOADED:
            return _LOADED[self.key]
        if self.kind == "tokenizer":
            source = (
                TokenizerSource(self.path, self.data, self.specials)
                if self.data is not None
                else read_tokenizer_source(self.path, dict(self.specials))
            )
            loaded = TokenizerFile(source)
        else:
            loaded = Vocab.from_bytes(self.data, self.path) if self.data is not None else Vocab.load(self.path)
        if self.sha256 and loaded.sha256 != self.sha256:
            raise VocabError(
                f"{self.kind} file {self.path} as a worker read it differs from the file read at launch "
                f"(sha256 {loaded.sha256}, {self.sha256} at launch): was it changed while the job ran?"
            )
        if self.sha256:
            _remember(self.key, loaded)
        return loaded


def _unpacked(path, sha256, packed, kind, specials) -> JobVocab:
    data = zstandard.ZstdDecompressor().decompress(packed) if packed is not None else None
    return JobVocab(path, sha256, data, kind, specials)


def read_job_vocab(path: str, dry_run: bool, rendering: bool) -> tuple[JobVocab, str]:
    """The vocab for the job and the sha256 the manifest records. It is read and checked before anything is
    written; only a graph drawing, or a dry run that cannot reach a remote vocab, goes without it."""
    if rendering:
        return JobVocab(path), "not read (drawing the graph)"
    try:
        raw = read_vocab_bytes(path)
    except VocabError:
        if dry_run and output.is_remote(path):
            return JobVocab(path), "unverified (remote vocab, not read at launch)"
        raise
    sha256 = Vocab.from_bytes(raw, path).sha256  # validates it
    return JobVocab(path, sha256, raw), sha256


def read_job_tokenizer(path: str, flags: dict[str, str], dry_run: bool, rendering: bool) -> tuple[JobVocab, str]:
    """read_job_vocab for a tokenizer.json or a folder holding one, with the special tokens the flags name."""
    if rendering:
        return JobVocab(path, kind="tokenizer", specials=tuple(sorted(flags.items()))), "not read (drawing the graph)"
    try:
        source = read_tokenizer_source(path, flags)
    except TokenizerFileError:
        if dry_run and output.is_remote(path):
            unread = JobVocab(path, kind="tokenizer", specials=tuple(sorted(flags.items())))
            return unread, "unverified (remote tokenizer, not read at launch)"
        raise
    job = JobVocab(path, source.sha256, source.json_bytes, "tokenizer", source.named_specials)
    _remember(job.key, TokenizerFile(source))  # validates it; the steps of a local run use it as it is
    return job, source.sha256
