"""`bertcorpus vocab` on real books: layouts, byte-identical reruns, tokenizer compatibility, Beam counting, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bertcorpus.pipeline.vocab.counting import VocabConfig, is_sampled, split_held_out
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.training import TrainingConfig, TrainingError, measure, train, trainer_scale
from bertcorpus.wordpiece.vocab import Vocab
from bertcorpus.wordpiece.word_counting import ChunkBatch, HeldOutWords, prune_plan

from conftest import DATA, SAMPLE_TEXT, run_cli
from full_tokenizer import FullTokenizerEquivalent, basic_tokens

BOOKS, MORE_BOOKS = DATA / "books", DATA / "books_more"
# The UTF-8 novels plus the Windows-1252 ones that are not the same titles again.
UTF8_BOOKS = sorted([*(BOOKS / "gutenberg_utf8").glob("*.txt"), *MORE_BOOKS.glob("*-0.txt")], key=lambda p: p.name)
CP1252_BOOKS = [
    MORE_BOOKS / "pg2641.txt",
    MORE_BOOKS / "pg37106.txt",
    BOOKS / "gutenberg_cp1252_with_header" / "pg64317.txt",
]
UNSEEN_BOOKS = sorted((BOOKS / "pg19_format").glob("*.txt"))  # never trained on


def book_text(path: Path) -> str:
    raw = path.read_bytes()
    return (raw.decode("cp1252") if path.name.startswith("pg") else raw.decode("utf-8")).replace("\r\n", "\n")


def sections(text: str, stem: str, size: int = 8000) -> list[tuple[str, str]]:
    """A book cut at paragraph boundaries into ~8 KB documents."""
    docs, part = [], []
    for paragraph in text.split("\n\n"):
        part.append(paragraph)
        if sum(map(len, part)) >= size:
            docs.append((f"{stem}:{len(docs)}", "\n\n".join(part)))
            part = []
    if part:
        docs.append((f"{stem}:{len(docs)}", "\n\n".join(part)))
    return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[tuple[str, str]]]:
    """~5.5 MB of real novels as JSONL documents, and the documents themselves."""
    docs = [d for book in UTF8_BOOKS + CP1252_BOOKS for d in sections(book_text(book), book.stem)]
    path = tmp_path_factory.mktemp("corpus") / "books.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for doc_id, text in docs:
            f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return path, docs


def held_out_texts(docs: list[tuple[str, str]]) -> list[str]:
    """The lines the default hold-out keeps out of training, plus books that were never in the corpus."""
    cfg = VocabConfig(inputs=[], output="", training=TrainingConfig())
    held = ["\n".join(split_held_out(doc_id, text, cfg)[1]) for doc_id, text in docs]
    held = [text for text in held if text]
    assert len(held) >= 3
    return held + [book_text(b) for b in UNSEEN_BOOKS] + [SAMPLE_TEXT.read_text(encoding="utf-8")]


def train_cli(corpus_path: Path, out: Path, *extra: str) -> Path:
    assert run_cli("vocab", "--input", corpus_path, "--output", out, "--vocab-size", "8000", *extra) == 0
    return out


@pytest.fixture(scope="module")
def uncased(corpus, tmp_path_factory) -> Path:
    return train_cli(corpus[0], tmp_path_factory.mktemp("uncased") / "vocab.txt")


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    """Two novels (~0.5 MB) for the slower paths."""
    path = tmp_path_factory.mktemp("small") / "small.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for book in (UTF8_BOOKS[0], UTF8_BOOKS[-1]):
            for doc_id, text in sections(book_text(book), book.stem):
                f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return path


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


# ------------------------------------------------------------------------------------------------ layouts


def test_bert_layout(uncased):
    tokens = lines(uncased)
    assert len(tokens) == 8000 and uncased.read_bytes().endswith(b"\n")
    assert tokens[0] == "[PAD]" and tokens[1:100] == [f"[unused{i}]" for i in range(99)]
    assert tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert tokens[104:999] == [f"[unused{i}]" for i in range(99, 994)]
    assert len(set(tokens)) == len(tokens)
    learned = tokens[999:]
    assert not any(t.startswith("[") and t.endswith("]") and len(t) > 1 for t in learned)
    assert {"the", "and", "##s", "##ing"} <= set(learned)


def test_compact_layout_and_reserved_slots(small_corpus, tmp_path):
    out = train_cli(small_corpus, tmp_path / "compact.txt", "--layout", "compact", "--reserved-tokens", "3")
    tokens = lines(out)
    assert 7900 < len(tokens) <= 8000  # what the trainer learned: no filler unless asked for
    assert tokens[:8] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]", "[unused2]"]
    assert not any(t.startswith("[unused") for t in tokens[8:])


def test_pad_to_a_multiple_of_64_with_unused_slots(small_corpus, tmp_path):
    size = ["--vocab-size", "8010"]
    plain = lines(train_cli(small_corpus, tmp_path / "plain" / "vocab.txt", *size))
    padded = lines(train_cli(small_corpus, tmp_path / "padded" / "vocab.txt", *size, "--pad-to-multiple", "64"))
    assert len(padded) == 8064 and len(set(padded)) == len(padded)
    assert padded[:8010] == plain  # the BERT layout and the learned tokens as without padding
    last = max(int(t[7:-1]) for t in plain if t.startswith("[unused"))
    assert padded[8010:] == [f"[unused{i}]" for i in range(last + 1, last + 55)]


def test_too_little_text_is_filled_with_unused_slots_only_when_asked(tmp_path, capsys):
    argv = ["vocab", "--input", SAMPLE_TEXT, "--layout", "compact", "--vocab-size", "3000", "--holdout-fraction", "0"]
    assert run_cli(*argv, "--output", tmp_path / "short" / "vocab.txt") == 0
    short = lines(tmp_path / "short" / "vocab.txt")
    assert 300 < len(short) < 2995 and not any(t.startswith("[unused") for t in short)
    assert "the vocab has" in capsys.readouterr().err
    manifest = json.loads((tmp_path / "short" / "manifest.json").read_text())
    assert manifest["tokens"]["not_learned"] == 3000 - len(short) and manifest["tokens"]["filler"] == 0

    out = tmp_path / "filled" / "vocab.txt"
    assert run_cli(*argv, "--output", out, "--fill-to-size") == 0
    tokens = lines(out)
    assert len(tokens) == 3000 and tokens[: len(short)] == short
    assert tokens[len(short) :] == [f"[unused{i}]" for i in range(3000 - len(short))]
    err = capsys.readouterr().err
    assert "padding" in err and "are [unusedN] filler" in err  # 86% filler: the warning above half
    manifest = json.loads(out.with_name("manifest.json").read_text())
    assert manifest["tokens"]["filler"] == 3000 - len(short) and manifest["tokens"]["filler_share"] > 0.5


def test_the_warning_and_the_summary_give_one_count_of_filler(tmp_path, capsys):
    """BERT's layout: its reserved [unusedN] slots and the --fill-to-size padding are one filler count, the same in
    the warning, the summary and the manifest."""
    out = tmp_path / "vocab.txt"
    argv = ["vocab", "--input", SAMPLE_TEXT, "--vocab-size", "30522", "--fill-to-size", "--output", out]
    assert run_cli(*argv) == 0
    captured = capsys.readouterr()
    filler = sum(t.startswith("[unused") for t in lines(out))
    manifest = json.loads(out.with_name("manifest.json").read_text())
    assert manifest["tokens"]["filler"] == filler and filler > manifest["tokens"]["padding"] > 0
    assert f"warning: {filler:,} of the vocab's 30,522 lines" in captured.err
    summary = next(line for line in (captured.out + captured.err).splitlines() if "lines (bert layout" in line)
    assert f"{filler:,} [unusedN] filler ({manifest['tokens']['padding']:,} --fill-to-size padding)" in summary


def test_loads_in_every_tokenizer(uncased):
    from tokenizers import BertWordPieceTokenizer, Tokenizer
    from tokenizers.models import WordPiece

    vocab = Vocab.load(str(uncased))
    assert [vocab.id_of(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 100, 101, 102, 103]
    assert Tokenizer(WordPiece.from_file(str(uncased), unk_token="[UNK]")).get_vocab() == vocab.ids
    hf = BertWordPieceTokenizer(str(uncased), lowercase=True)
    assert hf.get_vocab_size() == 8000
    text = SAMPLE_TEXT.read_text(encoding="utf-8")
    assert hf.encode(text, add_special_tokens=False).tokens == WordPieceTokenizer(vocab).tokenize(text)


# ------------------------------------------------------------------------------------------ determinism


def test_byte_identical_in_another_process(corpus, uncased, tmp_path):
    out = tmp_path / "again.txt"
    env = {**os.environ, "PYTHONHASHSEED": "4242", "RAYON_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertcorpus",
            "vocab",
            "--input",
            str(corpus[0]),
            "--output",
            str(out),
            "--vocab-size",
            "8000",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_bytes() == uncased.read_bytes()


def test_training_does_not_depend_on_count_order(corpus):
    batch = ChunkBatch(lowercase=True)
    for _, text in corpus[1][:200]:
        batch.add(text)
    counts = batch.drain()
    config = TrainingConfig(vocab_size=3000, layout="compact", reserved_tokens=0)
    first = train(counts, config).tokens
    assert train(dict(reversed(list(counts.items()))), config).tokens == first
    assert train(dict(sorted(counts.items())), config).tokens == first


def test_beam_count_gives_the_same_vocab(small_corpus, tmp_path):
    local = train_cli(small_corpus, tmp_path / "local" / "vocab.txt")
    beam = train_cli(
        small_corpus,
        tmp_path / "beam" / "vocab.txt",
        "--count-with-beam",
        "--counts-dir",
        tmp_path / "counts",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=2",
    )
    assert beam.read_bytes() == local.read_bytes()
    manifest = json.loads((tmp_path / "counts" / "manifest.json").read_text())
    assert manifest["tallies"]["documents_read"] == sum(1 for _ in open(small_corpus))
    assert manifest["pruned"]["words"] == 0


def test_beam_count_reads_a_large_file_in_spans_and_gives_the_same_vocab(corpus, uncased, tmp_path, monkeypatch):
    import hashlib

    from bertcorpus.pipeline.vocab import job as vocab_job

    spans = []
    read = vocab_job.read_documents

    def recording(path, input_format, stats, start=0, stop=-1):
        spans.append((start, stop))
        return read(path, input_format, stats, start, stop)

    monkeypatch.setattr(vocab_job, "read_documents", recording)  # the in-memory runner calls it in this process
    beam = train_cli(
        corpus[0],
        tmp_path / "beam.txt",
        "--count-with-beam",
        "--counts-dir",
        tmp_path / "counts",
        "--direct_running_mode=in_memory",
    )
    size = corpus[0].stat().st_size
    assert len(spans) >= 5 and sorted(spans)[0][0] == 0 and sorted(spans)[-1][1] == size
    assert beam.read_bytes() == uncased.read_bytes()
    manifest = json.loads((tmp_path / "counts" / "manifest.json").read_text())
    assert [(f["path"], f["size"], f["sha256"], f["documents"]) for f in manifest["inputs"]] == [
        (str(corpus[0]), size, hashlib.sha256(corpus[0].read_bytes()).hexdigest(), len(corpus[1]))
    ]


# ------------------------------------------------------------------------------------------ compatibility


@pytest.mark.parametrize("lowercase", [True, False])
def test_words_are_the_reference_basic_tokens(corpus, lowercase):
    """Training counts exactly the words that the reference BasicTokenizer produces."""
    texts = [text for _, text in corpus[1][:40]] + ["ΟΔΟΣ İstanbul naïve 東京大学 soft\u00adhyphen x\x01y"]
    batch = ChunkBatch(lowercase)
    for text in texts:
        batch.add(text)
    assert batch.drain() == Counter(w for text in texts for w in basic_tokens(text, lowercase))


@pytest.fixture(scope="module")
def cased(corpus, tmp_path_factory) -> Path:
    return train_cli(corpus[0], tmp_path_factory.mktemp("cased") / "vocab.txt", "--cased")


@pytest.mark.parametrize("which", ["uncased", "cased"])
def test_tokens_identical_to_the_reference_on_held_out_text(which, request, corpus):
    path = request.getfixturevalue(which)
    lowercase = which == "uncased"
    vocab = Vocab.load(str(path))
    ours = WordPieceTokenizer(vocab, lowercase)
    reference = FullTokenizerEquivalent(list(vocab.tokens), lowercase)
    total = unknown = 0
    for text in held_out_texts(corpus[1]):
        tokens = ours.tokenize(text)
        assert tokens == reference.tokenize(text)
        total += len(tokens)
        unknown += tokens.count("[UNK]")
    assert total > 50_000 and unknown / total < 0.0005


def test_cased_keeps_case_and_accents(cased):
    tokens = set(lines(cased))
    assert {"The", "Mr", "Elizabeth"} <= tokens and "the" in tokens


def test_measure_matches_tokenising_the_text(corpus, uncased):
    vocab = Vocab.load(str(uncased))
    texts = held_out_texts(corpus[1])
    batch = ChunkBatch(lowercase=True)
    for text in texts:
        batch.add(text)
    quality = measure(list(vocab.tokens), batch.drain())
    tokens = [t for text in texts for t in WordPieceTokenizer(vocab).tokenize(text)]
    words = sum(len(basic_tokens(text, True)) for text in texts)
    assert quality.words == words
    assert quality.pieces_per_word == pytest.approx(len(tokens) / words)
    assert quality.unk_rate == pytest.approx(tokens.count("[UNK]") / words)


# ------------------------------------------------------------------------------------------ round trip


def test_create_with_the_new_vocab_gives_valid_records(uncased, books_jsonl, tmp_path):
    import tensorflow as tf

    out = tmp_path / "records"
    assert (
        run_cli(
            "create",
            "--input",
            books_jsonl,
            "--vocab",
            uncased,
            "--output",
            out,
            "--dupe-factor",
            "1",
            "--num-buckets",
            "2",
            "--eval-fraction",
            "0",
        )
        == 0
    )
    spec = {
        "input_ids": tf.io.FixedLenFeature([128], tf.int64),
        "input_mask": tf.io.FixedLenFeature([128], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([128], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([20], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([20], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([20], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    tokens = lines(uncased)
    files = sorted(str(p) for p in (out / "seq128").glob("train-*.tfrecord"))
    parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files).take(50)]
    assert len(parsed) == 50
    real = 0
    for example in parsed:
        ids = example["input_ids"].numpy()
        n = int(example["input_mask"].numpy().sum())
        k = int(example["masked_lm_weights"].numpy().sum())
        restored = ids.copy()
        restored[example["masked_lm_positions"].numpy()[:k]] = example["masked_lm_ids"].numpy()[:k]
        words = [tokens[i] for i in restored[:n]]
        assert words[0] == "[CLS]" and words[-1] == "[SEP]" and words.count("[SEP]") == 2
        assert not ids[n:].any() and k >= 1 and ids.max() < len(tokens)
        assert not any(w.startswith("[unused") or w == "[PAD]" for w in words)
        real += n
    assert real > 50 * 60


# ------------------------------------------------------------------------------------------ bad input


def test_empty_corpus_is_refused_and_writes_nothing(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / "vocab.txt"
    assert run_cli("vocab", "--input", empty, "--output", out) == 2
    assert "no words to train on" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [empty]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--vocab-size", "1000"], "too small"),  # 999 special/reserved lines + the alphabet
        (["--vocab-size", "60", "--layout", "compact"], "too small"),
        (["--vocab-size", "999"], "leaves no room"),
        (["--reserved-tokens", "10"], "at least 99 reserved"),
        (["--sample-fraction", "0"], "--sample-fraction"),
        (["--pad-to-multiple", "0"], "--pad-to-multiple must be at least 1, not 0"),
    ],
)
def test_impossible_settings_are_refused_and_write_nothing(small_corpus, tmp_path, capsys, args, message):
    out = tmp_path / "vocab.txt"
    assert run_cli("vocab", "--input", small_corpus, "--output", out, *args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_existing_output_is_kept_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "vocab.txt"
    out.write_text("keep me\n")
    args = ["vocab", "--input", SAMPLE_TEXT, "--output", out, "--vocab-size", "1200"]
    assert run_cli(*args) == 2
    assert "already exists" in capsys.readouterr().err and out.read_text() == "keep me\n"
    assert run_cli(*args, "--overwrite") == 0
    assert len(lines(out)) == 1200
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]


def test_dry_run_builds_the_count_job_and_writes_nothing(small_corpus, tmp_path, capsys):
    (tmp_path / "in").mkdir()
    assert (
        run_cli(
            "vocab",
            "--input",
            small_corpus,
            tmp_path / "in" / "missing-*.jsonl",
            "--output",
            tmp_path / "out" / "vocab.txt",
            "--count-with-beam",
            "--counts-dir",
            tmp_path / "counts",
            "--dry_run=True",
        )
        == 0
    )
    assert "dry run" in capsys.readouterr().out and list(tmp_path.iterdir()) == [tmp_path / "in"]


def test_alphabet_too_big_for_the_vocab_is_a_training_error():
    with pytest.raises(TrainingError, match="alphabet alone needs"):
        train({"abc": 5, "xyz": 3}, TrainingConfig(vocab_size=9, layout="compact", reserved_tokens=0))


# ------------------------------------------------------------------------------------------ bounded memory


def test_prune_plan_keeps_ties_together():
    histogram = [(1, 500), (2, 100), (3, 10), (50, 2)]
    assert prune_plan(histogram, 1000) == (0, 0, 0)
    assert prune_plan(histogram, 112) == (1, 500, 500)
    assert prune_plan(histogram, 111) == (2, 600, 700)
    assert prune_plan(histogram, 12) == (2, 600, 700)


def test_held_out_sample_is_order_free():
    words = Counter({f"w{i}": 1 + i % 7 for i in range(5000)})
    items = list(words.items())
    a, b = HeldOutWords(max_words=1000), HeldOutWords(max_words=1000)
    for i in range(0, len(items), 300):
        a.add_counts(Counter(dict(items[i : i + 300])))
    b.add_counts(Counter(dict(reversed(items))))
    assert a.counts == b.counts and a.sampled and 250 < len(a.counts) <= 1000
    assert a.words == b.words == sum(words.values())


def test_pruning_keeps_the_alphabet(small_corpus, tmp_path):
    out = train_cli(small_corpus, tmp_path / "pruned" / "vocab.txt", "--max-words", "1000", "--holdout-fraction", "0")
    full = train_cli(small_corpus, tmp_path / "full" / "vocab.txt", "--holdout-fraction", "0")
    single = {t for t in lines(full) if len(t) == 1 or (t.startswith("##") and len(t) == 3)}
    assert single <= set(lines(out))


# ------------------------------------------------------------------------------------------ sampling


def summary_counts(text: str) -> dict[str, int]:
    rows = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition("  ")
        if value.strip().replace(",", "").isdigit():
            rows[key] = int(value.strip().replace(",", ""))
    return rows


def test_sampling_follows_id_hashes_and_max_documents_stops(small_corpus, tmp_path, capsys):
    ids = [json.loads(line)["id"] for line in open(small_corpus)]
    cfg = VocabConfig(inputs=[], output="", training=TrainingConfig(), sample_fraction=0.5)
    expected = sum(not is_sampled(i, cfg) for i in ids)
    assert (
        run_cli(
            "vocab",
            "--input",
            small_corpus,
            "--output",
            tmp_path / "a" / "vocab.txt",
            "--vocab-size",
            "2000",
            "--sample-fraction",
            "0.5",
        )
        == 0
    )
    rows = summary_counts(capsys.readouterr().out)
    assert rows["documents read"] == len(ids) and 0 < rows["not sampled"] == expected
    documents = json.loads((tmp_path / "a" / "manifest.json").read_text())["documents"]
    assert documents["sampled"] == len(ids) - expected
    assert (
        run_cli(
            "vocab",
            "--input",
            small_corpus,
            "--output",
            tmp_path / "b" / "vocab.txt",
            "--vocab-size",
            "2000",
            "--max-documents",
            "10",
        )
        == 0
    )
    rows = summary_counts(capsys.readouterr().out)
    assert rows["documents read"] == 10


def test_trainer_scale_only_beyond_its_limits():
    assert trainer_scale(2**30, 2**30 - 1) == 1
    assert trainer_scale(2**30 + 1, 0) == 2
    assert trainer_scale(10, 2**31) == 4
