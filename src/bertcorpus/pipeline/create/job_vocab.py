"""The vocab a `create` job tokenises and masks with: a WordPiece vocab.txt (--vocab) or a tokenizer.json
(--tokenizer), read and checked once at launch, then carried inside the job, so that every worker uses exactly the
file that was checked.

Its bytes travel once, as a one-element side input that every step which needs the vocab reads (StepWithVocab):
Beam pickles a step into the job three times as it builds the graph, bz2-compressed, and unpickles it again in every
bundle's processor, so a 1.8 MB tokenizer.json inside each of the five steps that use it cost ~2.4 CPU-s a run."""

from __future__ import annotations

from dataclasses import dataclass, replace

import apache_beam as beam
import zstandard

from bertcorpus.pipeline.engines.launcher_watch import WatchedDoFn
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
    """The vocab as read at launch. Its bytes are None only in a dry run that could not read a remote file, where
    the workers would read the path and check it against the digest, and in the label each step holds (`label`),
    whose bytes come as the job's side input (`frame`). A tokenizer.json comes with the special tokens its folder's
    configs and the flags named (role → token)."""

    path: str
    sha256: str | None = None
    data: bytes | None = None
    kind: str = "vocab"
    specials: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> tuple:
        return (self.kind, self.path, self.sha256, self.specials)

    @property
    def label(self) -> JobVocab:
        """The vocab without its bytes: what a step carries inside the job."""
        return replace(self, data=None)

    def frame(self) -> bytes | None:
        """The bytes as the side input carries them: a zstd frame, a third of a tokenizer.json's size for Beam to
        copy (and bz2-compress, once, inside the step that makes the side input)."""
        return zstandard.ZstdCompressor(level=3).compress(self.data) if self.data is not None else None

    def carried(self, frame: bytes | None) -> bytes | None:
        """The file's bytes from the side input's frame, else those read at launch (None: read the path)."""
        return zstandard.ZstdDecompressor().decompress(frame) if frame is not None else self.data

    def raw(self, frame: bytes | None = None) -> bytes:
        """The file's bytes: carried, or the path read now."""
        data = self.carried(frame)
        return data if data is not None else read_vocab_bytes(self.path)

    def load(self, frame: bytes | None = None) -> Vocab | TokenizerFile:
        """The vocab, from the side input's frame, the bytes read at launch, or the path (checked against the digest
        taken at launch)."""
        if self.sha256 and self.key in _LOADED:
            return _LOADED[self.key]
        data = self.carried(frame)
        if self.kind == "tokenizer":
            source = (
                TokenizerSource(self.path, data, self.specials)
                if data is not None
                else read_tokenizer_source(self.path, dict(self.specials))
            )
            loaded = TokenizerFile(source)
        else:
            loaded = Vocab.from_bytes(data, self.path) if data is not None else Vocab.load(self.path)
        if self.sha256 and loaded.sha256 != self.sha256:
            raise VocabError(
                f"{self.kind} file {self.path} as a worker read it differs from the file read at launch "
                f"(sha256 {loaded.sha256}, {self.sha256} at launch): was it changed while the job ran?"
            )
        if self.sha256:
            _remember(self.key, loaded)
        return loaded


def carried_vocab(pbegin, vocab: JobVocab) -> beam.pvalue.AsSingleton:
    """The side input that carries the vocab's bytes to every step that needs them: one element, its frame."""
    frame = pbegin | "carry the vocab" >> beam.Create([vocab.frame()]).with_output_types(bytes | None)
    return beam.pvalue.AsSingleton(frame)


class StepWithVocab(WatchedDoFn):
    """A step that needs the job's vocab: it holds the vocab's label, and its bytes come as the side input `vocab`
    (carried_vocab), which a DoFn does not have at setup, so the vocab is loaded at the first element, once per
    process (load's cache), and `use_vocab` takes what the step needs of it. Called as it is, with no side input
    (tests), a step loads the vocab it was given."""

    def __init__(self, config, vocab: JobVocab):
        self.config = config
        self.vocab = vocab
        self.loaded = None

    def setup(self):
        super().setup()
        self.loaded = None

    def vocab_ready(self, frame: bytes | None = None) -> Vocab | TokenizerFile:
        if self.loaded is None:
            self.loaded = self.vocab.load(frame)
            self.use_vocab(self.loaded)
        return self.loaded

    def use_vocab(self, vocab: Vocab | TokenizerFile) -> None:
        """What the step derives from the vocab, once it is loaded."""


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
