"""dedup's pieces one at a time on real text (the bundled books, cut into sections, and the golden Wikipedia
articles): the pure functions of transforms/ (shingles, MinHash, LSH, Jaccard, clusters, benchmark readers, n-gram
matching, cuts), and each Beam transform in a TestPipeline with assert_that. The whole command is tested in
test_dedup.py."""

from __future__ import annotations

import json
import random
import re

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.dedup.config import DedupConfig, Source
from bertcorpus.pipeline.dedup.near import (
    CandidatePairs,
    CandidateShingles,
    ConnectedComponents,
    ExactCopies,
    MeasurePairs,
    MeasureTwins,
    NearVerdicts,
)
from bertcorpus.pipeline.dedup.read import ReadSources, shard_of
from bertcorpus.pipeline.dedup.report import ContaminationReport, TopClusters
from bertcorpus.pipeline.dedup.values import Probe, ProbeCoder, ShardItem, ShardItemCoder, Verdict
from bertcorpus.pipeline.dedup.write import WriteShards
from bertcorpus.transforms.benchmark_texts import BenchmarkError, parse_benchmark
from bertcorpus.transforms.decontamination import (
    Region,
    build_index,
    cut_plan,
    find_matches,
    matched_regions,
    word_spans,
)
from bertcorpus.transforms.minhash import (
    EMPTY_BIN,
    band_hashes,
    fold_text,
    jaccard,
    oph_signature,
    shingle_chunks,
    shingle_hashes,
    shingle_set,
    word_hash_chunks,
    word_hashes,
)
from bertcorpus.transforms.near_duplicates import (
    ANCHORS,
    MAX_ALL_PAIRS,
    bucket_pairs,
    candidate_probability,
    connected_components,
    digest_of,
    exact_key,
    is_star_forest,
    large_star,
    small_star,
)

from conftest import DATA, book_sections

GOLDEN = sorted((DATA / "wiki" / "golden").glob("*.txt"))
SECTIONS = book_sections()


def local_pipeline() -> test_pipeline.TestPipeline:
    return test_pipeline.TestPipeline(runner="DirectRunner")


def summed(counts):
    return counts | beam.CombineGlobally(tally.SumCounts()) | beam.Map(lambda c: {k: v for k, v in c.items() if v})


def python_shingles(text: str, k: int = 5) -> set[tuple[bytes, ...]]:
    words = fold_text(text).split()
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


def edited(text: str, every: int, seed: int) -> str:
    """The text with every `every`-th word replaced: a near copy of a known likeness."""
    rng = random.Random(seed)
    words = text.split(" ")
    for i in range(0, len(words), every):
        words[i] = rng.choice(["alpha", "beta", "gamma", "delta"])
    return " ".join(words)


# ---------------------------------------------------------------------------------------------- shingles and MinHash


def test_the_jaccard_of_shingle_hashes_is_that_of_the_shingles_themselves():
    for (_, a), (_, b) in zip(SECTIONS[:20], SECTIONS[1:21]):
        for other in (b, edited(a, 13, 1), edited(a, 40, 2)):
            x, y = python_shingles(a), python_shingles(other)
            expected = len(x & y) / len(x | y)
            measured = jaccard(*(shingle_set(shingle_hashes(word_hashes(fold_text(t)), 5)) for t in (a, other)))
            assert measured == expected


def test_words_and_shingles_do_not_depend_on_where_the_text_is_chunked():
    text = "\n\n".join(t for _, t in SECTIONS[:60])  # ~480 KB: two chunks of the word hasher
    folded = fold_text(text)
    chunks = list(word_hash_chunks(folded))
    assert len(chunks) >= 2
    words = word_hashes(folded)
    assert words.size == len(folded.split())
    joined = np.concatenate(list(shingle_chunks(chunks, 5)))
    assert np.array_equal(joined, shingle_hashes(words, 5))
    # the same word gives the same hash wherever it is
    first = [i for i, w in enumerate(folded.split()) if w == b"alice"]
    assert len(set(words[first].tolist())) == 1 and len(first) > 10


def test_minhash_bins_agree_about_as_often_as_the_texts_are_alike():
    text = SECTIONS[3][1]
    for every, seed in ((8, 1), (20, 2), (60, 3)):
        other = edited(text, every, seed)
        true = jaccard(*(shingle_set(shingle_hashes(word_hashes(fold_text(t)), 5)) for t in (text, other)))
        a, b = (oph_signature([shingle_hashes(word_hashes(fold_text(t)), 5)], 1024) for t in (text, other))
        used = (a != EMPTY_BIN) | (b != EMPTY_BIN)
        agree = float(np.mean(a[used] == b[used]))
        bound = 4 * np.sqrt(true * (1 - true) / used.sum()) + 0.01  # four standard errors
        assert abs(agree - true) < bound, (every, agree, true)


def test_band_keys_need_every_row_to_agree_and_skip_empty_bands():
    signature = oph_signature([shingle_hashes(word_hashes(fold_text(SECTIONS[0][1])), 5)], 160)
    keys = band_hashes(signature, 20, 8)
    assert keys.size == 20 and len(set(keys.tolist())) == 20
    changed = signature.copy()
    changed[9] ^= np.uint64(1)  # one row of band 1
    other = band_hashes(changed, 20, 8)
    assert [k for k, o in zip(keys.tolist(), other.tolist()) if k != o] == [keys[1]]
    short = oph_signature([shingle_hashes(word_hashes(fold_text("one two three four five six")), 5)], 160)
    assert band_hashes(short, 20, 8).size == 2  # two shingles: at most two bands hold anything
    with pytest.raises(ValueError, match="do not fit"):
        band_hashes(signature, 20, 9)


def test_the_default_bands_propose_a_pair_of_jaccard_0_8_almost_always():
    assert candidate_probability(0.8, 20, 8) == pytest.approx(0.975, abs=0.001)
    assert candidate_probability(0.5, 20, 8) < 0.08


def test_exact_copies_are_equal_after_nfkc_case_and_whitespace_only():
    text = SECTIONS[5][1]
    same = ["  " + text.upper().replace(" ", " \t ") + "\n", text.replace("fi", "ﬁ"), text.replace("1", "１")]
    assert {exact_key(t) for t in [text, *same]} == {exact_key(text)}
    assert exact_key(text.replace(",", "", 1)) != exact_key(text)  # punctuation is part of the text
    assert 0 <= digest_of(exact_key(text)) < 2**63


# ---------------------------------------------------------------------------------------------- clusters


def _node(i: int) -> tuple:
    return (i % 3, f"doc:{i:05d}", i)


def _components(edges) -> dict:
    parent = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: root(x) for x in parent}


def test_buckets_propose_all_pairs_when_small_and_anchors_when_large():
    small = [_node(i) for i in range(MAX_ALL_PAIRS)]
    assert len(bucket_pairs(reversed(small))) == MAX_ALL_PAIRS * (MAX_ALL_PAIRS - 1) // 2
    large = [_node(i) for i in range(100)]
    pairs = bucket_pairs(large)
    anchors = sorted(large)[:ANCHORS]
    assert {a for a, _ in pairs} == set(anchors) and all(a < b for a, b in pairs)
    assert {b for _, b in pairs} == set(sorted(large)[1:])


def test_star_steps_on_one_node():
    a, b, c, d = (_node(i) for i in (3, 1, 2, 7))  # b < c < d < a in node order? compare as tuples
    nodes = sorted([a, b, c, d])
    low, mid, high, top = nodes
    assert large_star(mid, [low, high, top]) == [(low, high), (low, top)]
    assert small_star(top, [mid, high]) == [(mid, high), (mid, top)]


@pytest.mark.parametrize("shape", ["path", "tree", "random"])
def test_connected_components_settle_into_stars_around_the_smallest_node(shape):
    rng = random.Random(shape)
    n = 400
    order = list(range(n))
    rng.shuffle(order)
    if shape == "path":
        edges = [(_node(order[i]), _node(order[i + 1])) for i in range(n - 1)]
    elif shape == "tree":
        edges = [(_node(order[i]), _node(order[rng.randrange(i)])) for i in range(1, n)]
    else:
        edges = [(_node(rng.randrange(n)), _node(rng.randrange(n))) for _ in range(n)]
    stars = connected_components(edges, 8)
    assert is_star_forest(stars)
    truth = _components(edges)
    assert {leaf: centre for centre, leaf in stars} == {x: r for x, r in truth.items() if x != r}
    assert not is_star_forest(connected_components(edges, 1)) or shape == "random"


# ---------------------------------------------------------------------------------------------- benchmark files

ACTRIUS = [p.strip() for p in GOLDEN[0].read_text(encoding="utf-8").split("\n\n")]


def _squad(version: str | None) -> bytes:
    document = {
        "data": [
            {
                "title": "Actrius",
                "paragraphs": [
                    {
                        "context": ACTRIUS[0],
                        "qas": [{"id": "a1", "question": "Who directed Actrius?"}, {"id": "a2", "question": "When?"}],
                    },
                    {"context": ACTRIUS[1], "qas": []},
                ],
            }
        ]
    }
    if version:
        document["version"] = version
    return json.dumps(document).encode()


def test_squad_contexts_are_texts_of_their_questions():
    for version in ("v2.0", None):
        benchmark = parse_benchmark("squad/dev", "dev.json", _squad(version))
        assert benchmark.layout == (f"SQuAD {version}" if version else "SQuAD")
        texts = {t.text: t.examples for t in benchmark.texts}
        assert texts[ACTRIUS[0]] == ["a1", "a2"] and texts["Who directed Actrius?"] == ["a1"]
        assert texts[ACTRIUS[1]] == ["0/1"] and benchmark.examples == 3


GLUE_SENTENCES = [s for p in ACTRIUS for s in re.split(r"(?<=\.) ", p)]


@pytest.mark.parametrize(
    "header, row, layout, texts, example",
    [
        (None, lambda s: f"gj04\t1\t\t{s}", "GLUE TSV: CoLA (no header)", 2, "0"),
        ("sentence\tlabel", lambda s: f"{s}\t1", "GLUE TSV: sentence", 2, "0"),
        (
            "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
            lambda s: f"7\t1\t2\t{s}\tWhy?\t0",
            "GLUE TSV: question1, question2",
            3,
            "7",
        ),
        (
            "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
            lambda s: f"1\t5\t6\t{s}\t{s[::-1]}",
            "GLUE TSV: #1 String, #2 String",
            4,
            "0",
        ),
        (
            "index\tquestion\tsentence\tlabel",
            lambda s: f"3\tWhat is it?\t{s}\tentailment",
            "GLUE TSV: question, sentence",
            3,
            "3",
        ),
    ],
)
def test_glue_tsv_files_give_their_text_columns(header, row, layout, texts, example):
    lines = ([header] if header else []) + [row(GLUE_SENTENCES[0]), "one column", row(GLUE_SENTENCES[1])]
    benchmark = parse_benchmark("task/dev", "dev.tsv", ("\n".join(lines) + "\n").encode())
    assert benchmark.layout == layout and benchmark.unreadable_rows == 1
    found = {t.text: t.examples for t in benchmark.texts}
    assert len(found) == texts and found[GLUE_SENTENCES[0]] == [example]
    assert GLUE_SENTENCES[1] in found


@pytest.mark.parametrize(
    "record, layout, expected",
    [
        (
            {"question": "is it a film", "passage": ACTRIUS[0], "idx": 4, "label": True},
            "BoolQ",
            ["is it a film", ACTRIUS[0]],
        ),
        (
            {"premise": ACTRIUS[0], "choice1": "It won.", "choice2": "It lost.", "question": "effect", "idx": 4},
            "COPA",
            [ACTRIUS[0], "It won.", "It lost."],
        ),
        (
            {"word": "film", "sentence1": GLUE_SENTENCES[0], "sentence2": GLUE_SENTENCES[1], "idx": 4},
            "WiC",
            GLUE_SENTENCES[:2],
        ),
        (
            {
                "passage": {"text": ACTRIUS[0], "questions": [{"question": "Who?", "answers": [{"text": "Pons"}]}]},
                "idx": 4,
            },
            "MultiRC",
            [ACTRIUS[0], "Who?", "Pons"],
        ),
        (
            {
                "passage": {"text": ACTRIUS[1], "entities": []},
                "qas": [{"query": "@placeholder wins", "idx": 9}],
                "idx": 4,
            },
            "ReCoRD",
            [ACTRIUS[1], "@placeholder wins"],
        ),
        ({"premise": ACTRIUS[0], "hypothesis": "A film.", "idx": 4}, "CB/RTE/AX-g", [ACTRIUS[0], "A film."]),
    ],
)
def test_superglue_records_give_the_text_of_their_task(record, layout, expected):
    benchmark = parse_benchmark("task/val", "val.jsonl", (json.dumps(record) + "\n").encode())
    assert benchmark.layout == layout
    assert [t.text for t in benchmark.texts] == expected and all(t.examples == ["4"] for t in benchmark.texts)


def test_named_text_fields_read_any_jsonl_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"uid": i, "body": {"content": s}} for i, s in enumerate(GLUE_SENTENCES[:3])]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    benchmark = parse_benchmark("x/y", "y.jsonl", data, ["body.content"])
    assert [t.text for t in benchmark.texts] == GLUE_SENTENCES[:3] and benchmark.layout == "fields body.content"
    pq.write_table(pa.Table.from_pylist([{"id": "e1", "prompt": GLUE_SENTENCES[0]}]), tmp_path / "b.parquet")
    benchmark = parse_benchmark("x/b", "b.parquet", (tmp_path / "b.parquet").read_bytes(), ["prompt"])
    assert [(t.text, t.examples) for t in benchmark.texts] == [(GLUE_SENTENCES[0], ["e1"])]


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("dev.jsonl", b"\n  \n", "the file is empty"),
        ("dev.json", b'{"data": [{"title": "t", "paragraphs": [{"qas": []}]}]}', "a SQuAD file without contexts"),
        ("dev.json", b'{"results": 1}', "unknown benchmark layout"),
        ("dev.jsonl", b'{"prompt": "a"}\n', "its first record has the fields prompt"),
        ("dev.tsv", b"a\tb\n1\t2\n", "its header has none of the text columns"),
        ("dev.txt", b"some text\n", "unknown benchmark layout"),
        # Truncated files: the JSON error and where it is, not an unknown layout.
        (
            "dev.json",
            _squad("v2.0")[:150],
            "benchmark dev.json: not valid JSON: Unterminated string starting at: line 1 column 59 (char 58)",
        ),
        (
            "dev.jsonl",
            b'{"premise": "The cat sat on',
            "benchmark dev.jsonl: not valid JSON: line 1: Unterminated string",
        ),
    ],
)
def test_a_benchmark_file_that_cannot_be_read_says_why(name, data, message):
    with pytest.raises(BenchmarkError, match=re.escape(message)):
        parse_benchmark("x/dev", name, data)


# ---------------------------------------------------------------------------------------------- decontamination


def _index(*texts: str, ngram: int = 13, min_ngram: int = 8):
    from bertcorpus.transforms.benchmark_texts import Benchmark, BenchmarkText

    benchmark = Benchmark("t/dev", "test", len(texts), [BenchmarkText(t, [f"e{i}"]) for i, t in enumerate(texts)])
    return build_index([benchmark], ngram, min_ngram)


def test_benchmark_texts_give_ngrams_of_13_words_or_all_their_words():
    long, middle, short = ACTRIUS[0], "Ventura Pons directed this film in the year 1996.", "A short text."
    index = _index(long, middle, short)
    assert index.sizes == (9, 13) and index.summary[0]["too_short"] == 1
    assert index.hashes[9].size == 1 and index.hashes[13].size == len(fold_text(long).split()) - 12
    assert index.examples == [["e0"], ["e1"]]


def test_matches_are_found_where_the_passage_is_and_nowhere_else():
    doc = SECTIONS[10][1] + "\n\n" + ACTRIUS[1] + "\n\n" + SECTIONS[11][1]
    index = _index(ACTRIUS[1].upper())
    words = word_hashes(fold_text(doc))
    matches = find_matches(words, index)
    passage_words = len(fold_text(ACTRIUS[1]).split())
    assert len(matches) == passage_words - 12 and all(m.texts == (0,) for m in matches)
    (region,) = matched_regions(doc, matches)  # the overlapping n-grams of one passage are one region
    assert doc[region.start : region.end] == ACTRIUS[1] and region.matches == len(matches)
    assert find_matches(word_hashes(fold_text(SECTIONS[10][1])), index) == []
    short = " ".join(SECTIONS[11][1].split()[40:50])  # a text shorter than 13 words: one n-gram of all its words
    size = len(fold_text(short).split())
    both = find_matches(words, _index(ACTRIUS[1], short))
    assert 8 <= size < 13 and [m for m in both if m.size == 13] == matches
    assert [fold_text(doc).split()[m.word : m.word + size] for m in both if m.size == size] == [
        fold_text(short).split()
    ]
    shared = find_matches(words, _index(SECTIONS[3][1], ACTRIUS[1], ACTRIUS[1].lower()))  # two texts hold it
    assert [m.word for m in shared] == [m.word for m in matches] and {m.texts for m in shared} == {(1, 2)}


def test_word_spans_give_every_folded_word_its_place():
    """Each word of the folded text at the whitespace-separated piece it was folded from, as folding each piece on its
    own finds them: also where NFKC splits or joins characters (½ is 1⁄2, two words), for no-break spaces, curly
    quotes, dashes, a lone surrogate and text that is all ASCII."""
    odd = "½ cup\u00a0of ﬁne “flour”—sifted, x\u2044y; caf\u0065\u0301 \udc80 end.\n\n\tNaïve  ÉCOLE 2\u00b3 "
    texts = [path.read_text(encoding="utf-8") for path in GOLDEN] + [odd, odd.encode("ascii", "ignore").decode(), ""]
    for text in texts:
        expected = [
            (m.start(), m.end()) for m in re.finditer(r"[^ \t\n\r\f\v]+", text) for _ in fold_text(m.group()).split()
        ]
        starts, ends = word_spans(text)
        assert list(zip(starts, ends)) == expected
        assert len(starts) == len(fold_text(text).split())


def test_a_cut_removes_the_match_with_its_margin_and_keeps_the_rest():
    doc = "\n\n".join(t for _, t in SECTIONS[20:23])
    at = doc.index("\n\n", 5000) + 2
    end = doc.index(" ", at + 100)
    pieces, removed = cut_plan(doc, [Region(at, end, at, end, (0,))], 200, 10, 200)
    (region,) = removed
    assert region.start <= at - 200 and region.end >= end + 200
    assert doc[region.start - 1] not in " \n" and doc[region.end].strip()  # whole words stay whole
    assert [p for p in pieces] == [(0, region.start), (region.end, len(doc))] or pieces[0][1] < region.start
    assert sum(e - s for s, e in pieces) + region.end - region.start == len(doc)


def test_short_pieces_go_with_the_cut_and_too_many_cuts_drop_the_document():
    doc = SECTIONS[30][1]
    spaces = [m.start() for m in re.finditer(" ", doc)]
    near_start = Region(spaces[3], spaces[8], spaces[3], spaces[8], (1,))
    pieces, removed = cut_plan(doc, [near_start], 0, 10, 200)
    assert removed[0].start == 0 and pieces == [(removed[0].end, len(doc))]  # the opening words went with it
    many = [Region(spaces[i], spaces[i + 3], spaces[i], spaces[i + 3], (2,)) for i in range(10, 1000, 80)]
    pieces, removed = cut_plan(doc, many, 0, 5, 0)
    assert pieces == [] and [(r.start, r.end, r.matches) for r in removed] == [(0, len(doc), len(many))]


# ---------------------------------------------------------------------------------------------- Beam transforms


def _config(tmp_path, **more) -> DedupConfig:
    return DedupConfig([Source("a", "a"), Source("b", "b")], str(tmp_path), [2, 1], **more)


def test_exact_copies_keep_the_smallest_node_and_band_it():
    n0, n1, n2 = (0, "x", 5), (1, "a", 5), (1, "b", 5)
    bands = np.array([4, 6], dtype="<u8").tobytes()
    with local_pipeline() as p:
        out = (
            p
            | beam.Create(
                [(b"k", (n2, 2, bands)), (b"k", (n1, 1, bands)), (b"k", (n0, 0, bands)), (b"j", (n2, 2, bands))]
            )
            | ExactCopies()
        )
        assert_that(out.verdicts, equal_to([(n1, Verdict("exact", n0)), (n2, Verdict("exact", n0))]), label="v")
        assert_that(out.bands, equal_to([(2, (n0, 0)), (3, (n0, 0)), (2, (n2, 2)), (3, (n2, 2))]), label="b")
        assert_that(summed(out[tally.TALLY]), equal_to([{"exact:groups": 1}]), label="counts")


def test_candidate_pairs_come_from_shared_bands():
    a, b, c = ((0, i, 1) for i in "abc")
    with local_pipeline() as p:
        pairs = p | beam.Create([(1, (a, 0)), (1, (b, 1)), (2, (c, 2)), (3, (c, 2)), (3, (b, 1))]) | CandidatePairs()
        assert_that(pairs, equal_to([((a, 0), (b, 1)), ((b, 1), (c, 2))]))


def _shingles(text: str) -> np.ndarray:
    return shingle_set(shingle_hashes(word_hashes(fold_text(text)), 5))


def test_measure_pairs_gives_the_exact_jaccard_of_each_pair():
    texts = {(0, "a", 1): SECTIONS[0][1], (0, "b", 1): edited(SECTIONS[0][1], 10, 4), (1, "c", 1): SECTIONS[1][1]}
    sets = [(n, Probe(None, _shingles(t))) for n, t in texts.items()]
    pairs = [((0, "a", 1), (0, "b", 1)), ((0, "a", 1), (1, "c", 1)), ((0, "a", 1), (0, "b", 1))]
    expected = [((a, b), jaccard(_shingles(texts[a]), _shingles(texts[b]))) for a, b in pairs[:2]]
    similar = sum(j >= 0.3 for _, j in expected)
    assert similar == 1
    with local_pipeline() as p:
        measured = {
            "pairs": p | "pairs" >> beam.Create(pairs),
            "shingles": p | "sets" >> beam.Create(sets),
        } | MeasurePairs("test", 0.3)
        assert_that(measured.measured, equal_to(expected), label="measured")
        assert_that(
            summed(measured[tally.TALLY]),
            equal_to([{"near:measured:test": 2, "near:similar:test": similar}]),
            label="counts",
        )


def test_twins_are_measured_only_where_no_candidate_pair_was():
    texts = {(0, "a", 1): SECTIONS[0][1], (0, "b", 1): edited(SECTIONS[0][1], 50, 4), (1, "c", 1): SECTIONS[0][1][:-90]}
    sets = [(n, Probe(None, _shingles(t))) for n, t in texts.items()]
    a, b, c = texts
    with local_pipeline() as p:
        twins = {
            "twins": p | "twins" >> beam.Create([(a, b), (a, c)]),
            "measured": p | "measured" >> beam.Create([((a, b), 0.91), ((b, c), 0.93)]),
            "shingles": p | "sets" >> beam.Create(sets),
        } | MeasureTwins(0.8)
        assert_that(
            twins["measured"],
            equal_to([((a, b), 0.91), ((a, c), jaccard(_shingles(texts[a]), _shingles(texts[c])))]),
            label="twins",
        )
        assert_that(
            summed(twins[tally.TALLY]), equal_to([{"near:measured:twins": 1, "near:similar:twins": 1}]), label="counts"
        )


def test_connected_components_in_the_graph_match_union_find():
    rng = random.Random(7)
    edges = [(_node(rng.randrange(60)), _node(rng.randrange(60))) for _ in range(50)]
    edges = [(min(a, b), max(a, b)) for a, b in edges if a != b]
    truth = _components(edges)
    expected = [(root, x) for x, root in truth.items() if x != root]
    with local_pipeline() as p:
        out = p | beam.Create(edges) | ConnectedComponents(6)
        assert_that(out.removed, equal_to(expected))


def test_unsettled_components_keep_their_documents_and_are_counted():
    chain = [(_node(i), _node(i + 1)) for i in range(0, 40)]
    with local_pipeline() as p:
        out = p | beam.Create(chain) | ConnectedComponents(1)
        removed = out.removed | beam.Map(lambda e: e[0] == _node(0))
        assert_that(
            removed | beam.combiners.Count.Globally(),
            equal_to([sum(1 for centre, _ in connected_components(chain, 1) if centre == _node(0))]),
            label="settled",
        )
        assert_that(
            summed(out[tally.TALLY]) | beam.Map(lambda c: c["near:unsettled"] > 0), equal_to([True]), label="unsettled"
        )


def test_near_verdicts_name_the_twin_and_the_closest_neighbour_of_a_chain():
    a, b, c = (0, "a", 1), (0, "b", 1), (1, "c", 1)
    with local_pipeline() as p:
        verdicts = {
            "twins": p | "twins" >> beam.Create([((a, b), 0.9), ((a, c), 0.7)]),
            "edges": p | "edges" >> beam.Create([((a, b), 0.9), ((b, c), 0.85)]),
        } | NearVerdicts(0.8)
        assert_that(verdicts, equal_to([(b, Verdict("near", a, 0.9)), (c, Verdict("near", a, 0.7, (b, 0.85)))]))


@pytest.fixture
def sections_jsonl(tmp_path):
    path = tmp_path / "sections.jsonl"
    rows = [{"id": i, "text": t, "title": "T"} for i, t in SECTIONS[:6]]
    rows.append({"id": "copy", "text": SECTIONS[0][1]})
    rows.append({"id": "planted", "text": SECTIONS[7][1] + "\n\n" + ACTRIUS[0]})
    rows.append({"id": "tiny", "text": "Too short."})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    return path


def test_read_sources_fingerprints_each_document_once(tmp_path, sections_jsonl):
    config = _config(tmp_path)
    index = _index(ACTRIUS[0])
    with local_pipeline() as p:
        read = (
            p
            | beam.Create([(0, (1, str(sections_jsonl), 0, -1))])
            | beam.ParDo(ReadSources(config), index).with_outputs(
                "documents", "hits", "errors", "files", tally.TALLY, main="fingerprints"
            )
        )
        keys = read.fingerprints | beam.Map(lambda f: (f[1][0][1], f[0] == exact_key(SECTIONS[0][1])))
        assert_that(
            keys,
            equal_to(
                [(i, i in (SECTIONS[0][0], "copy")) for i, _ in SECTIONS[:6]] + [("copy", True), ("planted", False)]
            ),
            label="fingerprints",
        )
        assert_that(read.hits, equal_to([(0, (1, "planted"))]), label="hits")
        shards = read.documents | beam.Map(lambda d: (d[1].document["id"], d[0], bool(d[1].regions)))
        expected = [
            (r, (1, shard_of(r, 1)), r == "planted") for r in [i for i, _ in SECTIONS[:6]] + ["copy", "planted", "tiny"]
        ]
        assert_that(shards, equal_to(expected), label="documents")
        assert_that(
            read.errors | beam.Map(lambda e: (e[0], e[1].error["reason"])),
            equal_to([((1, 0), "bad_jsonl_line")]),
            label="errors",
        )
        assert_that(
            summed(read[tally.TALLY])
            | beam.Map(lambda c: (c["source:1:read"], c["source:1:too_short_to_compare"], c["benchmark:0:1:matched"])),
            equal_to([(10, 1, 1)]),
            label="counts",
        )


def test_candidate_shingles_reads_the_paired_documents_again(tmp_path, sections_jsonl):
    config = _config(tmp_path)
    tasks = [(1, str(sections_jsonl), 0, -1)]
    node = lambda i, t: (1, i, digest_of(exact_key(t)))  # noqa: E731
    first, second = node(*SECTIONS[0]), node(*SECTIONS[2])
    with local_pipeline() as p:
        sets = (
            p | beam.Create([((first, 0), (second, 0)), ((first, 0), (second, 0))]) | CandidateShingles(config, tasks)
        )
        assert_that(
            sets | beam.Map(lambda s: (s[0], s[1].shingles.tolist())),
            equal_to([(first, _shingles(SECTIONS[0][1]).tolist()), (second, _shingles(SECTIONS[2][1]).tolist())]),
        )


def test_write_shards_applies_verdicts_and_cuts_and_writes_every_shard(tmp_path):
    config = _config(tmp_path, contamination="cut", cut_margin=0)
    text = SECTIONS[7][1] + "\n\n" + ACTRIUS[0] + "\n\n" + SECTIONS[8][1]
    index = _index(ACTRIUS[0])
    matches = find_matches(word_hashes(fold_text(text)), index)
    doc = lambda i, t: {  # noqa: E731
        "id": i,
        "source": "a",
        "title": None,
        "text": t,
        "url": None,
        "language": "en",
        "language_confidence": None,
        "digest": 1,
    }
    items = [
        ((0, shard_of("keep", 2)), ShardItem(doc("keep", SECTIONS[1][1]))),
        ((0, shard_of("copy", 2)), ShardItem(doc("copy", SECTIONS[1][1]))),
        ((0, shard_of("copy", 2)), ShardItem(verdict=("copy", 1, Verdict("exact", (0, "keep", 1))))),
        ((0, shard_of("cut", 2)), ShardItem(doc("cut", text), tuple(matched_regions(text, matches)))),
        ((0, 0), ShardItem(error={"input": "f", "where": "byte 0", "reason": "bad", "detail": "d"})),
    ]
    with local_pipeline() as p:
        written = {
            "items": p | "items" >> beam.Create(items),
            "index": p | "index" >> beam.Create([index]),
        } | WriteShards(config)
        assert_that(
            written["files"] | beam.Map(lambda f: f["path"]),
            equal_to(
                [
                    "a/documents-00000-of-00002.parquet",
                    "a/documents-00001-of-00002.parquet",
                    "removed-a-00000-of-00002.jsonl",
                    "removed-a-00001-of-00002.jsonl",
                    "a/errors-00000-of-00001.jsonl",
                    "b/documents-00000-of-00001.parquet",
                    "removed-b-00000-of-00001.jsonl",
                    "b/errors-00000-of-00001.jsonl",
                ]
            ),
        )
    import pyarrow.parquet as pq

    staged = tmp_path / ".staging"
    kept = {
        r["id"]: r["text"] for f in sorted((staged / "a").glob("documents-*")) for r in pq.read_table(f).to_pylist()
    }
    assert kept["keep"] == SECTIONS[1][1] and "copy" not in kept and "cut" not in kept
    assert kept["cut#1"] == SECTIONS[7][1] and kept["cut#2"] == SECTIONS[8][1]
    rows = [json.loads(line) for f in sorted(staged.glob("removed-a-*")) for line in f.open()]
    assert {(r["id"], r["reason"]) for r in rows} == {("copy", "exact"), ("cut", "benchmark")}
    cut = next(r for r in rows if r["id"] == "cut")
    assert cut["chars"] == len(text) - len(SECTIONS[7][1]) - len(SECTIONS[8][1])
    assert cut["match"]["benchmark"] == "t/dev" and cut["match"]["example"] == "e0"
    assert len((staged / "a" / "errors-00000-of-00001.jsonl").read_text().splitlines()) == 1


def test_contamination_report_lists_each_example_found_once(tmp_path):
    config = _config(tmp_path, benchmarks=["x", "y"], benchmark_names=["t/dev", "u/dev"])
    index = _index(ACTRIUS[0], ACTRIUS[1])
    hits = [(1, (0, "d2")), (0, (1, "d1")), (0, (0, "d1")), (1, (0, "d2"))]
    with local_pipeline() as p:
        files = {
            "begin": beam.pvalue.PBegin(p),
            "hits": p | "hits" >> beam.Create(hits),
            "index": p | "index" >> beam.Create([index]),
        } | (ContaminationReport(config))
        assert_that(
            files | beam.Map(lambda f: (f["path"], f["records"], f["texts_found"])),
            equal_to([("contaminated-t-dev.jsonl", 2, 2), ("contaminated-u-dev.jsonl", 0, 0)]),
        )
    lines = [json.loads(line) for line in (tmp_path / ".staging" / "contaminated-t-dev.jsonl").open()]
    assert lines == [
        {
            "example": "e0",
            "texts": 1,
            "documents": 2,
            "found_in": [{"source": "a", "id": "d1"}, {"source": "b", "id": "d1"}],
        },
        {"example": "e1", "texts": 1, "documents": 1, "found_in": [{"source": "a", "id": "d2"}]},
    ]


def test_top_clusters_are_the_largest_with_their_ledger_files(tmp_path):
    config = _config(tmp_path)
    kept, other = (0, "k", 1), (1, "m", 1)
    verdicts = [((1, f"r{i}", 1), Verdict("near" if i % 2 else "exact", kept, 0.9)) for i in range(5)]
    verdicts.append(((0, "z", 1), Verdict("exact", other)))
    with local_pipeline() as p:
        top = p | beam.Create(verdicts) | TopClusters(config)
        assert_that(
            top,
            equal_to(
                [
                    [
                        (kept, {"exact": 3, "near": 2, "ledger": ["removed-b-00000-of-00001.jsonl"]}),
                        (
                            other,
                            {"exact": 1, "near": 0, "ledger": [f"removed-a-{shard_of('z', 2):05d}-of-00002.jsonl"]},
                        ),
                    ]
                ]
            ),
        )


def test_values_cross_shuffles_unchanged():
    probe = Probe((1, "a\udc80", 3), np.array([1, 2**64 - 1], dtype=np.uint64))
    back = ProbeCoder().decode(ProbeCoder().encode(probe))
    assert back.partner == probe.partner and np.array_equal(back.shingles, probe.shingles)
    item = ShardItem(
        {
            "id": "é",
            "source": "s",
            "title": None,
            "text": SECTIONS[0][1],
            "url": None,
            "language": "en",
            "language_confidence": None,
            "digest": 9,
        },
        (Region(1, 2, 1, 2, (3,), 2),),
        ("é", 9, Verdict("near", (0, "x", 1), 0.5, ((0, "y", 2), 0.9))),
    )
    assert ShardItemCoder().decode(ShardItemCoder().encode(item)) == item
