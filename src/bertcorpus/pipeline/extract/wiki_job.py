"""The `extract-wiki` job: Wikipedia pages-articles dumps → article prose as documents Parquet (its command line is
wiki_command.py).

    without --index:  dump paths ─ match ─ drop duplicates ─ read pages (one reader per file) ──┐
    with --index:     (dump, index) ─ plan byte ranges ─ Reshuffle ─ read pages (one per range) ─┤
        (Dump, Page) ─ clean text ─ documents ─ WriteDocuments ───────────────────────────────────┐
        damage, bad pages, index offsets past the dump ─ errors ─ WriteErrors ────────────────────┼─ publish
        counts, input fingerprints and the pages their damage lost ───────────────────────────────┘

Only articles become documents: namespace 0, not redirects, not disambiguation pages, with at least --min-chars of
clean text (counted in characters of English: transforms/text_length.py). Every page read is kept, skipped for a
counted reason, or recorded as an error. Damage costs only what is damaged: a malformed page is one error and
reading resumes at the next <page>, a corrupt bz2 block (or stream of a multistream dump) is one error and reading
resumes at the next block (stream), and a truncated file keeps every complete page before the cut. The pages a
damaged stretch took are counted where the index lists them, else estimated, and go into the input's description
and the --max-error-rate check. The multistream index only cuts the dump into ranges (streams it leaves out are read
all the same); it is read by a worker, never by the launcher.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, field

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystems import CompressionTypes, FileSystems

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.engines.launcher_watch import WatchedDoFn
from bertcorpus.pipeline.extract.wiki_losses import count_loss, pages_lost_entry, with_pages_lost
from bertcorpus.pipeline.inputs.formats import InputError, ReadStats
from bertcorpus.pipeline.inputs.reads import auto_range_bytes
from bertcorpus.pipeline.inputs.streams import HashingReader, ReadProgress, hashed_to_the_end
from bertcorpus.pipeline.sinks import documents
from bertcorpus.pipeline.sinks.up_to_date import head_tail_sha256
from bertcorpus.transforms.compression import MIB, open_decompressed
from bertcorpus.transforms.languages import UNDETERMINED, primary_language, wiki_language
from bertcorpus.transforms.seeding import python_rng
from bertcorpus.transforms.text_length import long_enough
from bertcorpus.transforms.wiki_multistream import iter_range_pages, plan_byte_ranges, read_stream_pages
from bertcorpus.transforms.wiki_page_items import Page, TextTooLarge
from bertcorpus.transforms.wiki_pages import MAX_PAGE_SIZE, SiteInfo, iter_pages, read_siteinfo
from bertcorpus.transforms.wikitext import clean_wikitext, is_disambiguation
from bertcorpus.transforms.zh_variants import resolve_converter_markup, sweep_residue, variants_asked

JOB = "extract-wiki"
SKIP_REASONS = ("non_article_namespace", "redirect", "deleted_text", "disambiguation", "too_short")
PROGRESS_EVERY = 1000  # pages between count updates from a reader, so Beam's counters move during a long file
# A dump's own name starts with its wiki's database name: enwiki-20240601-..., viwiktionary-latest-...
_WIKI_IN_FILE_NAME = re.compile(r"([a-z][a-z_]*wik[a-z]*)[-_.]")


@dataclass
class WikiConfig:
    inputs: list[str]  # local files as matched, remote paths or patterns as given
    output: str
    index: list[str] = field(default_factory=list)  # one multistream index per input, in the same order
    num_shards: int = 1
    min_chars: int = 100
    source: str = "wikipedia"
    range_mb: float = 0.0  # 0: auto_range_bytes
    zh_variant: str = "zh-hans"  # what a Chinese dump's pages are converted to (transforms/zh_variants.py CHOICES)
    strict: bool = False
    max_error_rate: float = 0.01
    # The files the run reads, as listed at launch and named as its manifest names them, (path, size): the dumps and
    # their indexes. Not a setting: describe leaves it out.
    input_files: list[tuple[str, int]] = field(default_factory=list)
    inputs_skipped: dict = field(default_factory=dict)  # paths the inputs named but no reader was given, by reason

    def describe(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k not in ("input_files", "inputs_skipped")}


@dataclass(frozen=True)
class Dump:
    """An input file and what its header says: the wiki's name for document ids, its site for page URLs, its
    language for every document."""

    path: str
    wiki: str
    site: SiteInfo | None
    language: str = UNDETERMINED

    def document(self, page: Page, text: str, source: str, article: Article | None = None) -> dict:
        """The document of an article; a Chinese page's `article` gives its converted title, script and id."""
        return {
            "id": f"{self.wiki}:{page.page_id}" + (article.id_suffix if article else ""),
            "source": source,
            "title": article.title if article else page.title,
            "text": text,
            "url": self.site.page_url(page.title) if self.site else None,
            "language": article.language if article else self.language,
            "language_confidence": None,  # from the dump's header: given, not detected
        }

    @property
    def is_chinese(self) -> bool:
        return primary_language(self.language) == "zh"


@dataclass(frozen=True)
class Article:
    """A page's clean text and title, in one script for a Chinese dump (then with what its converter markup held)."""

    text: str
    title: str
    language: str
    id_suffix: str = ""  # @zh-Hans, @zh-Hant where a Chinese page is written once per script
    markup: dict = field(default_factory=dict)


def select_article(page: Page, min_chars: int) -> tuple[str | None, str | None]:
    """(clean text, None) for a page that becomes a document, else (None, the reason it is skipped). Raises
    TextTooLarge where the clean text would pass the page cap."""
    reason = _skip_reason(page)
    if reason is not None:
        return None, reason
    text = clean_wikitext(page.text, title=page.title, max_chars=MAX_PAGE_SIZE)
    if not long_enough(text, min_chars):
        return None, "too_short"
    return text, None


def _skip_reason(page: Page) -> str | None:
    if page.ns != 0:
        return "non_article_namespace"
    if page.redirect:
        return "redirect"
    if page.text is None:
        return "deleted_text"
    if is_disambiguation(page.text, page.title):
        return "disambiguation"
    return None


def chinese_articles(page: Page, min_chars: int, zh_variant: str) -> tuple[list[Article], str | None]:
    """A zhwiki page's articles, one per script asked for (`both`: zh-hans and zh-hant), each with its converter
    markup resolved and its text and title converted; or ([], the reason the page is skipped). Raises TextTooLarge
    where its rules would make the text or the title pass the page cap."""
    reason = _skip_reason(page)
    if reason is not None:
        return [], reason
    articles = []
    for variant, language, suffix in variants_asked(zh_variant):
        resolved = resolve_converter_markup(page.text, variant)
        clean = clean_wikitext(resolved.wikitext, title=page.title, max_chars=MAX_PAGE_SIZE)
        text = sweep_residue(resolved.rules.convert(clean, MAX_PAGE_SIZE), resolved.counts)
        if not long_enough(text, min_chars):
            return [], "too_short"
        title = resolved.rules.convert_title(page.title, MAX_PAGE_SIZE)
        articles.append(Article(text, title, language, suffix, resolved.counts.as_dict()))
    return articles, None


def wiki_name(site: SiteInfo | None, path: str) -> str:
    """The dbname from the dump's header, else the one its file name starts with, else 'wiki'."""
    if site is not None and site.dbname:
        return site.dbname
    found = _WIKI_IN_FILE_NAME.match(os.path.basename(path))
    return found.group(1) if found else "wiki"


def _open(path: str):
    try:
        return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    except Exception as e:  # each filesystem raises its own types
        raise InputError(f"cannot open {path}: {e}") from None


def read_dump_header(path: str) -> Dump:
    with _open(path) as raw:
        site = read_siteinfo(open_decompressed(raw))
    wiki = wiki_name(site, path)
    return Dump(path, wiki, site, wiki_language(site.lang if site else None, wiki))


def _head_tail_fingerprint(f, size: int) -> dict:
    """A file too big to hash cheaply is fingerprinted by its size and a sha256 of its first and last MiB."""
    if size <= 2 * MIB:
        f.seek(0)
        return {"sha256": hashlib.sha256(f.read()).hexdigest()}
    return {"sha256_first_and_last_mib": head_tail_sha256(f, size)}


def _route(dump: Dump, items, losses: Counter):
    """Pages and PageErrors → (Dump, Page) main outputs, error records, and read/error counts now and then; the pages
    lost with damaged stretches are added to `losses`."""
    counts = Counter()
    for item in items:
        counts["read"] += 1
        if isinstance(item, Page):
            yield dump, item
        else:
            counts[f"errors:{item.reason}"] += 1
            count_loss(losses, item)
            yield beam.pvalue.TaggedOutput(
                "errors", {"input": dump.path, "where": item.where, "reason": item.reason, "detail": item.detail}
            )
        if counts["read"] == PROGRESS_EVERY:
            yield tally.emit(documents.METRICS, counts)
            counts = Counter()
    if counts:
        yield tally.emit(documents.METRICS, counts)


class ReadDumpFiles(WatchedDoFn):
    """dump path → (Dump, Page) per page, bad pages and damage to 'errors'; the file's size and sha256, and the
    pages lost with damaged stretches, go to 'inputs'.

    The sha256 is computed from the bytes as the parser reads them, so the file is read once."""

    def process(self, path: str):
        dump = read_dump_header(path)
        stats = ReadStats(path)
        losses = Counter()
        with _open(path) as opened, ReadProgress(opened) as raw:
            hashed = HashingReader(raw, stats)
            yield from _route(dump, iter_pages(open_decompressed(hashed)), losses)
            hashed_to_the_end(hashed)
        yield beam.pvalue.TaggedOutput(
            "inputs",
            {
                "path": path,
                "size": stats.size,
                "sha256": stats.sha256,
                "wiki": dump.wiki,
                "language": dump.language,
                **pages_lost_entry(losses),
            },
        )


class PlanByteRanges(WatchedDoFn):
    """(dump path, index path) → (Dump, start, end, {stream offset: pages the index lists there}) per byte range of
    whole bz2 streams; the dump's size and fingerprint and the index's sha256 go to 'inputs', and index offsets
    beyond the end of the dump to 'errors', with the pages they list to 'losses'. A dump is too big to hash in one
    place, and no worker reads all of it, so it is fingerprinted by its first and last MiB.

    The ranges come out in an order shuffled by a generator seeded from the file name: a local runner deals them
    to its workers in turn, and neighbouring ranges of a dump tend to cost alike, so in file order one worker could
    draw all the dear ones."""

    def __init__(self, range_bytes: int):
        self.range_bytes = range_bytes  # 0: auto_range_bytes

    def process(self, element):
        path, index = element
        stats = ReadStats(index)
        with _open(index) as opened, ReadProgress(opened) as raw:
            hashed = HashingReader(raw, stats)
            try:
                listed = read_stream_pages(hashed)
            except ValueError as e:  # a wrong index would lose or duplicate pages: stop, naming the line
                raise InputError(f"{index} is not a multistream index: {e}") from None
            hashed_to_the_end(hashed)
        if not listed:
            raise InputError(f"{index} lists no pages")
        with _open(path) as f:
            size = f.seek(0, os.SEEK_END)
            fingerprint = _head_tail_fingerprint(f, size)
        starts = list(listed)  # in file order, as the index lists them
        ranges = plan_byte_ranges(starts, size, self.range_bytes or auto_range_bytes(size))
        beyond = starts[bisect.bisect_left(starts, size) :]
        if beyond:  # the pages of those streams are missing: the dump is cut, or the index is another dump's
            lost = sum(listed[offset] for offset in beyond)
            yield beam.pvalue.TaggedOutput(
                "errors",
                {
                    "input": path,
                    "where": f"byte {size}",
                    "reason": "truncated",
                    "detail": f"{index} lists {len(beyond)} bz2 streams at byte {beyond[0]} or later, beyond the "
                    f"end of the file: the dump is cut, or the index is not its own; {lost:,} pages lost",
                },
            )
            yield beam.pvalue.TaggedOutput("losses", (path, {"counted": lost}))
            yield tally.emit(documents.METRICS, {"read": 1, "errors:truncated": 1})
        dump = read_dump_header(path)
        for start, end in python_rng(0, "range order", os.path.basename(path)).sample(ranges, len(ranges)):
            # the index's streams in the range, found by bisection: a full index has some 200,000 of them
            yield (
                dump,
                start,
                end,
                {o: listed[o] for o in starts[bisect.bisect_left(starts, start) : bisect.bisect_left(starts, end)]},
            )
        yield beam.pvalue.TaggedOutput(
            "inputs",
            {
                "path": path,
                "size": size,
                **fingerprint,
                "byte_ranges": len(ranges),
                "index": {"path": index, "size": stats.size, "sha256": stats.sha256},
                "wiki": dump.wiki,
                "language": dump.language,
            },
        )


class ReadByteRanges(WatchedDoFn):
    """(Dump, start, end, listed) → (Dump, Page) for every page of the bz2 streams that start in the range; bad pages
    and damage to 'errors', and (dump path, the pages its damage lost) to 'losses'."""

    def process(self, element):
        dump, start, end, listed = element
        losses = Counter()
        with _open(dump.path) as opened, ReadProgress(opened, start, end) as f:
            yield from _route(dump, iter_range_pages(f, start, end, listed), losses)
        if losses:
            yield beam.pvalue.TaggedOutput("losses", (dump.path, dict(losses)))


class CleanText(WatchedDoFn):
    """(Dump, Page) → a document dict for an article (two for a Chinese page written in both scripts); every other
    page counted by the reason it is skipped, and what Chinese converter markup held counted too. A page whose text
    would pass the page cap once cleaned or converted is one error (`page_too_large`) to 'errors'."""

    def __init__(self, source: str, min_chars: int, zh_variant: str = "zh-hans"):
        self.source, self.min_chars, self.zh_variant = source, min_chars, zh_variant

    def process(self, element):
        dump, page = element
        try:
            articles, reason = self._articles(dump, page)
        except TextTooLarge as e:
            yield beam.pvalue.TaggedOutput(
                "errors",
                {
                    "input": dump.path,
                    "where": f"page {page.page_id}",
                    "reason": "page_too_large",
                    "detail": f"page {page.title[:200]!r}: {e}",
                },
            )
            yield tally.emit(documents.METRICS, {"errors:page_too_large": 1})
            return
        if reason is not None:
            yield tally.emit(documents.METRICS, {f"skipped:{reason}": 1})
            return
        markup = Counter()
        for article in articles:
            markup.update(article.markup)
            yield dump.document(page, article.text, self.source, article)
        if markup:
            yield tally.emit(documents.METRICS, {f"converter_markup:{k}": v for k, v in markup.items()})
        # Both scripts of a page are two documents of one page read: the second is counted as read too.
        if len(articles) > 1:
            yield tally.emit(documents.METRICS, {"read": len(articles) - 1})

    def _articles(self, dump: Dump, page: Page) -> tuple[list[Article], str | None]:
        if dump.is_chinese:
            return chinese_articles(page, self.min_chars, self.zh_variant)
        text, reason = select_article(page, self.min_chars)
        return ([Article(text, page.title, dump.language)] if reason is None else []), reason


class ExtractWikipedia(beam.PTransform):
    """The whole job on a pipeline; returns the PCollection holding the manifest."""

    def __init__(self, config: WikiConfig):
        super().__init__()
        self.config = config

    def expand(self, pbegin):
        cfg = self.config
        if cfg.index:
            # (dump path, index path) → (Dump, start, end) ranges, spread so that many workers read one dump
            planned = (
                pbegin
                | "list dumps and indexes" >> beam.Create(list(zip(cfg.inputs, cfg.index)))
                | "plan byte ranges"
                >> beam.ParDo(PlanByteRanges(int(cfg.range_mb * MIB))).with_outputs(
                    "inputs", "errors", "losses", tally.TALLY, main="ranges"
                )
            )
            read = (
                planned.ranges
                | "spread ranges" >> beam.Reshuffle()
                | "read pages"
                >> beam.ParDo(ReadByteRanges()).with_outputs("errors", "losses", tally.TALLY, main="pages")
            )
            # no worker reads all of a dump: the pages its ranges lost join its description
            losses = (planned.losses, read.losses) | "merge losses" >> beam.Flatten()
            inputs = (
                {"input": planned.inputs | "key inputs by path" >> beam.Map(lambda i: (i["path"], i)), "lost": losses}
                | "join losses to inputs" >> beam.CoGroupByKey()
                | "inputs with their losses" >> beam.FlatMap(with_pages_lost)
            )
            rejected = (planned.errors, read.errors) | "merge errors" >> beam.Flatten()
            read_counts = (planned[tally.TALLY], read[tally.TALLY]) | "merge read counts" >> beam.Flatten()
        else:
            # paths and patterns → distinct file paths; Distinct groups by path, which also spreads the files
            paths = (
                pbegin
                | "list inputs" >> beam.Create(cfg.inputs)
                | "match inputs" >> fileio.MatchAll()
                | "file paths" >> beam.Map(lambda metadata: metadata.path)
                | "drop duplicate files" >> beam.Distinct()
            )
            read = paths | "read pages" >> beam.ParDo(ReadDumpFiles()).with_outputs(
                "inputs", "errors", tally.TALLY, main="pages"
            )
            inputs, rejected, read_counts = read.inputs, read.errors, read[tally.TALLY]
        # (Dump, Page) → {id, source, title, text, url} for the articles kept
        cleaned = read.pages | "clean text" >> beam.ParDo(
            CleanText(cfg.source, cfg.min_chars, cfg.zh_variant)
        ).with_outputs("errors", tally.TALLY, main="documents")
        written = cleaned.documents | "write documents" >> documents.WriteDocuments(cfg.output, cfg.num_shards)
        errors = (
            (rejected, cleaned.errors)
            | "merge read and cleaning errors" >> beam.Flatten()
            | "write errors" >> documents.WriteErrors(cfg.output)
        )
        # Every skip reason appears in the manifest, also with a count of 0.
        zeros = pbegin | "list skip reasons" >> beam.Create([{f"skipped:{r}": 0 for r in SKIP_REASONS}])
        counts = (zeros, read_counts, cleaned[tally.TALLY], written[tally.TALLY]) | "merge counts" >> beam.Flatten()
        return {
            "documents": written["files"],
            "errors": errors["files"],
            "counts": counts,
            "inputs": inputs,
        } | "publish" >> documents.PublishDocuments(cfg.output, JOB, cfg.describe(), cfg.inputs_skipped)
