"""Whole-word masking on Chinese, measured against a gold word segmentation (the test set of UD_Chinese-GSDSimp,
Chinese Wikipedia text, and the same sentences in traditional characters, UD_Chinese-GSD's): of the gold words of
several characters that a mask touches, the share masked whole. The tokenizer gives every character a token of its
own, so without a segmenter a mask takes single characters (that share is low, as google-research/bert#780
reports); with jieba's words it must be at least 90%, in either script. Static records and load-time masks (through
the chinese_ref column) alike."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bertcorpus.loader import PretrainingLoader
from bertcorpus.pipeline.cli.commands import main as run_cli
from bertcorpus.transforms.tfrecord import iter_tfrecords, parse_example
from bertcorpus.transforms.word_segmentation import SegmenterSpec, parse_user_dict, run_continuations

pytest.importorskip("rjieba")

ZH = Path(__file__).parent / "data" / "zh"
GOLD = ZH / "gsdsimp-test-words.txt"
GOLD_TRADITIONAL = ZH / "gsd-test-words.txt"  # the same Wikipedia sentences in traditional characters
GOLD_HK = ZH / "hk-test-words.txt"  # other traditional text: Hong Kong film subtitles and Legislative Council records


def gold_sentences(gold: Path) -> list[list[str]]:
    """The gold sentences as words, lower-cased as the uncased tokens are: the records' tokens, joined without
    their ## marks, give back the text."""
    return [line.lower().split() for line in gold.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return gold_corpus(tmp_path_factory.mktemp("wwm"), GOLD)


@pytest.fixture(scope="module")
def traditional_corpus(tmp_path_factory):
    return gold_corpus(tmp_path_factory.mktemp("wwm-hant"), GOLD_TRADITIONAL)


@pytest.fixture(scope="module")
def hk_corpus(tmp_path_factory):
    return gold_corpus(tmp_path_factory.mktemp("wwm-hk"), GOLD_HK)


def gold_corpus(folder: Path, gold: Path):
    """(folder, corpus text, gold word spans): the gold sentences as documents of 20 sentences, each sentence a
    line, and a vocab trained on them."""
    sentences = gold_sentences(gold)
    docs = ["\n".join("".join(w) for w in sentences[i : i + 20]) for i in range(0, len(sentences), 20)]
    (folder / "gold.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    argv = ["vocab", "--input", str(folder / "gold.txt"), "--output", str(folder / "vocab" / "vocab.txt")]
    assert run_cli([*argv, "--min-ideograph-count", "1", "--holdout-fraction", "0"]) == 0
    text, spans = "", []
    for words in sentences:
        for w in words:
            if len(w) > 1:
                spans.append((len(text), len(text) + len(w)))
            text += w
        text += "\n"
    return folder, text, spans


def whole_share(segments: list[tuple[str, set[int]]], text: str, spans: list[tuple[int, int]]) -> tuple[float, int]:
    """Of the gold multi-character words inside the segments that a mask touches, the share masked whole.
    segments: (characters, positions masked among them)."""
    starts = np.array([s for s, _ in spans])
    touched = whole = 0
    for chars, masked in segments:
        at = text.find(chars)
        if len(chars) < 8 or at < 0 or text.find(chars, at + 1) >= 0:
            continue  # not placed with certainty ([UNK], an accent stripped, or too short)
        first = np.searchsorted(starts, at)
        for s, e in spans[first:]:
            if e > at + len(chars):
                break
            inside = {p - at for p in range(s, e)}
            hit = inside & masked
            if hit:
                touched += 1
                whole += hit == inside
    return whole / max(touched, 1), touched


def record_segments(path: Path, vocab: list[str]) -> list[tuple[str, set[int]]]:
    """(A's characters, masked positions in A) and the same of B, of every record of a TFRecord file."""
    out = []
    with open(path, "rb") as f:
        for record in iter_tfrecords(f):
            ex = parse_example(record)
            ids = list(ex["input_ids"])
            for p, label, w in zip(ex["masked_lm_positions"], ex["masked_lm_ids"], ex["masked_lm_weights"]):
                if w:
                    ids[p] = label
            masked = {p for p, w in zip(ex["masked_lm_positions"], ex["masked_lm_weights"]) if w}
            out += _segments([vocab[i] for i in ids], masked)
    return out


def _segments(tokens: list[str], masked: set[int]) -> list[tuple[str, set[int]]]:
    """Each segment's text and the masked character positions in it (a masked token masks all its characters)."""
    seps = [i for i, t in enumerate(tokens) if t == "[SEP]"]
    out = []
    for a, b in [(1, seps[0])] + ([(seps[0] + 1, seps[1])] if len(seps) > 1 else []):
        pieces = [t.removeprefix("##") for t in tokens[a:b]]
        starts = np.cumsum([0] + [len(p) for p in pieces])
        chars = {c for p in masked if a <= p < b for c in range(starts[p - a], starts[p - a + 1])}
        out.append(("".join(pieces), chars))
    return out


@pytest.mark.parametrize("gold, min_touched", [("corpus", 1500), ("traditional_corpus", 1500), ("hk_corpus", 400)])
@pytest.mark.parametrize("segmenter, at_least, at_most", [("jieba", 0.90, 1.0), ("none", 0.0, 0.35)])
def test_static_whole_word_masks_fall_on_words(request, tmp_path, gold, min_touched, segmenter, at_least, at_most):
    # jieba's dictionary is simplified: traditional text is segmented through a simplified copy of each run.
    folder, text, spans = request.getfixturevalue(gold)
    out = tmp_path / "records"
    argv = ["create", "--input", str(folder / "gold.txt"), "--vocab", str(folder / "vocab" / "vocab.txt")]
    argv += ["--output", str(out), "--whole-word-mask", "--segmenter", segmenter, "--dupe-factor", "5"]
    assert run_cli([*argv, "--eval-fraction", "0", "--runner", "DirectRunner"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["form"]["whole_word_mask"] is True
    vocab = (folder / "vocab" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    segments = [s for f in sorted(out.glob("seq128/train-*.tfrecord")) for s in record_segments(f, vocab)]
    share, touched = whole_share(segments, text, spans)
    assert touched > min_touched
    assert at_least <= share <= at_most, share
    if segmenter == "jieba":
        assert manifest["form"]["word_segmenter"]["name"] == "jieba"
        assert manifest["segmentation"]["segmentation_misaligned_documents"] == 0
        continuations = manifest["segmentation"]["segmented_word_continuations"]
        assert continuations > 0.6 * sum(end - start - 1 for start, end in spans)  # the gold words' continuations
    else:
        assert manifest["form"]["word_segmenter"] is None


def load_time_segments(out: Path, epochs: int = 5) -> tuple[list[tuple[str, set[int]]], list[dict]]:
    """The segments of the loader's masked batches over `epochs` epochs, and the batches."""
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")
    loader = PretrainingLoader(out, batch_size=64, seq_length=128, seed=1)
    segments, batches = [], []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader:
            batches.append(batch)
            for n in range(len(batch["input_ids"])):
                ids = batch["input_ids"][n].copy()
                weights = batch["masked_lm_weights"][n] > 0
                positions, labels = batch["masked_lm_positions"][n][weights], batch["masked_lm_ids"][n][weights]
                ids[positions] = labels
                segments += _segments([vocab[i] for i in ids], set(positions.tolist()))
    return segments, batches


@pytest.fixture(scope="module")
def dynamic_forms(corpus, tmp_path_factory) -> dict[str, Path]:
    """The gold corpus's instances, unmasked, with jieba's words: as Parquet and as MDS."""
    folder, _, _ = corpus
    base = tmp_path_factory.mktemp("dynamic")
    argv = ["create", "--input", str(folder / "gold.txt"), "--vocab", str(folder / "vocab" / "vocab.txt")]
    argv += ["--whole-word-mask", "--masking", "dynamic", "--eval-fraction", "0", "--runner", "DirectRunner"]
    for form in ("parquet", "mds"):
        assert run_cli([*argv, "--output", str(base / form), "--record-format", form]) == 0
    return {form: base / form for form in ("parquet", "mds")}


def test_load_time_whole_word_masks_fall_on_words(corpus, dynamic_forms):
    """--masking dynamic stores jieba's words as HF's chinese_ref column; the loader masks whole words with it."""
    _, text, spans = corpus
    out = dynamic_forms["parquet"]
    table = pq.read_table(sorted(out.glob("seq128/train-*.parquet"))[0])
    assert "chinese_ref" in table.column_names
    rows = table.slice(0, 200).to_pylist()
    assert all(
        sorted(r["chinese_ref"]) == r["chinese_ref"] and max(r["chinese_ref"], default=0) < r["length"] for r in rows
    )
    assert sum(len(r["chinese_ref"]) for r in rows) > 0.3 * sum(r["length"] for r in rows)  # jieba's words
    share, touched = whole_share(load_time_segments(out)[0], text, spans)
    assert touched > 1000 and share >= 0.90, share


def test_mds_shards_carry_the_words_too(dynamic_forms):
    """The MDS form stores chinese_ref as well: the loader's whole-word batches from it are the Parquet form's."""
    index = json.loads((dynamic_forms["mds"] / "seq128" / "train" / "index.json").read_text())
    assert {tuple(s["column_names"]) for s in index["shards"]} == {
        ("chinese_ref", "input_ids", "language", "len", "next_sentence_label", "segment_b_start")
    }
    _, from_parquet = load_time_segments(dynamic_forms["parquet"], epochs=2)
    _, from_mds = load_time_segments(dynamic_forms["mds"], epochs=2)
    assert len(from_mds) == len(from_parquet) > 0
    for mds_batch, parquet_batch in zip(from_mds, from_parquet):
        assert mds_batch.keys() == parquet_batch.keys()
        assert all(np.array_equal(mds_batch[k], parquet_batch[k]) for k in mds_batch)


def test_a_users_dictionary_adds_words(tmp_path):
    text = "但冬季的东北季风却使得杜鹃花在台大宜然自得。"
    plain = run_continuations(text, SegmenterSpec())
    words = parse_user_dict("# 用户词典\n宜然自得 3 a\n", "dict")
    assert words == (("宜然自得", 3),)
    grouped = run_continuations(text, SegmenterSpec("jieba", words))
    at = text.index("宜然自得")
    assert grouped[at + 1 : at + 4].all() and not plain[at + 1 : at + 4].all()


def test_traditional_text_is_cut_where_its_simplified_parallel_is():
    traditional = [line.replace(" ", "") for line in GOLD_TRADITIONAL.read_text(encoding="utf-8").splitlines()]
    simplified = [line.replace(" ", "") for line in GOLD.read_text(encoding="utf-8").splitlines()]
    same = characters = 0
    for hant, hans in zip(traditional, simplified, strict=True):
        flags, parallel = run_continuations(hant, SegmenterSpec()), run_continuations(hans, SegmenterSpec())
        same += int((flags == parallel).sum())
        characters += len(flags)
    # jieba's own cuts of the traditional sentences agreed on 89.1% of the 15,853 ideographs
    assert characters == 15853 and same >= 0.998 * characters, same / characters


@pytest.mark.parametrize("word", ["臺大宜然自得", "台大宜然自得"])
@pytest.mark.parametrize(
    "text", ["但冬季的東北季風卻使得杜鵑花在臺大宜然自得。", "但冬季的东北季风却使得杜鹃花在台大宜然自得。"]
)
def test_a_users_word_is_found_in_either_script(word, text):
    grouped = run_continuations(text, SegmenterSpec("jieba", parse_user_dict(f"{word} 3\n", "dict")))
    at = text.index("大宜然") - 1  # every character before it is an ideograph, and the full stop after it is none
    assert not grouped[at] and grouped[at + 1 :].all() and len(grouped) == at + 6
    assert not run_continuations(text, SegmenterSpec())[at + 1 : at + 6].all()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--segmenter", "ltp"], "--segmenter ltp downloads its model at run time"),
        (["--segmenter", "thing"], "unknown --segmenter 'thing'; choose one of jieba, none"),
        (["--segmenter-dict", "missing.txt"], "--segmenter-dict missing.txt: cannot read it"),
    ],
)
def test_segmenters_that_cannot_work_are_one_line_before_any_work(tmp_path, capsys, flags, message):
    sample = Path(__file__).parent / "data" / "reference" / "sample_text.txt"
    vocab = Path(__file__).parent / "data" / "reference" / "bert-base-uncased-vocab.txt"
    argv = ["create", "--input", str(sample), "--vocab", str(vocab), "--output", str(tmp_path / "o")]
    assert run_cli([*argv, "--whole-word-mask", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "line, message",
    [
        ("词 -5", "the frequency after '词' is -5; a frequency is a count, from 0 to 18,446,744,073,709,551,615"),
        ("词 ²", "the frequency after '词' is '²', not a whole number"),
        ("词 18446744073709551616", "is 18,446,744,073,709,551,616; a frequency is a count"),
    ],
)
def test_a_dictionary_frequency_that_is_no_count_is_one_line_naming_it(tmp_path, capsys, line, message):
    sample = Path(__file__).parent / "data" / "reference" / "sample_text.txt"
    vocab = Path(__file__).parent / "data" / "reference" / "bert-base-uncased-vocab.txt"
    words = tmp_path / "words.txt"
    words.write_text(f"宜然自得 3\n{line}\n", encoding="utf-8")
    argv = ["create", "--input", str(sample), "--vocab", str(vocab), "--output", str(tmp_path / "o")]
    assert run_cli([*argv, "--whole-word-mask", "--segmenter-dict", str(words)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--segmenter-dict {words} line 2: " in err[0] and message in err[0], err
    assert not (tmp_path / "o").exists()


def test_mosaicml_streaming_reads_the_words_as_the_parquet_form_has_them(dynamic_forms):
    from test_mds_output import _READ_WITH_STREAMING, in_own_process, parquet_rows

    samples, _ = in_own_process(_READ_WITH_STREAMING, dynamic_forms["mds"], "train")
    rows = parquet_rows(dynamic_forms["parquet"], "train")
    assert len(samples) == len(rows) > 0
    assert all(s["chinese_ref"] == r["chinese_ref"] and s["input_ids"] == r["input_ids"] for s, r in zip(samples, rows))


def real_rows(frame: str) -> tuple:
    """Rows of real text as create lays them out, with jieba's words: the GSDSimp sentences (Chinese, a word every
    one or two characters) and the reference's sample text (English, words of ## pieces) in one bucket, as pairs
    ([CLS] A [SEP] B [SEP]) or packed ([SEP]s between documents)."""
    import random

    from bertcorpus.transforms.document_tokens import DocumentTokenizer
    from bertcorpus.transforms.instances import Bucket, InstanceBatch, create_instances_from_document
    from bertcorpus.transforms.masking import assemble, special_ids
    from bertcorpus.transforms.packing import assemble_packed, pack_sentences
    from bertcorpus.wordpiece.vocab import Vocab

    from conftest import VOCAB

    vocab = Vocab.load(str(VOCAB))
    special = special_ids(vocab)
    tokenizer = DocumentTokenizer(vocab, True, SegmenterSpec())
    lines = [line.replace(" ", "") for line in GOLD.read_text(encoding="utf-8").splitlines()]
    texts = ["\n\n".join(lines[i : i + 25]) for i in range(0, len(lines), 25)]
    english = (Path(__file__).parent / "data" / "reference" / "sample_text.txt").read_text(encoding="utf-8")
    texts += [d.replace("\n", "\n\n") for d in english.split("\n\n") if d.strip()]
    docs = []
    for i, text in enumerate(texts):
        found = tokenizer.tokenize(text)
        kept = found.lengths > 0
        docs.append((f"d{i}", found.ids, found.lengths[kept], found.word_continues))
    bucket = Bucket.from_documents(docs)
    assert bucket.word_continues is not None and bucket.word_continues.sum() > 5000
    if frame == "packed":
        packed = pack_sentences(bucket, len(bucket), 128, random.Random(3))
        return assemble_packed(bucket.tokens, packed, 128, special, bucket.word_continues), special
    batch = InstanceBatch()
    for _ in range(3):
        for doc in range(len(bucket)):
            create_instances_from_document(bucket, doc, 125, 0.1, random.Random(doc), batch)
    rows = assemble(bucket.tokens, batch.columns(), 128, special, np.random.default_rng(1), bucket.word_continues)
    return rows, special


def greedy_whole_words(rows, candidates, k, special, rng) -> tuple[np.ndarray, np.ndarray]:
    """The choice of whole words as a plain loop, row by row, word by word: the specification (create's static
    records were drawn by it). Each row's words in the order of one random key per position (ties by position),
    each taken whole where it still fits in the row's k predictions, until k are taken."""
    n, width = rows.input_ids.shape
    continuation = special.is_continuation[rows.input_ids] & candidates
    if rows.word_continues is not None:
        continuation |= rows.word_continues & candidates
    continuation[:, 1:] &= candidates[:, :-1]
    starts = candidates & ~continuation
    word_of = np.maximum.accumulate(np.where(starts, np.arange(width)[None, :], 0), axis=1)
    stops = starts | ~candidates
    chosen = np.zeros((n, width), bool)
    keys = rng.random((n, width))
    for i in range(n):
        first = np.flatnonzero(starts[i])
        row_stops = np.flatnonzero(stops[i])
        ends = row_stops[np.searchsorted(row_stops, first, side="right")]
        taken = 0
        for w in np.argsort(keys[i, first], kind="stable"):
            if taken >= k[i]:
                break
            if taken + ends[w] - first[w] <= k[i]:
                chosen[i, first[w] : ends[w]] = True
                taken += ends[w] - first[w]
    return chosen, word_of


@pytest.mark.parametrize("frame", ["pairs", "packed"])
def test_whole_words_are_chosen_for_all_rows_at_once_as_the_loop_chooses_them(frame):
    """The vectorised choice of whole words makes the loop's choices from the same draws, on real rows, for many
    seeds and budgets (15% up to 20, the loader's 30% up to 40, and budgets near a word's size), with numpy's
    generator (create), with row streams (the loader), and with keys of eight values only, so that words tie."""
    from bertcorpus.transforms.masking import _candidates, _choose_whole_words, num_to_predict
    from bertcorpus.transforms.row_streams import RowStreams

    rows, special = real_rows(frame)
    candidates = _candidates(rows)
    budgets = [
        num_to_predict(rows.length, 0.15, 20),
        np.minimum(num_to_predict(rows.length, 0.3, 40), candidates.sum(axis=1)),
        np.random.default_rng(0).integers(0, 4, len(rows.length)),
    ]
    compared = 0
    for seed in range(40):
        k = budgets[seed % 3]
        for generator in (
            np.random.default_rng,
            lambda s: RowStreams(np.arange(len(rows.length), dtype=np.uint64) + s),
            lambda s: CoarseKeys(np.random.default_rng(s)),
        ):
            chosen, word_of = _choose_whole_words(rows, candidates, k, special, generator(seed))
            expected, expected_word_of = greedy_whole_words(rows, candidates, k, special, generator(seed))
            # each chosen position names its word's first (the position whose draw decides the word's fate)
            assert np.array_equal(chosen, expected) and np.array_equal(word_of[chosen], expected_word_of[expected])
            compared += int(expected.sum())
    assert compared > 40 * 3 * 1000


class CoarseKeys:
    """A generator whose floats take eight values: most of a row's words tie with others."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def random(self, shape) -> np.ndarray:
        return np.floor(self.rng.random(shape) * 8) / 8
