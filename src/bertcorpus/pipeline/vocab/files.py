"""The files `bertcorpus vocab` writes into the vocab's folder, and the record that `create` reads back.

    vocab.txt (or the name --output gives)   WordPiece: the vocab, one token per line, line number = id
    tokenizer.json                            the whole tokenisation in the tokenizers library's own format
    tokenizer_config.json                     what transformers' AutoTokenizer needs beside tokenizer.json
    special_tokens_map.json                   BPE and Unigram: the special tokens by role (--output names the folder)
    manifest.json                             written last: the files above with their sizes and digests, the
                                              settings, the counts and the held-out measurement

Each file is written under a temporary name and renamed, and the old manifest goes first, so that a folder whose
manifest is missing, or names other digests, is not a finished vocab. The tokenizer files have fixed names (HF
tools look for them), so a folder holds one vocab: a second one into the same folder is refused without
--overwrite, and a folder holding another job's manifest (an extraction's, a `create` output) is refused always.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.sinks import output
from bertcorpus.wordpiece.tokenizer import standalone_tokenizer, tokenizer_config
from bertcorpus.wordpiece.vocab import Vocab

JOB = "vocab"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
FOLDER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class VocabFiles:
    """Where a run's files go: a folder, the names written into it in order (the manifest after them), and the one
    the output is known by: a WordPiece vocab file, or a folder's tokenizer.json."""

    folder: str
    names: tuple[str, ...]
    main: str

    def path(self, name: str) -> str:
        return output.join(self.folder, name)

    @property
    def manifest(self) -> str:
        return self.path(output.MANIFEST)

    @property
    def is_folder(self) -> bool:
        return self.names == FOLDER_FILES


def vocab_file_outputs(vocab_path: str) -> VocabFiles:
    """A WordPiece vocab file and the tokenizer files beside it, which go first: a run killed between them leaves no
    vocab.txt that lacks them."""
    folder, name = folder_and_name(vocab_path)
    return VocabFiles(folder, (*TOKENIZER_FILES, name), name)


def folder_outputs(folder: str) -> VocabFiles:
    """A tokenizer's folder, as a model's tokenizer is published."""
    return VocabFiles(folder, FOLDER_FILES, FOLDER_FILES[0])


def folder_and_name(vocab_path: str) -> tuple[str, str]:
    folder, name = FileSystems.split(vocab_path) if output.is_remote(vocab_path) else os.path.split(vocab_path)
    return folder or ".", name


def beside(vocab_path: str, name: str) -> str:
    return output.join(folder_and_name(vocab_path)[0], name)


def _manifest_job(path: str) -> str:
    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            manifest = json.loads(f.read())
    except (ValueError, *output.FILESYSTEM_ERRORS):
        return "unreadable"
    return str(manifest.get("job", "unknown")) if isinstance(manifest, dict) else "unknown"


def check_outputs(files: VocabFiles, overwrite: bool) -> None:
    """Refuse, before anything is read, a folder that holds another job's manifest, and existing outputs without
    --overwrite."""
    if output.exists(files.manifest):
        job = _manifest_job(files.manifest)
        if job != JOB:
            what = "the tokenizer" if files.is_folder else "the vocab"
            raise UserError(
                f"{files.manifest} belongs to another job ({job}); write {what} into a folder of its own, "
                "where its tokenizer files and manifest go beside it"
            )
    if overwrite:
        return
    main = files.path(files.main)
    if output.exists(main) and not files.is_folder:
        raise output.OutputExistsError(f"{main} already exists; choose another --output or pass --overwrite")
    for name in (*files.names, output.MANIFEST):
        if files.is_folder and output.exists(files.path(name)):
            raise output.OutputExistsError(
                f"{files.path(name)} already exists (a folder holds one tokenizer); choose another --output folder "
                "or pass --overwrite"
            )
        if name != files.main and output.exists(files.path(name)):
            raise output.OutputExistsError(
                f"{files.path(name)} already exists (the tokenizer files and manifest beside a vocab have fixed "
                "names, so each vocab needs a folder of its own); choose another --output folder or pass --overwrite"
            )


def tokenizer_files(data: bytes, lowercase: bool) -> dict[str, bytes]:
    """tokenizer.json and tokenizer_config.json for the vocab file's bytes."""
    vocab = Vocab.from_bytes(data)
    return {
        "tokenizer.json": standalone_tokenizer(vocab, lowercase).to_str(pretty=True).encode() + b"\n",
        "tokenizer_config.json": _json_bytes(tokenizer_config(lowercase)),
    }


def _json_bytes(payload: dict) -> bytes:
    return (json.dumps(payload, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def write_files(files: VocabFiles, contents: dict[str, bytes], record: dict) -> None:
    """Write each file of `contents` (files.names, in their order) and, last, the manifest: the record and, for
    each file, its size and sha256."""
    if output.exists(files.manifest):
        FileSystems.delete([files.manifest])
    for name in files.names:
        output.write_atomically(files.path(name), contents[name])
    manifest = {
        "tool": "bertcorpus",
        "version": output.TOOL_VERSION,
        "job": JOB,
        **record,
        "outputs": {
            name: {"bytes": len(contents[name]), "sha256": hashlib.sha256(contents[name]).hexdigest()}
            for name in files.names
        },
    }
    output.write_json_atomically(files.manifest, manifest)


def write_vocab_files(vocab_path: str, data: bytes, lowercase: bool, record: dict) -> None:
    """Write a WordPiece vocab, its tokenizer files and, last, the manifest (record plus the files)."""
    files = vocab_file_outputs(vocab_path)
    write_files(files, {**tokenizer_files(data, lowercase), files.main: data}, {**record, "vocab_file": files.main})


def recorded_unk_share(vocab_path: str, vocab_sha256: str) -> float | None:
    """The [UNK] share of wordpieces that `bertcorpus vocab` measured on its held-out sample for exactly this
    vocab file (its manifest beside it names the same sha256); None for a vocab made elsewhere, changed since, or
    not measured."""
    try:
        with FileSystems.open(beside(vocab_path, output.MANIFEST), compression_type="uncompressed") as f:
            manifest = json.loads(f.read())
        name = folder_and_name(vocab_path)[1]
        if manifest["job"] != JOB or manifest["outputs"][name]["sha256"] != vocab_sha256:
            return None
        share = manifest["held_out"]["unk_token_share"]
    except (ValueError, KeyError, TypeError, *output.FILESYSTEM_ERRORS):
        return None
    return float(share) if isinstance(share, (int, float)) else None
