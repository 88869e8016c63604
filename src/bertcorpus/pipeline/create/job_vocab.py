"""The vocab a `create` job tokenises and masks with: read and checked once at launch, then carried inside the
job, so that every worker uses exactly the file that was checked."""

from __future__ import annotations

from dataclasses import dataclass

from bertcorpus.pipeline.sinks import output
from bertcorpus.wordpiece.vocab import Vocab, VocabError, read_vocab_bytes


@dataclass(frozen=True)
class JobVocab:
    """The vocab as read at launch. Its bytes travel inside the job, so that every worker, on this machine or
    elsewhere, tokenises with exactly the file that was checked; they are None only in a dry run that could not
    read a remote vocab, where the workers would read the path and check it against the digest."""

    path: str
    sha256: str | None = None
    data: bytes | None = None

    def load(self) -> Vocab:
        vocab = Vocab.from_bytes(self.data, self.path) if self.data is not None else Vocab.load(self.path)
        if self.sha256 and vocab.sha256 != self.sha256:
            raise VocabError(
                f"vocab file {self.path} as a worker read it differs from the file read at launch "
                f"(sha256 {vocab.sha256}, {self.sha256} at launch): was it changed while the job ran?"
            )
        return vocab


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
