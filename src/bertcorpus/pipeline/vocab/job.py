"""The Beam job behind `bertcorpus vocab --count-with-beam`: input files → word counts files and a manifest.

    file paths ─ (path, start, stop) per reader ─ DocumentCounter per bundle ─ ((role, word), n)
        ─ CombinePerKey(sum)
        ├─ training words ─ prune to --max-words ─ train-*.tsv
        ├─ held-out words ─ heldout-*.tsv
        └─ tallies, file fingerprints, pruned words' characters ─ manifest.json (written last)

It counts exactly what count_in_process counts (pipeline/vocab/counting.py), for corpora that one machine
cannot read in reasonable time; training then follows in the launching process, from the counts files.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import replace

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.engines.launcher_watch import WatchedDoFn
from bertcorpus.pipeline.inputs.formats import ReadStats, Rejected
from bertcorpus.pipeline.inputs.reads import PlanReads, merge_file_stats, read_documents
from bertcorpus.pipeline.sinks import output
from bertcorpus.pipeline.vocab.counting import HELD_OUT, TRAIN, CorpusCounts, DocumentCounter, VocabConfig, file_entry
from bertcorpus.wordpiece.word_counting import HeldOutWords, WordCounter, drop_long_words, prune_plan

COUNT_GLOBS = ["train-*.tsv", "heldout-*.tsv"]


class CountFileWords(WatchedDoFn):
    """(file path, start, stop) → ((role, word), count) per batch of text; tagged outputs carry the file's stats
    (its fingerprint from the whole-file or first-span reader) and tallies."""

    def __init__(self, cfg: VocabConfig):
        self.cfg = cfg

    def start_bundle(self):
        self.counter = DocumentCounter(self.cfg)

    def process(self, task: tuple[str, int, int]):
        path, start, stop = task
        stats = ReadStats(path)
        counts = self.counter.tallies
        for doc in read_documents(path, self.cfg.input_format, stats, start, stop):
            if isinstance(doc, Rejected):  # counted in stats.errors; vocab writes no dead letters
                continue
            for role, words in self.counter.add(doc):
                yield from _emit(role, words, counts, self.cfg.max_word_chars)
        yield beam.pvalue.TaggedOutput("files", file_entry(stats))
        yield tally.emit("vocab", dict(counts))
        counts.clear()

    def finish_bundle(self):
        counts = self.counter.tallies
        for role, words in self.counter.drain():
            for element in _emit(role, words, counts, self.cfg.max_word_chars):
                yield GlobalWindows.windowed_value(element)
        tallied = tally.emit("vocab", dict(counts))
        counts.clear()
        yield beam.pvalue.TaggedOutput(tallied.tag, GlobalWindows.windowed_value(tallied.value))


def _emit(role: str, words: Counter, counts: Counter, max_chars: int):
    """A drained batch as ((role, word), count) pairs; training words over the length limit are tallied instead."""
    counts[f"{role}_words"] += sum(words.values())
    if role == TRAIN:
        counts["too_long"] += drop_long_words(words, max_chars)
    for word, n in words.items():
        yield (role, word), n


class SumSymbols(beam.CombineFn):
    """(word, count) → the counts of its first and later characters, as symbol_counts gives them."""

    def create_accumulator(self):
        return Counter(), Counter()

    def add_input(self, acc, element):
        word, count = element
        acc[0][word[0]] += count
        for ch in word[1:]:
            acc[1][ch] += count
        return acc

    def merge_accumulators(self, accs):
        first, rest = Counter(), Counter()
        for f, r in accs:
            first.update(f)
            rest.update(r)
        return first, rest

    def extract_output(self, acc):
        return {"first": dict(acc[0]), "rest": dict(acc[1])}


class WriteCountsManifest(WatchedDoFn):
    """The last step: the manifest naming the counts files, written once they all exist."""

    def __init__(self, cfg: VocabConfig):
        self.cfg = cfg

    def process(self, tallies, train_files, held_out_files, pruning, pruned_symbols, files):
        threshold, words, occurrences = pruning
        manifest = {
            "tool": "bertcorpus",
            "version": output.TOOL_VERSION,
            "job": "vocab-counts",
            "config": self.cfg.describe(),
            "tallies": tallies,
            "pruned": {"threshold": threshold, "words": words, "occurrences": occurrences, "symbols": pruned_symbols},
            "inputs": merge_file_stats(files),
            "train_files": sorted(train_files),
            "heldout_files": sorted(held_out_files),
        }
        output.write_json_atomically(output.join(self.cfg.counts_dir, output.MANIFEST), manifest)
        yield manifest


class CountWords(beam.PTransform):
    """Input files → counts files and manifest in cfg.counts_dir."""

    def __init__(self, cfg: VocabConfig, input_files: list[str]):
        super().__init__()
        self.cfg = cfg
        self.input_files = input_files

    def expand(self, pbegin):
        cfg = self.cfg
        # input files → (file path, start, stop) per reader → ((role, word), n) per batch of text
        read = (
            pbegin
            | "plan reads" >> PlanReads(self.input_files, cfg.input_format)
            | "count words" >> beam.ParDo(CountFileWords(cfg)).with_outputs("files", tally.TALLY, main="words")
        )
        summed = read.words | "sum counts" >> beam.CombinePerKey(sum)
        train_counts = (
            summed
            | "training words" >> beam.Filter(lambda kv: kv[0][0] == TRAIN)
            | "drop role" >> beam.Map(lambda kv: (kv[0][1], kv[1]))
        )
        # The exact counts are pruned to the --max-words most frequent words, ties included or excluded
        # together, so the launcher never loads more than it may hold.
        pruning = (
            train_counts
            | "count values" >> beam.Map(lambda kv: kv[1])
            | "histogram" >> beam.combiners.Count.PerElement()
            | "histogram list" >> beam.combiners.ToList()
            | "plan pruning" >> beam.Map(prune_plan, cfg.max_words)
        )
        pruned_symbols = (
            train_counts
            | "pruned words" >> beam.Filter(lambda kv, plan: kv[1] <= plan[0], beam.pvalue.AsSingleton(pruning))
            | "their characters" >> beam.CombineGlobally(SumSymbols())
        )
        train_files = (
            train_counts
            | "prune" >> beam.Filter(lambda kv, plan: kv[1] > plan[0], beam.pvalue.AsSingleton(pruning))
            | "format" >> beam.MapTuple(count_line)
            | "write counts" >> beam.io.WriteToText(output.join(cfg.counts_dir, "train"), file_name_suffix=".tsv")
        )
        held_out_files = (
            summed
            | "held-out words" >> beam.Filter(lambda kv: kv[0][0] == HELD_OUT)
            | "format held-out" >> beam.MapTuple(lambda k, n: count_line(k[1], n))
            | "write held-out" >> beam.io.WriteToText(output.join(cfg.counts_dir, "heldout"), file_name_suffix=".tsv")
        )
        tallies = read[tally.TALLY] | "sum tallies" >> beam.CombineGlobally(tally.SumCounts())
        files = read.files | "list file stats" >> beam.combiners.ToList()
        return tallies | "write manifest" >> beam.ParDo(
            WriteCountsManifest(cfg),
            beam.pvalue.AsList(train_files),
            beam.pvalue.AsList(held_out_files),
            beam.pvalue.AsSingleton(pruning),
            beam.pvalue.AsSingleton(pruned_symbols),
            beam.pvalue.AsSingleton(files),
        )


def count_line(word: str, n: int) -> str:
    r"""A count as its line of a counts file: the word, a tab, the count. A word may hold line breaks (a held-out
    unit of a BPE's or Unigram's text, `one.\n\nTwo`), so backslashes and newlines are escaped; a tab needs no
    escape, as the count is read from the last one."""
    escaped = word.replace("\\", "\\\\").replace("\n", "\\n")
    return f"{escaped}\t{n}"


def read_count_line(line: bytes) -> tuple[str, int]:
    """The (word, count) of a counts file's line (count_line's inverse)."""
    word, _, count = line.rstrip(b"\n").decode("utf-8").rpartition("\t")
    return _ESCAPE.sub(lambda m: _ESCAPED[m.group(1)], word), int(count)


_ESCAPE = re.compile(r"\\(.)")
_ESCAPED = {"\\": "\\", "n": "\n"}


def _read_counts(path: str, sink, batch: int = 200_000) -> None:
    """word<TAB>count lines → sink.add_counts, a batch at a time."""
    words: Counter = Counter()
    with FileSystems.open(path, compression_type="uncompressed") as f:
        for line in f:
            word, count = read_count_line(line)
            words[word] += count
            if len(words) >= batch:
                sink.add_counts(words)
                words = Counter()
    sink.add_counts(words)


def count_with_beam(cfg: VocabConfig, input_files: list[str], options, input_bytes: int = 0) -> CorpusCounts | None:
    """Run the counting job (its progress line counting `input_bytes`), then load its counts; None for a dry run, a
    graph drawing or a job only submitted.

    Without --counts-dir the counts go to a temporary directory (local runners only), removed afterwards.
    """
    from bertcorpus.pipeline.engines import runners
    from bertcorpus.pipeline.errors import UserError

    if cfg.counts_dir is not None:
        return _run_count_job(cfg, input_files, options, input_bytes)
    if not runners.is_local(options) and not runners.is_dry_run(options):
        raise UserError(
            "--count-with-beam on a remote runner needs --counts-dir on a filesystem its workers can "
            "write, e.g. gs://BUCKET/vocab-counts"
        )
    temporary = tempfile.mkdtemp(prefix="bertcorpus-vocab-counts-")
    try:
        return _run_count_job(replace(cfg, counts_dir=temporary), input_files, options, input_bytes)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _run_count_job(cfg: VocabConfig, input_files: list[str], options, input_bytes: int) -> CorpusCounts | None:
    from bertcorpus.pipeline.engines import runners
    from bertcorpus.pipeline.engines.run_and_wait import run_pipeline
    from bertcorpus.pipeline.engines.run_progress import ProgressPlan

    pipeline = runners.make_pipeline(options)  # first: it checks a remote engine before the counts are cleared
    if not runners.is_dry_run(options):
        output.prepare_output_dir(cfg.counts_dir, overwrite=True)
        # Count files of an earlier run, and the files a killed run's text writers left in their temporary
        # directories (on a local disk, the directories too).
        stale = [
            m.path
            for pattern in COUNT_GLOBS + ["beam-temp-*/*"]
            for m in FileSystems.match([output.join(cfg.counts_dir, pattern)])[0].metadata_list
        ]
        if stale:
            FileSystems.delete(stale)
        if not output.is_remote(cfg.counts_dir):
            for leftover in glob.glob(os.path.join(cfg.counts_dir, "beam-temp-*")):
                shutil.rmtree(leftover, ignore_errors=True)
    _ = pipeline | "count words" >> CountWords(cfg, input_files)
    if runners.is_local(options) and runners.is_dry_run(options):
        # The local engine has no dry-run mode of its own: it would run the job.
        print("vocab word count: dry run — the job graph was built; nothing ran and nothing was written.")
        return None
    plan = ProgressPlan(input_bytes, ("vocab/documents_read", "documents"))
    if run_pipeline(pipeline, options, what="vocab word count", plan=plan) is None:
        return None
    manifest = output.read_manifest(cfg.counts_dir)
    tallies = Counter(manifest["tallies"])
    result = CorpusCounts(
        WordCounter(cfg.max_words, cfg.max_word_chars), HeldOutWords(cfg.max_words), files=manifest["inputs"]
    )
    for path in manifest["train_files"]:
        _read_counts(path, result.train)
    for path in manifest["heldout_files"]:
        _read_counts(path, result.held_out)
    # The files hold what survived pruning; the totals come from the job's tallies.
    result.train.words, result.train.too_long = tallies["train_words"], tallies["too_long"]
    result.train.pruned_words = manifest["pruned"]["words"]
    result.train.pruned_occurrences = manifest["pruned"]["occurrences"]
    symbols = manifest["pruned"]["symbols"]
    result.train.pruned_symbols = (Counter(symbols["first"]), Counter(symbols["rest"]))
    result.held_out.words = tallies["heldout_words"]
    result.tallies = tallies
    return result
