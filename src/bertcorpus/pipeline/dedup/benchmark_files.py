"""Benchmark files read from any Beam filesystem, compressed or not, named, and indexed by their n-grams.

A benchmark is named by its folder and its file's stem (glue_data/CoLA/dev.tsv is CoLA/dev, squad/dev-v2.0.json is
squad/dev-v2.0), so that the names of the GLUE tasks' dev.tsv files stay apart; its contaminated examples go to
OUT/contaminated-NAME.jsonl, with "/" as "-".
"""

from __future__ import annotations

import os

from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.sinks.output import FILESYSTEM_ERRORS, filesystem_error_cause
from bertcorpus.transforms.benchmark_texts import Benchmark, parse_benchmark
from bertcorpus.transforms.compression import COMPRESSED_SUFFIXES, decompressed_by_suffix, is_cut
from bertcorpus.transforms.decontamination import NgramIndex, build_index


def _stem(path: str) -> str:
    name = os.path.basename(path.rstrip("/"))
    for suffix in COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def benchmark_names(paths: list[str]) -> list[str]:
    """Each file's name: its folder and its stem; two files of one name are refused."""
    names = []
    for path in paths:
        folder = os.path.basename(os.path.dirname(path.rstrip("/")))
        name = f"{folder}/{os.path.splitext(_stem(path))[0]}" if folder else os.path.splitext(_stem(path))[0]
        if name in names:
            raise UserError(f"two --decontaminate files are both named {name}: {paths[names.index(name)]} and {path}")
        names.append(name)
    return names


def report_file(name: str) -> str:
    return f"contaminated-{name.replace('/', '-')}.jsonl"


def read_benchmark(path: str, name: str, text_fields: list[str]) -> Benchmark:
    """A benchmark file's texts (transforms/benchmark_texts.py); a file that cannot be read or parsed is a UserError."""
    try:
        with FileSystems.open(path, compression_type="uncompressed") as raw:
            stream = decompressed_by_suffix(raw, path)
            data = stream.read()
    except FILESYSTEM_ERRORS as e:
        raise UserError(f"cannot read benchmark {path}: {filesystem_error_cause(e)}") from None
    if is_cut(stream):
        raise UserError(f"benchmark {path}: cut short or damaged, or not compressed as its name says")
    return parse_benchmark(name, _stem(path), data, text_fields or None)


def load_index(paths: list[str], names: list[str], text_fields: list[str], ngram: int, min_ngram: int) -> NgramIndex:
    """The n-gram index of the benchmark files (on a worker: the files are read where the job runs)."""
    return build_index([read_benchmark(p, n, text_fields) for p, n in zip(paths, names)], ngram, min_ngram)
