"""`vocab --model bpe|unigram` on real text: the folder it writes (BERT's or RoBERTa's special tokens and templates,
reserved ids that encoding never gives), read by transformers' AutoTokenizer and by create --tokenizer with the same
ids, byte-identical in other processes and through the Beam counting, each language measured on its held-out text,
and bad combinations of flags refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from bertcorpus.transforms.document_tokens import DocumentTokenizer
from bertcorpus.transforms.sentence_spans import text_pieces
from bertcorpus.wordpiece.piece_encoder import PieceEncoder
from bertcorpus.wordpiece.pre_tokens import PreTokenBatch
from bertcorpus.wordpiece.subword_quality import measure_units
from bertcorpus.wordpiece.tokenizer_file import RESERVED, TokenizerFile, read_tokenizer_source

from conftest import DATA, TESTS, exit_status, run_cli
from wiki_fixtures import mixed_script_articles, write_articles

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a folder is read from disk; nothing is fetched
BOOKS = sorted((DATA / "books" / "gutenberg_utf8").glob("*.txt"))
# The shapes trained once for the module: ModernBERT's (byte-level BPE, BERT's specials, 83 reserved ids, a
# multiple of 64) and XLM-R's (Unigram, RoBERTa's specials).
SHAPES = {
    "bpe": ["--model", "bpe", "--special-tokens", "bert", "--reserved-tokens", "83", "--pad-to-multiple", "64"],
    "unigram": ["--model", "unigram", "--pad-to-multiple", "64"],
}


@pytest.fixture(scope="module")
def english(tmp_path_factory) -> Path:
    """Three real novels (1.1 MB) as JSONL documents of about 8 KB, cut at paragraph boundaries."""
    path = tmp_path_factory.mktemp("english") / "books.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for book in BOOKS:
            paragraphs = book.read_text(encoding="utf-8").split("\n\n")
            for n in range(0, len(paragraphs), 60):
                text = "\n\n".join(paragraphs[n : n + 60])
                f.write(json.dumps({"id": f"{book.stem}:{n}", "text": text, "language": "en"}) + "\n")
    return path


def train(corpus: Path, out: Path, *flags: str) -> Path:
    assert run_cli("vocab", "--input", corpus, "--output", out, "--vocab-size", "4000", *flags) == 0
    return out


@pytest.fixture(scope="module")
def folders(english, tmp_path_factory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("folders")
    return {model: train(english, where / model, *flags) for model, flags in SHAPES.items()}


@pytest.fixture(scope="module")
def articles() -> list[tuple[str, str, str]]:
    return mixed_script_articles()


def tokenizer_json(folder: Path) -> dict:
    return json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))


def auto_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def loaded(folder: Path) -> TokenizerFile:
    return TokenizerFile(read_tokenizer_source(str(folder)))


# ------------------------------------------------------------------------------------------- the two shapes


def test_bpe_with_bert_specials_is_modernberts_shape(folders):
    folder = folders["bpe"]
    config = tokenizer_json(folder)
    assert config["model"]["type"] == "BPE" and config["model"]["unk_token"] is None
    assert config["normalizer"] == {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
    pre = config["pre_tokenizer"]
    assert (pre["type"], pre["add_prefix_space"], pre["use_regex"]) == ("ByteLevel", False, True)
    assert config["decoder"]["type"] == "ByteLevel"
    added = {a["content"]: (a["id"], a["special"]) for a in config["added_tokens"]}
    tokens = loaded(folder).tokens
    assert len(tokens) % 64 == 0 and len(tokens) >= 4000
    assert tokens[:5] == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    first_reserved = tokens.index("[unused0]")
    assert tokens[first_reserved:] == tuple(f"[unused{i}]" for i in range(len(tokens) - first_reserved))
    assert len(tokens) - first_reserved >= 83
    assert all(added[t] == (i, True) for i, t in enumerate(tokens) if i < 5 or i >= first_reserved)
    hf = auto_tokenizer(folder)
    pair = hf("The first sentence.", "And the second one.")
    ids, types = pair["input_ids"], pair["token_type_ids"]
    assert ids[0] == 2 and ids[-1] == 3 and ids.count(3) == 2
    middle = ids.index(3)
    assert types == [0] * (middle + 1) + [1] * (len(ids) - middle - 1)
    assert (hf.cls_token, hf.sep_token, hf.pad_token, hf.unk_token, hf.mask_token) == (
        "[CLS]",
        "[SEP]",
        "[PAD]",
        "[UNK]",
        "[MASK]",
    )
    described = loaded(folder).describe()
    assert described["pair_template"] == "[CLS] $A [SEP] $B [SEP]" and described["second_segment_type"] == 1
    assert described["single_template"] == "[CLS] $A [SEP]" and described["marks_words"]


def test_unigram_with_roberta_specials_is_xlmrs_order(folders):
    folder = folders["unigram"]
    config = tokenizer_json(folder)
    assert config["model"]["type"] == "Unigram" and config["model"]["unk_id"] == 3
    assert not config["model"]["byte_fallback"]
    steps = [s["type"] for s in config["normalizer"]["normalizers"]]
    assert steps == ["Nmt", "NFKC", "Replace", "Strip"]
    pre = config["pre_tokenizer"]
    assert (pre["type"], pre["replacement"], pre["prepend_scheme"], pre["split"]) == ("Metaspace", "▁", "always", True)
    tokens = loaded(folder).tokens
    assert tokens[:4] == ("<s>", "<pad>", "</s>", "<unk>") and tokens[-1] == "<mask>" and len(tokens) % 64 == 0
    hf = auto_tokenizer(folder)
    pair = hf("The first sentence.", "And the second one.")
    ids = pair["input_ids"]
    assert ids[0] == 0 and ids[-1] == 2 and ids.count(2) == 3 and ids[ids.index(2) + 1] == 2
    assert "token_type_ids" not in pair or not any(pair["token_type_ids"])
    assert (hf.bos_token, hf.eos_token, hf.cls_token, hf.sep_token, hf.mask_token) == (
        "<s>",
        "</s>",
        "<s>",
        "</s>",
        "<mask>",
    )
    assert hf.mask_token_id == len(tokens) - 1 and hf.pad_token_id == 1
    described = loaded(folder).describe()
    assert described["pair_template"] == "<s> $A </s> </s> $B </s>" and described["second_segment_type"] == 0


@pytest.mark.parametrize("model", SHAPES)
def test_reserved_and_special_ids_are_never_produced_by_encoding(folders, articles, model):
    tokenizer = loaded(folders[model])
    apart = {i for i, t in enumerate(tokenizer.tokens) if RESERVED.fullmatch(t)} | set(tokenizer.specials.values())
    apart -= {tokenizer.specials["unk"]}  # a Unigram model's unknown token stands for characters it lacks
    assert len(apart) >= (87 if model == "bpe" else 4)
    text = "\n\n".join(t for _, t, _ in articles)
    texts = [text, "[unused0] <unused3> [MASK] <mask> <s> </s> [CLS] <unk> [UNK] <pad>"]
    produced = {i for t in texts for i in tokenizer.tokenizer.encode(t, add_special_tokens=False).ids}
    assert produced and not produced & apart  # create encodes a special token's text as text
    hf = auto_tokenizer(folders[model])
    assert not set(hf(text, add_special_tokens=False)["input_ids"]) & apart


# ------------------------------------------------------------------------------------------- create and HF


def sentence_documents(articles, where: Path) -> tuple[Path, list[str]]:
    """Real sentences of six scripts, each a document of its own (the first sentences of each article)."""
    sentences = []
    for _, text, _ in articles:
        sentences += [p.strip() for p in text_pieces(text)[0][:4] if 20 < len(p.strip()) < 300]
    path = where / "sentences.jsonl"
    path.write_text("".join(json.dumps({"id": f"s{i}", "text": s}) + "\n" for i, s in enumerate(sentences)))
    return path, sentences


@pytest.mark.parametrize("model", SHAPES)
def test_autotokenizer_gives_the_ids_create_writes_for_each_sentence(folders, articles, tmp_path, model):
    """create with the folder and no flag: every sentence (a document of its own) is in the records exactly as
    AutoTokenizer encodes it, special tokens included: records pack whole documents, each closed by a separator."""
    folder = folders[model]
    corpus, sentences = sentence_documents(articles, tmp_path)
    out = tmp_path / "records"
    argv = ["create", "--input", corpus, "--output", out, "--tokenizer", folder, "--eval-fraction", "0"]
    assert run_cli(*argv, "--masking", "dynamic", "--pair-objective", "none", "--num-shards", "1") == 0
    hf = auto_tokenizer(folder)
    expected = Counter(tuple(hf(s)["input_ids"]) for s in sentences)
    assert len(expected) > 200
    cls, sep = hf.cls_token_id, hf.sep_token_id
    found = Counter()
    for row in pq.read_table(out / "seq128" / "train-00000-of-00001.parquet").to_pylist():
        ids = row["input_ids"][: row["length"]]
        assert ids[0] == cls and ids[-1] == sep
        body = ids[1:]
        ends = [i for i, t in enumerate(body) if t == sep]
        for start, end in zip([0, *(e + 1 for e in ends[:-1])], ends):
            found[(cls, *body[start : end + 1])] += 1
    fitting = {ids: n for ids, n in expected.items() if len(ids) <= 128}  # longer ones are cut into instances
    assert len(fitting) > 200 and {ids: found[ids] for ids in fitting} == fitting
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tokenizer"]["sha256"] == loaded(folder).sha256


@pytest.mark.parametrize("model", SHAPES)
def test_create_reads_the_folder_with_whole_words_and_its_unit_cache(folders, articles, tmp_path, model):
    """Through create's DocumentTokenizer (its unit cache on), every sentence of real text in six scripts gets the ids
    AutoTokenizer gives it; and create masks whole words by the folder's Ġ or ▁ with no flag."""
    folder = folders[model]
    tokenizer = loaded(folder)
    assert PieceEncoder(tokenizer).cached
    documents = DocumentTokenizer(tokenizer)
    hf = auto_tokenizer(folder)
    pieces = 0
    for _, text, _ in articles:
        found = documents.tokenize(text)
        ends = np.cumsum(found.lengths)
        expected = [hf(p, add_special_tokens=False)["input_ids"] for p in text_pieces(text)[0]]
        assert [found.ids[e - n : e].tolist() for e, n in zip(ends, found.lengths)] == expected
        pieces += len(expected)
    assert pieces > 3000
    corpus = write_articles(tmp_path / "articles.jsonl", articles)
    argv = ["create", "--input", corpus, "--output", tmp_path / "wwm", "--tokenizer", folder, "--whole-word-mask"]
    assert run_cli(*argv, "--eval-fraction", "0", "--num-shards", "1", "--dupe-factor", "1") == 0
    manifest = json.loads((tmp_path / "wwm" / "manifest.json").read_text())
    assert manifest["tokenizer"]["marks_words"] and manifest["tokenizer"]["specials"]["mask"] in tokenizer.tokens


# ------------------------------------------------------------------------------------------- counting


@pytest.mark.parametrize("model", SHAPES)
def test_the_trainer_is_fed_the_pre_tokens_its_tokenizer_sees(folders, articles, model):
    """Counted in batches of distinct units, the pre-tokens are those the written tokenizer's own normaliser and
    pre-tokeniser give each piece create encodes: Ġ or ▁ before a word after a space, none before a text's first."""
    reference = Tokenizer.from_file(str(folders[model] / "tokenizer.json"))
    batch = PreTokenBatch(model, False, lambda t: text_pieces(t)[0], pre_tokens=True)
    expected = Counter()
    for _, text, _ in articles:
        batch.add(text)
        for piece in text_pieces(text)[0]:
            normal = reference.normalizer.normalize_str(piece)
            expected.update(w for w, _ in reference.pre_tokenizer.pre_tokenize_str(normal))
    counted = batch.drain()
    assert counted == expected and sum(counted.values()) > 250_000
    mark = "Ġ" if model == "bpe" else "▁"
    assert counted[f"{mark}the"] > 1000 and (model == "unigram" or counted["The"] > 100)


@pytest.mark.parametrize("model", SHAPES)
def test_the_held_out_measure_counts_the_tokens_create_writes(folders, articles, model):
    tokenizer = loaded(folders[model])
    units = PreTokenBatch(model, False, lambda t: text_pieces(t)[0], pre_tokens=False)
    for _, text, _ in articles:
        units.add(text)
    config = tokenizer_json(folders[model])
    quality = measure_units(Tokenizer.from_str(json.dumps(config)), units.drain(), tokenizer.specials["unk"])
    documents = DocumentTokenizer(tokenizer)
    tokens = sum(len(documents.tokenize(text).ids) for _, text, _ in articles)
    pieces = [piece for _, text, _ in articles for piece in text_pieces(text)[0]]
    words = sum(len(piece.split()) for piece in pieces)  # a CJK sentence after another is a word of its own
    assert (quality.pieces, quality.words) == (tokens, words) and tokens > 600_000


# ------------------------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("model", SHAPES)
def test_byte_identical_in_other_processes_and_through_the_beam_counting(folders, english, tmp_path, model):
    made = {}
    for seed, threads in (("1", "1"), ("4242", "2")):
        out = tmp_path / f"again-{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed, "RAYON_NUM_THREADS": threads}
        argv = [sys.executable, "-m", "bertcorpus", "vocab", "--input", str(english), "--output", str(out)]
        done = subprocess.run(
            [*argv, "--vocab-size", "4000", *SHAPES[model]],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=TESTS.parent,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        made[seed] = out
    beam = train(english, tmp_path / "beam", *SHAPES[model], "--count-with-beam", "--direct_running_mode=in_memory")
    for out in (*made.values(), beam):
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            assert (out / name).read_bytes() == (folders[model] / name).read_bytes(), (out, name)
    held = [json.loads((out / "manifest.json").read_text())["held_out"] for out in (folders[model], beam)]
    assert held[0] == held[1]


def test_sentencepiece_is_given_counts_within_its_budget(english, monkeypatch):
    """Its memory grows with the occurrences its counts add up to: past the budget they are divided by a power of two,
    as a uniform sample of that size would give them, and it learns what it would from those counts."""
    from bertcorpus.wordpiece import unigram_training

    batch = PreTokenBatch("unigram", False, lambda t: text_pieces(t)[0], pre_tokens=True)
    for line in english.read_text(encoding="utf-8").splitlines():
        batch.add(json.loads(line)["text"])
    counts = batch.drain()
    assert unigram_training.trainer_scale(2**24) == 1 and unigram_training.trainer_scale(2**24 + 1) == 2
    settings = dict(unk_token="<unk>", kept_apart=[], required_chars="", byte_fallback=False, character_coverage=1.0)
    monkeypatch.setattr(unigram_training, "TRAINER_WORD_BUDGET", 2**16)
    scaled = unigram_training.train_unigram(counts, 2000, **settings)
    assert scaled.scale == 4 and sum(counts.values()) > 2**17
    monkeypatch.setattr(unigram_training, "TRAINER_WORD_BUDGET", 2**24)
    divided = {word: (n + 2) // 4 for word, n in counts.items() if (n + 2) // 4}
    assert unigram_training.train_unigram(divided, 2000, **settings).pieces == scaled.pieces


# ------------------------------------------------------------------------------------------- languages


@pytest.fixture(scope="module")
def by_language(articles, tmp_path_factory) -> dict[str, dict]:
    where = tmp_path_factory.mktemp("languages")
    corpus = write_articles(where / "articles.jsonl", articles)
    made = {}
    for model, alpha in (("bpe", "1"), ("bpe", "0.3"), ("unigram", "1")):
        out = train(
            corpus,
            where / f"{model}-{alpha}",
            "--model",
            model,
            "--holdout-fraction",
            "0.2",
            "--language-sampling-alpha",
            alpha,
        )
        made[model, alpha] = json.loads((out / "manifest.json").read_text())
    return made


@pytest.mark.parametrize("model", SHAPES)
def test_each_language_is_measured_on_its_held_out_text(by_language, model):
    manifest = by_language[model, "1"]
    languages = manifest["languages"]
    assert set(languages) == {"en", "ja", "vi", "el", "uk", "zh"}
    assert sum(e["held_out_units"] for e in languages.values()) == manifest["held_out"]["units"]
    assert {lang for lang, e in languages.items() if e["cjk"]} == {"ja", "zh"}  # measured per character
    for entry in languages.values():
        assert entry["pieces_per_word"] > 0 and entry["pieces_per_character"] > 0
        assert 0 <= entry["unk_token_share"] < 0.05 and 0 <= entry["byte_fallback_share"] < 1
    english = languages["en"]
    assert english["pieces_per_word"] < min(languages[lang]["pieces_per_word"] for lang in ("el", "uk"))
    if model == "bpe":  # no unknown token: what the vocab lacks is bytes of a character
        assert all(e["unk_token_share"] == 0 for e in languages.values())
        assert english["byte_fallback_share"] < 0.01 < languages["zh"]["byte_fallback_share"]
    else:  # no byte fallback: what the vocab lacks is <unk>
        assert all(e["byte_fallback_share"] == 0 for e in languages.values())


def test_smoothed_counts_give_rare_languages_more_of_the_vocab(by_language):
    plain, smoothed = by_language["bpe", "1"]["languages"], by_language["bpe", "0.3"]["languages"]
    assert smoothed["en"]["scale"] < 1 < smoothed["el"]["scale"]
    for lang in ("el", "uk"):
        assert smoothed[lang]["pieces_per_word"] < plain[lang]["pieces_per_word"] - 0.3
    assert smoothed["en"]["pieces_per_word"] > plain["en"]["pieces_per_word"]


def test_byte_fallback_turns_the_unknown_characters_into_bytes(articles, english, tmp_path):
    out = train(english, tmp_path / "bytes", "--model", "unigram", "--byte-fallback")
    tokenizer = loaded(out)
    assert [f"<0x{b:02X}>" for b in range(256)] == [t for t in tokenizer.tokens if RESERVED.fullmatch(t)]
    chinese = next(text for doc_id, text, _ in articles if doc_id == "zh:0")
    pieces = [tokenizer.tokens[i] for i in tokenizer.tokenizer.encode(chinese, add_special_tokens=False).ids]
    assert "<unk>" not in pieces and sum(RESERVED.fullmatch(p) is not None for p in pieces) > 0.5 * len(pieces)
    assert tokenizer.tokenizer.decode(tokenizer.tokenizer.encode("语言 x<0x41>").ids) == "语言 x<0x41>"


# ------------------------------------------------------------------------------------------- bad combinations


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--model", "bpe", "--layout", "bert"], "--layout does not apply to --model bpe"),
        (["--model", "unigram", "--limit-alphabet", "500"], "--limit-alphabet does not apply to --model unigram"),
        (["--model", "bpe", "--fill-to-size"], "--fill-to-size does not apply to --model bpe"),
        (["--special-tokens", "bert"], "--special-tokens does not apply to --model wordpiece"),
        (["--model", "bpe", "--byte-fallback"], "--byte-fallback does not apply to --model bpe"),
        (["--model", "unigram", "--min-frequency", "3"], "--min-frequency does not apply to --model unigram"),
        (["--model", "bpe", "--vocab-size", "200"], "the 256 byte tokens alone need 256"),
        (["--model", "unigram", "--character-coverage", "0"], "--character-coverage must be in (0, 1], not 0"),
    ],
)
def test_a_bad_combination_is_one_line_before_any_work(tmp_path, capsys, flags, message):
    missing = tmp_path / "missing.jsonl"  # refused before the input is looked for
    assert exit_status("vocab", "--input", missing, "--output", tmp_path / "out", *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_a_tokenizer_folder_must_be_named_as_a_folder(tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    assert exit_status("vocab", "--input", missing, "--model", "unigram") == 2
    files = "tokenizer.json, tokenizer_config.json, special_tokens_map.json"
    expected = f"--model unigram writes a tokenizer's folder ({files}); name it with --output FOLDER"
    assert capsys.readouterr().err.strip().endswith(expected)
    out = tmp_path / "v" / "vocab.txt"
    assert exit_status("vocab", "--input", missing, "--model", "bpe", "--output", out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"name the folder, e.g. --output {out.parent}")
    (tmp_path / "file").write_text("")
    assert exit_status("vocab", "--input", missing, "--model", "bpe", "--output", tmp_path / "file") == 2
    assert "is a file; --model bpe writes a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
