"""The files `bertcorpus vocab` writes into the vocab's folder, and the record that `create` reads back.

    vocab.txt (or the name --output gives)   the vocab: one token per line, line number = id
    tokenizer.json                            the whole tokenisation in the tokenizers library's own format
    tokenizer_config.json                     what transformers' AutoTokenizer needs beside tokenizer.json
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

from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.sinks import output
from bertcorpus.wordpiece.tokenizer import standalone_tokenizer, tokenizer_config
from bertcorpus.wordpiece.vocab import Vocab

JOB = "vocab"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def folder_and_name(vocab_path: str) -> tuple[str, str]:
    folder, name = FileSystems.split(vocab_path) if output.is_remote(vocab_path) else os.path.split(vocab_path)
    return folder or ".", name


def beside(vocab_path: str, name: str) -> str:
    return output.join(folder_and_name(vocab_path)[0], name)


def written_paths(vocab_path: str) -> list[str]:
    """Every path a run writes, the manifest last."""
    return [vocab_path, *(beside(vocab_path, n) for n in TOKENIZER_FILES), beside(vocab_path, output.MANIFEST)]


def _manifest_job(path: str) -> str:
    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            manifest = json.loads(f.read())
    except (ValueError, *output.FILESYSTEM_ERRORS):
        return "unreadable"
    return str(manifest.get("job", "unknown")) if isinstance(manifest, dict) else "unknown"


def check_outputs(vocab_path: str, overwrite: bool) -> None:
    """Refuse, before anything is read, a folder that holds another job's manifest, and existing outputs without
    --overwrite."""
    manifest = beside(vocab_path, output.MANIFEST)
    if output.exists(manifest):
        job = _manifest_job(manifest)
        if job != JOB:
            raise UserError(
                f"{manifest} belongs to another job ({job}); write the vocab into a folder of its own, "
                "where its tokenizer files and manifest go beside it"
            )
    if overwrite:
        return
    if output.exists(vocab_path):
        raise output.OutputExistsError(f"{vocab_path} already exists; choose another --output or pass --overwrite")
    for path in written_paths(vocab_path)[1:]:
        if output.exists(path):
            raise output.OutputExistsError(
                f"{path} already exists (the tokenizer files and manifest beside a vocab have fixed names, so each "
                "vocab needs a folder of its own); choose another --output folder or pass --overwrite"
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


def write_vocab_files(vocab_path: str, data: bytes, lowercase: bool, record: dict) -> None:
    """Write the vocab, its tokenizer files and, last, the manifest (record plus the files)."""
    manifest_path = beside(vocab_path, output.MANIFEST)
    if output.exists(manifest_path):
        FileSystems.delete([manifest_path])
    name = folder_and_name(vocab_path)[1]
    # The vocab after its tokenizer files: a run killed between them leaves no vocab.txt that lacks them.
    files = {**tokenizer_files(data, lowercase), name: data}
    for file_name, content in files.items():
        output.write_atomically(vocab_path if file_name == name else beside(vocab_path, file_name), content)
    manifest = {
        "tool": "bertcorpus",
        "version": output.TOOL_VERSION,
        "job": JOB,
        **record,
        "outputs": {
            file_name: {"bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}
            for file_name, content in files.items()
        },
        "vocab_file": name,
    }
    output.write_json_atomically(manifest_path, manifest)


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
