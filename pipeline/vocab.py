"""`bertcorpus vocab`: documents → word counts → a WordPiece vocab.txt (BERT or compact layout).

    input files ─ read documents ─ sample / hold out by id hash ─ count words ─┬─ HF WordPiece trainer ─ vocab.txt
                                                                               └─ held-out counts ─ quality

Counting runs in this process by default, streaming with bounded memory. With --count-with-beam it is a Beam
job instead (file → word counts per batch of text → CombinePerKey(sum) → counts files + manifest), for corpora
one machine cannot read in reasonable time; training then follows here, from the counts. Both paths read the
same documents, make the same sampling choices and give the same vocab unless the in-process counter had to
prune (the summary says so).
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows

from pipeline import output, tally
from pipeline.sources import FoundInputs, PlanReads, ReadStats, find_inputs, merge_file_stats, read_documents
from transforms.seeding import unit_interval
from wordpiece.training import (BERT_DEFAULT_RESERVED, LAYOUTS, ChunkBatch, HeldOutWords, TrainingConfig,
                                WordCounter, drop_long_words, measure, prune_plan, train)

ACCEPTS_BEAM_OPTIONS = True
TRAIN, HELD_OUT = "train", "heldout"
COUNT_GLOBS = ["train-*.tsv", "heldout-*.tsv"]
# Far beyond any BERT vocab. HF's trainer allocates ~66 bytes per line before it starts, so a size mistyped by a
# few digits would abort it (a Rust panic, not one line) after all the counting.
MAX_VOCAB_SIZE = 1 << 20
PIECE_CHARS = 1 << 20   # text handed to a chunk batch at a time (text_pieces)


@dataclass
class VocabConfig:
    inputs: list[str]
    output: str
    training: TrainingConfig
    input_format: str = "auto"
    sample_fraction: float = 1.0
    max_documents: int = 0          # 0 = no limit
    holdout_fraction: float = 0.01
    seed: int = 12345
    max_words: int = 1_000_000      # distinct words held while counting and trained on
    batch_chars: int = 1 << 25      # text per chunk batch before it becomes word counts
    count_with_beam: bool = False
    counts_dir: str | None = None

    def describe(self) -> dict:
        d = asdict(self)
        d.pop("batch_chars")
        return d


def document_role(doc_id: str, cfg: VocabConfig) -> str | None:
    """TRAIN, HELD_OUT or None (left out by --sample-fraction), from stable hashes of the id alone."""
    if cfg.sample_fraction < 1 and unit_interval(cfg.seed, "vocab-sample", doc_id) >= cfg.sample_fraction:
        return None
    return HELD_OUT if unit_interval(cfg.seed, "vocab-heldout", doc_id) < cfg.holdout_fraction else TRAIN


def document_text(doc) -> str:
    return doc.text if doc.text is not None else "\n".join(doc.sentences)


def text_pieces(text: str, size: int = PIECE_CHARS) -> Iterator[str]:
    """text in pieces of about size characters, each cut just before a space or a newline, so that a huge document
    (a JSONL line of 100 MB) is split into words a piece at a time, with the same words: cleaning, lower-casing
    and the split never look across a space or a newline."""
    start = 0
    while len(text) - start > size:
        cut = max(text.rfind(" ", start + 1, start + size), text.rfind("\n", start + 1, start + size))
        if cut < 0:  # one word longer than size: cut after it
            ahead = [i for i in (text.find(" ", start + size), text.find("\n", start + size)) if i >= 0]
            if not ahead:
                break
            cut = min(ahead)
        yield text[start:cut]
        start = cut
    yield text[start:]


@dataclass
class CorpusCounts:
    """What counting produced, whichever path ran."""
    train: WordCounter
    held_out: HeldOutWords
    documents: Counter = field(default_factory=Counter)   # read, train, heldout, unsampled, not_read
    files: list[dict] = field(default_factory=list)


# --------------------------------------------------------------------------------------- in-process counting

def count_in_process(files: list[tuple[str, int]], cfg: VocabConfig) -> CorpusCounts:
    """Stream every document once, in input order, with a progress bar of bytes read on stderr."""
    from tqdm import tqdm

    lowercase = cfg.training.lowercase
    result = CorpusCounts(WordCounter(cfg.max_words), HeldOutWords(cfg.max_words))
    sinks = {TRAIN: result.train, HELD_OUT: result.held_out}
    batches = {role: ChunkBatch(lowercase, cfg.batch_chars) for role in sinks}
    docs = result.documents
    with tqdm(total=sum(size for _, size in files), desc="counting words", unit="B", unit_scale=True,
              file=sys.stderr, dynamic_ncols=True, mininterval=1.0) as bar:
        for path, _ in files:
            if cfg.max_documents and docs[TRAIN] + docs[HELD_OUT] >= cfg.max_documents:
                docs["not_read_files"] += 1
                continue
            stats = ReadStats(path)
            shown = 0
            documents = read_documents(path, cfg.input_format, stats)
            for doc in documents:
                docs["read"] += 1
                role = document_role(doc.id, cfg)
                if role is None:
                    docs["unsampled"] += 1
                else:
                    docs[role] += 1
                    for piece in text_pieces(document_text(doc)):
                        if batches[role].add(piece):
                            sinks[role].add_counts(batches[role].drain())
                bar.update(stats.size - shown)
                shown = stats.size
                if cfg.max_documents and docs[TRAIN] + docs[HELD_OUT] >= cfg.max_documents:
                    break
            documents.close()  # finishes the file's fingerprint when reading stopped early
            bar.update(stats.size - shown)
            result.files.append(_file_entry(stats))
    for role, batch in batches.items():
        sinks[role].add_counts(batch.drain())
    return result


def _file_entry(stats: ReadStats) -> dict:
    return {"path": stats.path, "size": stats.size, "sha256": stats.sha256, "documents": stats.documents,
            "skipped": dict(stats.skipped), "replaced_chars": stats.replaced_chars}


# ------------------------------------------------------------------------------------------ Beam counting

class CountFileWords(beam.DoFn):
    """(file path, start, stop) → ((role, word), count) per batch of text; tagged outputs carry the file's stats
    (its fingerprint from the whole-file or first-span reader) and tallies.

    The text batches last the whole bundle: a worker counts many spans, and each drain sends every distinct word
    of its batch on, so draining at the end of each span would multiply that work and the words to combine."""

    def __init__(self, cfg: VocabConfig):
        self.cfg = cfg

    def start_bundle(self):
        self.batches = {role: ChunkBatch(self.cfg.training.lowercase, self.cfg.batch_chars)
                        for role in (TRAIN, HELD_OUT)}

    def process(self, task: tuple[str, int, int]):
        cfg = self.cfg
        path, start, stop = task
        stats = ReadStats(path)
        counts: Counter = Counter()
        for doc in read_documents(path, cfg.input_format, stats, start, stop):
            counts["documents_read"] += 1
            role = document_role(doc.id, cfg)
            if role is None:
                counts["documents_unsampled"] += 1
                continue
            counts[f"documents_{role}"] += 1
            for piece in text_pieces(document_text(doc)):
                if self.batches[role].add(piece):
                    yield from _emit(role, self.batches[role].drain(), counts)
        yield beam.pvalue.TaggedOutput("files", _file_entry(stats))
        yield tally.emit("vocab", dict(counts))

    def finish_bundle(self):
        counts: Counter = Counter()
        for role, batch in self.batches.items():
            for element in _emit(role, batch.drain(), counts):
                yield GlobalWindows.windowed_value(element)
        tallied = tally.emit("vocab", counts)
        yield beam.pvalue.TaggedOutput(tallied.tag, GlobalWindows.windowed_value(tallied.value))


def _emit(role: str, words: Counter, counts: Counter):
    """A drained batch as ((role, word), count) pairs; training words over the length limit are tallied instead."""
    counts[f"{role}_words"] += sum(words.values())
    if role == TRAIN:
        counts["too_long"] += drop_long_words(words)
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


class WriteCountsManifest(beam.DoFn):
    """The last step: the manifest naming the counts files, written once they all exist."""

    def __init__(self, cfg: VocabConfig):
        self.cfg = cfg

    def process(self, tallies, train_files, held_out_files, pruning, pruned_symbols, files):
        threshold, words, occurrences = pruning
        manifest = {
            "tool": "bertcorpus", "version": output.TOOL_VERSION, "job": "vocab-counts",
            "config": self.cfg.describe(), "tallies": tallies,
            "pruned": {"threshold": threshold, "words": words, "occurrences": occurrences,
                       "symbols": pruned_symbols},
            "inputs": merge_file_stats(files),
            "train_files": sorted(train_files), "heldout_files": sorted(held_out_files),
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
        read = (pbegin
                | "plan reads" >> PlanReads(self.input_files, cfg.input_format)
                | "count words" >> beam.ParDo(CountFileWords(cfg)).with_outputs("files", tally.TALLY,
                                                                                main="words"))
        summed = read.words | "sum counts" >> beam.CombinePerKey(sum)
        train_counts = (summed | "training words" >> beam.Filter(lambda kv: kv[0][0] == TRAIN)
                        | "drop role" >> beam.Map(lambda kv: (kv[0][1], kv[1])))
        # The exact counts are pruned to the --max-words most frequent words, ties included or excluded
        # together, so the launcher never loads more than it may hold.
        pruning = (train_counts
                   | "count values" >> beam.Map(lambda kv: kv[1])
                   | "histogram" >> beam.combiners.Count.PerElement()
                   | "histogram list" >> beam.combiners.ToList()
                   | "plan pruning" >> beam.Map(prune_plan, cfg.max_words))
        pruned_symbols = (train_counts
                          | "pruned words" >> beam.Filter(lambda kv, plan: kv[1] <= plan[0],
                                                          beam.pvalue.AsSingleton(pruning))
                          | "their characters" >> beam.CombineGlobally(SumSymbols()))
        train_files = (train_counts
                       | "prune" >> beam.Filter(lambda kv, plan: kv[1] > plan[0], beam.pvalue.AsSingleton(pruning))
                       | "format" >> beam.MapTuple(lambda w, n: f"{w}\t{n}")
                       | "write counts" >> beam.io.WriteToText(output.join(cfg.counts_dir, "train"),
                                                               file_name_suffix=".tsv"))
        held_out_files = (summed
                          | "held-out words" >> beam.Filter(lambda kv: kv[0][0] == HELD_OUT)
                          | "format held-out" >> beam.MapTuple(lambda k, n: f"{k[1]}\t{n}")
                          | "write held-out" >> beam.io.WriteToText(output.join(cfg.counts_dir, "heldout"),
                                                                    file_name_suffix=".tsv"))
        tallies = read[tally.TALLY] | "sum tallies" >> beam.CombineGlobally(tally.SumCounts())
        files = read.files | "list file stats" >> beam.combiners.ToList()
        return tallies | "write manifest" >> beam.ParDo(
            WriteCountsManifest(cfg), beam.pvalue.AsList(train_files), beam.pvalue.AsList(held_out_files),
            beam.pvalue.AsSingleton(pruning), beam.pvalue.AsSingleton(pruned_symbols),
            beam.pvalue.AsSingleton(files))


def _read_counts(path: str, sink, batch: int = 200_000) -> None:
    """word<TAB>count lines → sink.add_counts, a batch at a time."""
    words: Counter = Counter()
    with FileSystems.open(path, compression_type="uncompressed") as f:
        for line in f:
            word, _, count = line.rstrip(b"\n").decode("utf-8").rpartition("\t")
            words[word] += int(count)
            if len(words) >= batch:
                sink.add_counts(words)
                words = Counter()
    sink.add_counts(words)


def count_with_beam(cfg: VocabConfig, options) -> CorpusCounts | None:
    """Run the counting job, then load its counts; None for a dry run, a graph drawing or a job only submitted.

    Without --counts-dir the counts go to a temporary directory (local runners only), removed afterwards.
    """
    from pipeline import runners
    from pipeline.errors import UserError

    dry_run = runners.is_dry_run(options)
    found = find_inputs(cfg.inputs, allow_missing=dry_run)
    _print_note(found)
    # A dry run needs only the job's shape: remote patterns stay as given.
    input_files = [p for p, _ in found.files] or list(cfg.inputs)
    if not found.files and not dry_run:
        raise UserError("no input files given")
    if cfg.counts_dir is not None:
        return _run_count_job(cfg, input_files, options)
    if not runners.is_local(options) and not dry_run:
        raise UserError("--count-with-beam on a remote runner needs --counts-dir on a filesystem its workers can "
                        "write, e.g. gs://BUCKET/vocab-counts")
    temporary = tempfile.mkdtemp(prefix="bertcorpus-vocab-counts-")
    try:
        return _run_count_job(replace(cfg, counts_dir=temporary), input_files, options)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _run_count_job(cfg: VocabConfig, input_files: list[str], options) -> CorpusCounts | None:
    from pipeline import runners
    from pipeline.cli_util import run_pipeline

    if not runners.is_dry_run(options):
        output.prepare_output_dir(cfg.counts_dir, overwrite=True)
        # Count files of an earlier run, and the files a killed run's text writers left in their temporary
        # directories (on a local disk, the directories too).
        stale = [m.path for pattern in COUNT_GLOBS + ["beam-temp-*/*"]
                 for m in FileSystems.match([output.join(cfg.counts_dir, pattern)])[0].metadata_list]
        if stale:
            FileSystems.delete(stale)
        if not output.is_remote(cfg.counts_dir):
            for leftover in glob.glob(os.path.join(cfg.counts_dir, "beam-temp-*")):
                shutil.rmtree(leftover, ignore_errors=True)
    pipeline = runners.make_pipeline(options)
    _ = pipeline | "count words" >> CountWords(cfg, input_files)
    if runners.is_local(options) and runners.is_dry_run(options):
        # The local engine has no dry-run mode of its own: it would run the job.
        print("vocab word count: dry run — the job graph was built; nothing ran and nothing was written.")
        return None
    if run_pipeline(pipeline, options, what="vocab word count") is None:
        return None
    manifest = output.read_manifest(cfg.counts_dir)
    tallies = Counter(manifest["tallies"])
    result = CorpusCounts(WordCounter(cfg.max_words), HeldOutWords(cfg.max_words), files=manifest["inputs"])
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
    result.documents.update({"read": tallies["documents_read"], TRAIN: tallies["documents_train"],
                             HELD_OUT: tallies["documents_heldout"], "unsampled": tallies["documents_unsampled"]})
    return result


# ------------------------------------------------------------------------------------------- writing

def temporary_name(path: str) -> str:
    return f"{path}.tmp"


def write_atomically(path: str, data: bytes) -> None:
    """Write to a temporary name beside path, then rename: readers never see a partial vocab. The name is
    fixed, so a write killed before its rename leaves nothing that the next one does not replace."""
    tmp = temporary_name(path)
    try:
        output.write_bytes(tmp, [data])
        if output.is_remote(path):
            if output.exists(path):
                FileSystems.delete([path])
            FileSystems.rename([tmp], [path])
        else:
            os.replace(tmp, path)
    finally:
        if output.exists(tmp):
            FileSystems.delete([tmp])


# ------------------------------------------------------------------------------------------- command line

def add_arguments(parser) -> None:
    from pipeline.cli_util import BooleanFlag

    io = parser.add_argument_group("input and output")
    io.add_argument("--input", nargs="+", required=True, metavar="GLOB",
                    help="input files, globs or directories (local or any Beam filesystem, e.g. gs://); an "
                         "extraction's output directory stands for the documents its manifest lists")
    io.add_argument("--input-format", choices=["auto", "documents", "text", "jsonl"], default="auto",
                    help="documents = Parquet from extract-wiki/extract-books; text = reference format (one "
                         "sentence per line, blank line between documents); jsonl = {\"id\",\"text\"} per line "
                         "(.jsonl, .json; also .zst, .gz, .bz2); auto = by file name (default)")
    io.add_argument("--output", default="vocab.txt", help="the vocab file to write (default: vocab.txt)")
    io.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    vocab = parser.add_argument_group("vocabulary")
    vocab.add_argument("--vocab-size", type=int, default=30000,
                       help="lines in vocab.txt: special, reserved and learned tokens together (default: 30000)")
    case = vocab.add_mutually_exclusive_group()
    case.add_argument("--uncased", dest="lowercase", action="store_true", default=True,
                      help="lower-case and strip accents, like bert-base-uncased (default)")
    case.add_argument("--cased", dest="lowercase", action="store_false", help="keep case and accents")
    vocab.add_argument("--layout", choices=LAYOUTS, default="bert",
                       help="bert: [PAD]=0, [unused0..98]=1..99, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, "
                            "[unused99..] after them, then learned tokens (default); compact: the five special "
                            "tokens first, then any reserved slots, then learned tokens")
    vocab.add_argument("--reserved-tokens", type=int, default=None, metavar="N",
                       help=f"[unusedN] slots to keep free for later use (default: {BERT_DEFAULT_RESERVED} for "
                            "bert, as in the original vocab; 0 for compact)")
    vocab.add_argument("--min-frequency", type=int, default=2,
                       help="least count of a symbol pair for the trainer to merge it (default: 2)")
    vocab.add_argument("--limit-alphabet", type=int, default=1000,
                       help="keep the N most frequent characters; words with any other character are not "
                            "trained on (they become [UNK]) (default: 1000)")
    scale = parser.add_argument_group("sampling and scale")
    scale.add_argument("--sample-fraction", type=float, default=1.0,
                       help="train on this share of the documents, chosen by a stable hash of their ids")
    scale.add_argument("--max-documents", type=int, default=0,
                       help="stop after this many sampled documents, in input order (files sorted by path); "
                            "in-process counting only")
    scale.add_argument("--holdout-fraction", type=float, default=0.01,
                       help="share of the sampled documents held out of training to measure the vocab on "
                            "(default: 0.01; 0 skips the measurement)")
    scale.add_argument("--seed", type=int, default=12345, help="salt of the sampling and hold-out hashes")
    scale.add_argument("--max-words", type=int, default=1_000_000,
                       help="distinct words held while counting and trained on; past it the rarest are pruned. "
                            "Training needs ~1.6 KB per distinct word (default: 1M)")
    scale.add_argument("--count-with-beam", action=BooleanFlag, default=False,
                       help="count words with a Beam job (Beam options such as --runner apply), then train here")
    scale.add_argument("--counts-dir",
                       help="where the Beam job writes its counts (required for remote runners; by default a "
                            "temporary directory, removed afterwards)")


def config_from_args(args) -> VocabConfig:
    layout = args.layout
    reserved = args.reserved_tokens if args.reserved_tokens is not None else \
        (BERT_DEFAULT_RESERVED if layout == "bert" else 0)
    training = TrainingConfig(vocab_size=args.vocab_size, lowercase=args.lowercase, layout=layout,
                              reserved_tokens=reserved, min_frequency=args.min_frequency,
                              limit_alphabet=args.limit_alphabet)
    checks = [(args.vocab_size <= MAX_VOCAB_SIZE, f"--vocab-size must be at most {MAX_VOCAB_SIZE:,}"),
              # before training.check, which lists the reserved lines
              (reserved <= MAX_VOCAB_SIZE, f"--reserved-tokens must be at most {MAX_VOCAB_SIZE:,}"),
              (0 < args.sample_fraction <= 1, "--sample-fraction must be in (0, 1]"),
              (0 <= args.holdout_fraction < 1, "--holdout-fraction must be in [0, 1)"),
              (args.max_documents >= 0, "--max-documents must be >= 0"),
              (args.max_words >= 1000, "--max-words must be at least 1000"),
              (not (args.count_with_beam and args.max_documents),
               "--max-documents needs in-process counting (input order); use --sample-fraction with "
               "--count-with-beam")]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    training.check()
    return VocabConfig(inputs=list(args.input), output=args.output, training=training,
                       input_format=args.input_format, sample_fraction=args.sample_fraction,
                       max_documents=args.max_documents, holdout_fraction=args.holdout_fraction, seed=args.seed,
                       max_words=args.max_words, count_with_beam=args.count_with_beam, counts_dir=args.counts_dir)


def _print_note(found: FoundInputs) -> None:
    note = found.note()
    if note:
        print(f"note: {note}", file=sys.stderr)


def run(args, beam_args: list[str]) -> int:
    from pipeline import runners
    from pipeline.cli_util import print_summary
    from pipeline.errors import UserError

    started = time.time()
    cfg = config_from_args(args)
    if beam_args and not cfg.count_with_beam:
        raise UserError(f"Beam options ({' '.join(beam_args)}) apply only with --count-with-beam")
    options = runners.pipeline_options(beam_args)
    if not output.is_remote(cfg.output) and os.path.isdir(cfg.output):
        raise UserError(f"--output {cfg.output} is a directory; name the vocab file, e.g. {cfg.output}/vocab.txt")
    if output.exists(cfg.output) and not args.overwrite and not runners.is_dry_run(options):
        raise output.OutputExistsError(f"{cfg.output} already exists; choose another --output or pass --overwrite")
    if not runners.is_dry_run(options):
        output.check_writable(cfg.output, temporary_name(cfg.output))
    if cfg.count_with_beam:
        counts = count_with_beam(cfg, options)
        if counts is None:
            return 0
    else:
        found = find_inputs(cfg.inputs)
        _print_note(found)
        if not found.files:
            raise UserError("no input files given")
        counts = count_in_process(found.files, cfg)
    if not counts.train.counts:
        skipped = "".join(f"; {n:,} skipped as {reason}" for reason, n in sorted(_skipped(counts).items()))
        raise UserError(f"no words to train on: {counts.documents['read']:,} documents read from "
                        f"{', '.join(cfg.inputs)} ({counts.documents[TRAIN]:,} for training{skipped}); nothing was "
                        "written")
    print(f"training a {cfg.training.vocab_size:,}-token vocab from {len(counts.train.counts):,} distinct words",
          file=sys.stderr)
    trained = train(counts.train.counts, cfg.training, counts.train.pruned_symbols)
    if trained.padding:
        print(f"warning: the trainer learned only {trained.learned:,} tokens; the last {trained.padding:,} lines "
              "are [unusedN] padding (more text or a lower --min-frequency would fill them)", file=sys.stderr)
    quality = measure(trained.tokens, counts.held_out.counts)
    data = trained.file_bytes()
    write_atomically(cfg.output, data)
    print_summary("vocab", {}, _summary_rows(cfg, counts, trained, quality, data, time.time() - started))
    return 0


def _skipped(counts: CorpusCounts) -> Counter:
    """Records of the input files that were not documents, by reason."""
    skipped = Counter()
    for f in counts.files:
        skipped.update(f.get("skipped", {}))
    return skipped


def _summary_rows(cfg: VocabConfig, counts: CorpusCounts, trained, quality, data: bytes,
                  seconds: float) -> list[tuple[str, str]]:
    docs, words, alphabet = counts.documents, counts.train, trained.alphabet
    skipped = _skipped(counts)
    replaced = sum(f.get("replaced_chars", 0) for f in counts.files)
    rows = [("input", f"{len(counts.files):,} files, {sum(f['size'] for f in counts.files) / 1e6:,.1f} MB"),
            ("documents read", f"{docs['read']:,}"),
            ("  for training", f"{docs[TRAIN]:,}"),
            ("  held out", f"{docs[HELD_OUT]:,}")]
    if docs["unsampled"]:
        rows.append(("  not sampled", f"{docs['unsampled']:,}"))
    rows += [(f"  unreadable records ({reason})", f"{n:,}") for reason, n in sorted(skipped.items())]
    if cfg.max_documents and docs[TRAIN] + docs[HELD_OUT] >= cfg.max_documents:
        rows.append(("stopped", f"at --max-documents {cfg.max_documents:,}; {docs['not_read_files']:,} files "
                                "not opened"))
    if replaced:
        rows.append(("invalid UTF-8", f"{replaced:,} characters replaced by U+FFFD"))
    rows.append(("corpus words", f"{words.words:,} ({trained.trained_words:,} distinct trained on)"))
    dropped = []
    if words.too_long:
        dropped.append(f"{words.too_long:,} over 200 characters")
    if alphabet.dropped_occurrences:
        dropped.append(f"{alphabet.dropped_occurrences:,} of {alphabet.dropped_words:,} words with one of "
                       f"{alphabet.dropped_chars:,} characters beyond --limit-alphabet")
    if words.pruned_occurrences:
        dropped.append(f"{words.pruned_occurrences:,} of {words.pruned_words:,} rare words (--max-words)")
    if dropped:
        rows.append(("words not trained on", "; ".join(dropped)))
    if trained.scale > 1:
        rows.append(("trainer counts", f"divided by {trained.scale} (corpus beyond the trainer's word budget)"))
    rows.append(("alphabet", f"{len(alphabet.chars):,} characters + {len(alphabet.continuations):,} ##continuations"))
    head = len(trained.tokens) - trained.learned - trained.padding
    padding = f" + {trained.padding:,} [unusedN] padding" if trained.padding else ""
    rows.append(("vocab", f"{len(trained.tokens):,} lines ({cfg.training.layout} layout: {head:,} special/reserved"
                          f" + {trained.learned:,} learned{padding})"))
    if quality.words:
        sampled = " (rates from a hash sample of its distinct words)" if counts.held_out.sampled else ""
        rows += [("held-out words", f"{counts.held_out.words:,}{sampled}"),
                 ("[UNK] rate", f"{quality.unk_rate:.4%}"),
                 ("wordpieces per word", f"{quality.pieces_per_word:.4f}")]
    rows += [("output", f"{cfg.output} (sha256 {hashlib.sha256(data).hexdigest()[:16]}…)"),
             ("time", f"{seconds:.1f} s")]
    return rows
