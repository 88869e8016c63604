"""extract-wiki's transforms one at a time, each in a TestPipeline with assert_that, on the real Wikipedia samples:
reading whole dumps, planning and reading byte ranges of a multistream dump, and turning pages into documents.
The whole command is tested in test_extract_wiki.py."""

from __future__ import annotations

import bz2
import hashlib
import re
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.extract.wiki_job import CleanText, Dump, PlanByteRanges, ReadByteRanges, ReadDumpFiles
from bertcorpus.transforms.compression import open_decompressed
from bertcorpus.transforms.wiki_page_items import Page
from bertcorpus.transforms.wiki_pages import iter_pages, read_siteinfo

from wiki_fixtures import ENWIKI_2014, ENWIKI_SMALL, GOLDEN, build_multistream, read_xml, split_dump

PAGE_ID = re.compile(rb"<id>(\d+)</id>")


def local_pipeline() -> test_pipeline.TestPipeline:
    return test_pipeline.TestPipeline(runner="DirectRunner")


def summed(counts):
    return counts | beam.CombineGlobally(tally.SumCounts()) | beam.Map(lambda c: {k: v for k, v in c.items() if v})


def page_ids_in_xml(path: Path) -> list[int]:
    """The id of every <page> of a sample, read from its XML with a regex, not with the parser under test."""
    _, pages, _ = split_dump(read_xml(path))
    return [int(PAGE_ID.search(page).group(1)) for page in pages]


def ids_of(pages):
    return pages | beam.Map(lambda dump_and_page: dump_and_page[1].page_id)


def test_read_dump_files_gives_every_page_and_fingerprints_the_file():
    data = ENWIKI_SMALL.read_bytes()
    with local_pipeline() as p:
        read = (
            p
            | beam.Create([str(ENWIKI_SMALL)])
            | beam.ParDo(ReadDumpFiles()).with_outputs("errors", "inputs", tally.TALLY, main="pages")
        )
        assert_that(ids_of(read.pages), equal_to(page_ids_in_xml(ENWIKI_SMALL)), label="pages")
        assert_that(read.pages | beam.Map(lambda d: d[0].wiki), equal_to(["enwiki"] * 3), label="wiki")
        assert_that(
            read.inputs,
            equal_to(
                [
                    {
                        "path": str(ENWIKI_SMALL),
                        "size": len(data),
                        "sha256": hashlib.sha256(data).hexdigest(),
                        "wiki": "enwiki",
                        "language": "en",
                    }
                ]
            ),
            label="inputs",
        )
        assert_that(read.errors, equal_to([]), label="errors")
        assert_that(summed(read[tally.TALLY]), equal_to([{"read": 3}]), label="counts")


def test_read_dump_files_sends_a_truncated_end_to_the_dead_letter():
    with local_pipeline() as p:
        read = (
            p
            | beam.Create([str(ENWIKI_2014)])
            | beam.ParDo(ReadDumpFiles()).with_outputs("errors", "inputs", tally.TALLY, main="pages")
        )
        assert_that(ids_of(read.pages), equal_to(page_ids_in_xml(ENWIKI_2014)), label="pages")
        assert_that(
            read.errors | beam.Map(lambda e: (e["input"], e["reason"])),
            equal_to([(str(ENWIKI_2014), "truncated")]),
            label="errors",
        )
        assert_that(summed(read[tally.TALLY]), equal_to([{"read": 362, "errors:truncated": 1}]), label="counts")


@pytest.fixture(scope="module")
def multistream(tmp_path_factory) -> tuple[Path, Path]:
    return build_multistream(ENWIKI_2014, tmp_path_factory.mktemp("multistream"), pages_per_stream=100)


def test_byte_ranges_read_every_page_of_the_index_once(multistream):
    dump, index = multistream
    listed = [int(line.split(b":")[1]) for line in bz2.decompress(index.read_bytes()).splitlines()]
    with local_pipeline() as p:
        planned = (
            p
            | beam.Create([(str(dump), str(index))])
            | beam.ParDo(PlanByteRanges(1)).with_outputs("inputs", main="ranges")
        )
        read = planned.ranges | beam.ParDo(ReadByteRanges()).with_outputs("errors", tally.TALLY, main="pages")
        assert_that(ids_of(read.pages), equal_to(listed), label="pages")
        assert_that(
            planned.ranges | beam.Map(lambda r: r[2]) | beam.CombineGlobally(max),
            equal_to([dump.stat().st_size]),
            label="ranges reach the end",
        )
        counted = (
            planned.ranges
            | beam.combiners.Count.Globally()
            | beam.Map(lambda n, inputs: n == inputs[0]["byte_ranges"], beam.pvalue.AsList(planned.inputs))
        )
        assert_that(counted, equal_to([True]), label="ranges counted")
        assert_that(
            planned.inputs | beam.Map(lambda i: i["index"]["sha256"]),
            equal_to([hashlib.sha256(index.read_bytes()).hexdigest()]),
            label="inputs",
        )
        assert_that(summed(read[tally.TALLY]), equal_to([{"read": 361}]), label="counts")
    assert sorted(listed) == sorted(page_ids_in_xml(ENWIKI_2014))


@pytest.fixture(scope="module")
def pages() -> list[tuple[Dump, Page]]:
    with open(ENWIKI_2014, "rb") as raw:
        site = read_siteinfo(open_decompressed(raw))
    dump = Dump(str(ENWIKI_2014), "enwiki", site)
    with open(ENWIKI_2014, "rb") as raw:
        return [(dump, page) for page in iter_pages(open_decompressed(raw)) if isinstance(page, Page)]


def test_clean_text_makes_documents_of_articles_and_counts_the_rest(pages):
    golden = {
        f"enwiki:{page_id}": (GOLDEN / name).read_text(encoding="utf-8").rstrip("\n")
        for page_id, name in (
            (330, "enwiki-330-Actrius.txt"),
            (846, "enwiki-846-Museum_of_Work.txt"),
            (910, "enwiki-910-Arne_Kaijser.txt"),
        )
    }
    with local_pipeline() as p:
        cleaned = (
            p | beam.Create(pages) | beam.ParDo(CleanText("wikipedia", 100)).with_outputs(tally.TALLY, main="documents")
        )
        assert_that(
            cleaned.documents | beam.Filter(lambda d: d["id"] in golden) | beam.Map(lambda d: (d["id"], d["text"])),
            equal_to(sorted(golden.items())),
            label="golden",
        )
        assert_that(
            cleaned.documents
            | beam.Filter(lambda d: d["id"] == "enwiki:330")
            | beam.Map(lambda d: (d["source"], d["title"], d["url"])),
            equal_to([("wikipedia", "Actrius", "http://en.wikipedia.org/wiki/Actrius")]),
            label="fields",
        )
        assert_that(cleaned.documents | beam.combiners.Count.Globally(), equal_to([198]), label="kept")
        assert_that(
            summed(cleaned[tally.TALLY]),
            equal_to(
                [
                    {
                        "skipped:redirect": 145,
                        "skipped:disambiguation": 12,
                        "skipped:too_short": 5,
                        "skipped:non_article_namespace": 1,
                    }
                ]
            ),
            label="counts",
        )
