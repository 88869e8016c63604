"""create --tokenizer: a published tokenizer.json used as it is, on real text, for the three families today's
encoders use (byte-level BPE, SentencePiece Unigram with Metaspace, WordPiece), and ModernBERT's shape as `vocab
--model bpe --special-tokens bert` trains it: ids exactly as Tokenizer.encode gives them, the tokenizer's own
templates and special tokens, masking from its ordinary tokens by its words, and each kind of bad tokenizer refused
in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from bertcorpus.transforms.document_tokens import DocumentTokenizer
from bertcorpus.transforms.masking import special_ids
from bertcorpus.transforms.sentence_spans import text_pieces
from bertcorpus.wordpiece.tokenizer_file import RESERVED, TokenizerFile, read_tokenizer_source

from conftest import DATA, exit_status, run_cli
from tokenizer_files import tokenizer_folder
from wiki_fixtures import mixed_script_articles, write_articles

# family → (published tokenizer, the special tokens its files do not name); None: the one `vocab` trains here
FAMILIES = {
    "byte-level-bpe": ("anthropic-claude-v1", {"cls": "<SOS>", "sep": "<EOT>", "mask": "<META>"}),
    "unigram": ("xlmr-shape", {}),
    "wordpiece": ("bert-base-uncased", {}),
    "modernbert-shape": (None, {}),
}


def flags(specials: dict[str, str]) -> list[str]:
    return [w for role, token in specials.items() for w in ("--special-token", f"{role}={token}")]


def modernbert_shape(where: Path) -> Path:
    """ModernBERT's shape, byte-level BPE with BERT's special tokens and 83 reserved ids, as `vocab` trains it on
    three real novels (1.1 MB; a few thousand tokens, seconds)."""
    out = where / "modernbert-shape"
    flags = ["--model", "bpe", "--special-tokens", "bert", "--reserved-tokens", "83", "--pad-to-multiple", "64"]
    books = DATA / "books" / "gutenberg_utf8"
    assert run_cli("vocab", "--input", books, "--output", out, "--vocab-size", "3000", *flags) == 0
    return out


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("tokenizers")
    return {
        family: tokenizer_folder(name, where) if name else modernbert_shape(where)
        for family, (name, _) in FAMILIES.items()
    }


@pytest.fixture(scope="module")
def articles() -> list[tuple[str, str, str]]:
    return mixed_script_articles()


@pytest.fixture(scope="module")
def documents(articles) -> list[tuple[str, str]]:
    """Real text of several scripts: (id, text)."""
    return [(doc_id, text) for doc_id, text, _ in articles]


@pytest.fixture(scope="module")
def documents_jsonl(tmp_path_factory, articles) -> Path:
    return write_articles(tmp_path_factory.mktemp("docs") / "docs.jsonl", articles)


def loaded(folders, family: str) -> TokenizerFile:
    return TokenizerFile(read_tokenizer_source(str(folders[family]), FAMILIES[family][1]))


def reference_tokenizer(folder: Path) -> Tokenizer:
    """The tokenizer as the tokenizers library loads it, a special token's text encoded as text."""
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.encode_special_tokens = True
    return tok


@pytest.mark.parametrize("family", FAMILIES)
def test_ids_are_what_tokenizer_encode_gives_for_each_piece_of_real_text(folders, documents, family):
    tokenizer = DocumentTokenizer(loaded(folders, family))
    reference = reference_tokenizer(folders[family])
    differing = pieces_seen = 0
    for _, text in documents:
        pieces, starts = text_pieces(text)
        # the pieces are the text as it stands, from its first sentence to its last: nothing dropped or respaced
        assert "".join(pieces) == text[starts[0] : starts[0] + len("".join(pieces))]
        assert "".join(pieces).strip() == text.strip()
        found = tokenizer.tokenize(text)
        ends = np.cumsum(found.lengths)
        for piece, end, length in zip(pieces, ends, found.lengths):
            expected = reference.encode(piece, add_special_tokens=False).ids
            differing += found.ids[end - length : end].tolist() != expected
        pieces_seen += len(pieces)
    assert pieces_seen > 3000
    assert differing == 0


def test_a_sentence_keeps_the_mark_of_its_leading_space(folders):
    """Byte-level BPE: a sentence after another has its Ġ, the first of the document none, one after a paragraph
    break its newlines; Unigram: ▁ before each."""
    text = "The first one. The second one.\n\nA new paragraph."
    bpe = DocumentTokenizer(loaded(folders, "byte-level-bpe"))
    tokens = loaded(folders, "byte-level-bpe").tokens
    found = bpe.tokenize(text)
    starts = np.concatenate(([0], np.cumsum(found.lengths)[:-1]))
    first, second, third = (tokens[found.ids[s]] for s in starts)
    assert (first, second, third[0]) == ("The", "ĠThe", "Ċ")  # a line break, in one token or two
    unigram = DocumentTokenizer(loaded(folders, "unigram"))
    found = unigram.tokenize(text)
    starts = np.concatenate(([0], np.cumsum(found.lengths)[:-1]))
    assert all(loaded(folders, "unigram").tokens[found.ids[s]].startswith("▁") for s in starts)


def test_templates_and_special_tokens_come_from_the_tokenizer(folders):
    xlmr, bert, bpe = loaded(folders, "unigram"), loaded(folders, "wordpiece"), loaded(folders, "byte-level-bpe")
    assert xlmr.describe()["pair_template"] == "<s> $A </s> </s> $B </s>"
    assert xlmr.describe()["single_template"] == "<s> $A </s>"
    assert xlmr.layout.b_type == 0
    assert {r: xlmr.tokens[i] for r, i in xlmr.specials.items()} == {
        "bos": "<s>",
        "cls": "<s>",
        "eos": "</s>",
        "sep": "</s>",
        "unk": "<unk>",
        "pad": "<pad>",
        "mask": "<mask>",
    }
    assert bert.describe()["pair_template"] == "[CLS] $A [SEP] $B [SEP]" and bert.layout.b_type == 1
    assert bert.tokens[bert.specials["mask"]] == "[MASK]"  # by its name: the file has no config beside it
    # no post-processor: BERT's layout from the cls and sep tokens the flags name
    assert bpe.describe()["pair_template"] == "<SOS> $A <EOT> $B <EOT>"


def test_random_replacements_are_ordinary_tokens_only(folders):
    for family in FAMILIES:
        tokenizer = loaded(folders, family)
        regular = set(special_ids(tokenizer).regular.tolist())
        added = {a["id"] for a in tokenizer.config["added_tokens"]}
        assert not regular & added
        assert not regular & set(tokenizer.specials.values())
        assert not any(RESERVED.fullmatch(tokenizer.tokens[i]) for i in regular)
        assert len(regular) > 0.9 * len(tokenizer)
    bert = loaded(folders, "wordpiece")
    assert "[unused0]" not in {bert.tokens[i] for i in special_ids(bert).regular}


def create(tmp_path, folders, family, inputs, *extra) -> Path:
    out = tmp_path / f"out-{family}"
    argv = ["create", "--input", *map(str, inputs), "--output", out, "--tokenizer", folders[family]]
    assert run_cli(*argv, *flags(FAMILIES[family][1]), "--eval-fraction", "0", *extra) == 0
    return out


def document_ids(folders, family, documents) -> np.ndarray:
    """Every document's ids, one after another, -1 between documents."""
    tokenizer = DocumentTokenizer(loaded(folders, family))
    return np.concatenate([np.append(tokenizer.tokenize(text).ids, -1) for _, text in documents])


def is_run_of(segment: np.ndarray, stream: np.ndarray, frequency: np.ndarray) -> bool:
    """Whether segment is a contiguous run of stream; the search starts from its rarest token."""
    if not len(segment):
        return True
    anchor = int(np.argmin(frequency[segment]))
    for at in np.flatnonzero(stream == segment[anchor]) - anchor:
        if at >= 0 and np.array_equal(stream[at : at + len(segment)], segment):
            return True
    return False


@pytest.mark.parametrize("family", ["byte-level-bpe", "unigram", "modernbert-shape"])
def test_every_segment_of_every_instance_is_a_run_of_its_documents_ids(
    tmp_path, folders, documents, documents_jsonl, family
):
    out = create(tmp_path, folders, family, [documents_jsonl], "--masking", "dynamic", "--num-shards", "1")
    tokenizer = loaded(folders, family)
    before, between, after = tokenizer.layout.pair_frame
    rows = pq.read_table(out / "seq128" / "train-00000-of-00001.parquet").to_pylist()
    assert (
        pq.read_schema(out / "seq128" / "train-00000-of-00001.parquet").field("input_ids").type.value_type == "uint16"
    )
    stream = document_ids(folders, family, documents)
    frequency = np.bincount(stream[stream >= 0], minlength=len(tokenizer))
    lay = tokenizer.layout
    not_runs = 0
    for row in rows[:400]:
        ids, b, n = np.array(row["input_ids"]), row["segment_b_start"], row["length"]
        assert tuple(ids[:before]) == lay.prefix and tuple(ids[n - after : n]) == lay.suffix
        assert tuple(ids[b - between : b]) == lay.middle
        not_runs += not is_run_of(ids[before : b - between], stream, frequency)
        not_runs += not is_run_of(ids[b : n - after], stream, frequency)
    assert not_runs == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tokenizer"]["sha256"] == tokenizer.sha256 and manifest["vocab"] is None
    # the output's own copy loads in transformers as the same tokenizer
    from transformers import AutoTokenizer

    copy = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    assert copy.mask_token == tokenizer.tokens[tokenizer.specials["mask"]]
    assert (
        copy("Some text, to compare.")["input_ids"]
        == reference_tokenizer(folders[family]).encode("Some text, to compare.").ids
    )


def static_records(path: Path) -> dict[str, np.ndarray]:
    """A TFRecord file's examples as 128/20 feature arrays, read by the loader's own decoder."""
    from bertcorpus.transforms.example_decoding import joined_records, parse_examples
    from bertcorpus.transforms.tfrecord import feature_spec, iter_tfrecords

    with path.open("rb") as f:
        records = list(iter_tfrecords(f))
    return parse_examples(*joined_records(records), feature_spec(128, 20))


def test_static_records_in_roberta_s_template_have_one_token_type_and_exact_masking_shares(
    tmp_path, folders, documents_jsonl
):
    out = create(tmp_path, folders, "unigram", [documents_jsonl], "--num-shards", "1", "--dupe-factor", "3")
    tokenizer = loaded(folders, "unigram")
    special = special_ids(tokenizer)
    f = static_records(out / "seq128" / "train-00000-of-00001.tfrecord")
    real = f["input_mask"].sum(axis=1)
    assert not f["segment_ids"].any()  # RoBERTa's template: every token of type 0
    weights = f["masked_lm_weights"] > 0
    predicted = weights.sum(axis=1)
    assert (predicted == np.minimum(20, np.maximum(1, np.round(real * 0.15)))).all()
    positions, originals = f["masked_lm_positions"][weights], f["masked_lm_ids"][weights]
    rows = np.broadcast_to(np.arange(len(real))[:, None], weights.shape)[weights]
    shown = f["input_ids"][rows, positions]
    n = len(shown)
    mask = shown == special.mask
    kept = shown == originals
    assert abs(mask.mean() - 0.8) < 4 * np.sqrt(0.16 / n)
    assert abs(kept.mean() - 0.1) < 4 * np.sqrt(0.09 / n) + 0.01  # a random draw of the same token is kept too
    replaced = shown[~mask & ~kept]
    assert np.isin(replaced, special.regular).all()
    # never a special token of the template among the predictions
    assert not np.isin(originals, [*tokenizer.layout.prefix, *tokenizer.layout.middle, *tokenizer.layout.suffix]).any()


@pytest.mark.parametrize("family", ["unigram", "modernbert-shape"])
def test_whole_words_follow_the_tokenizer_s_word_marks(tmp_path, folders, documents_jsonl, family):
    out = create(tmp_path, folders, family, [documents_jsonl], "--num-shards", "1", "--whole-word-mask")
    tokenizer = loaded(folders, family)
    special = special_ids(tokenizer)
    f = static_records(out / "seq128" / "train-00000-of-00001.tfrecord")
    weights = f["masked_lm_weights"] > 0
    touched = whole = decided_once = 0
    for i in range(len(weights)):
        original = f["input_ids"][i].copy()
        positions = f["masked_lm_positions"][i][weights[i]]
        original[positions] = f["masked_lm_ids"][i][weights[i]]
        specials = np.isin(original, [*tokenizer.layout.prefix, *tokenizer.layout.middle, *tokenizer.layout.suffix])
        real = np.arange(128) < f["input_mask"][i].sum()
        starts = ~special.is_continuation[original] | specials | ~real
        starts[1:] |= specials[:-1]
        if special.breaks_word is not None:  # a byte-level BPE's word after a line break starts without its Ġ
            starts[1:] |= special.breaks_word[original[:-1]]
        word = np.cumsum(starts)
        chosen = np.zeros(128, bool)
        chosen[positions] = True
        for w in np.unique(word[chosen]):
            members = (word == w) & real & ~specials
            touched += 1
            whole += bool(chosen[members].all())
            shown = f["input_ids"][i][members]
            decided_once += len(set((shown == special.mask).tolist())) == 1
    assert touched > 1000
    assert whole / touched >= 0.99
    assert decided_once / touched >= 0.99  # one 80/10/10 decision per word


def test_a_vocab_past_65_536_ids_is_stored_in_32_bits(tmp_path, folders, documents_jsonl):
    from tokenizers import AddedToken

    wide = tmp_path / "wide"
    wide.mkdir()
    tok = Tokenizer.from_file(str(folders["unigram"] / "tokenizer.json"))
    tok.add_tokens([AddedToken(f"<extra{i}>", normalized=False) for i in range(70_000)])
    tok.save(str(wide / "tokenizer.json"))
    for name in ("tokenizer_config.json",):
        (wide / name).write_bytes((folders["unigram"] / name).read_bytes())
    folders = {**folders, "wide": wide}
    out = tmp_path / "out-wide"
    argv = ["create", "--input", documents_jsonl, "--output", out, "--tokenizer", wide, "--eval-fraction", "0"]
    assert run_cli(*argv, "--masking", "dynamic", "--num-shards", "1") == 0
    parquet = out / "seq128" / "train-00000-of-00001.parquet"
    assert pq.read_schema(parquet).field("input_ids").type.value_type == "uint32"
    narrow = create(tmp_path, folders, "unigram", [documents_jsonl], "--masking", "dynamic", "--num-shards", "1")
    same = pq.read_table(narrow / "seq128" / "train-00000-of-00001.parquet").column("input_ids").to_pylist()
    assert pq.read_table(parquet).column("input_ids").to_pylist() == same  # the same ids, wider


# ------------------------------------------------------------------------------------------------ bad input


def refused(capsys, *argv) -> str:
    assert exit_status(*argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_bad_tokenizers_are_refused_in_one_line_before_any_work(tmp_path, capsys, folders, documents_jsonl):
    base = ["create", "--input", documents_jsonl, "--output", tmp_path / "out"]
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": ')
    assert "is not a tokenizer.json" in refused(capsys, *base, "--tokenizer", broken)
    older = tmp_path / "older"
    older.mkdir()
    (older / "vocab.json").write_text("{}")
    (older / "merges.txt").write_text("")
    message = refused(capsys, *base, "--tokenizer", older)
    assert "vocab.json and merges.txt" in message and "save_pretrained" in message
    sentencepiece = tmp_path / "spm"
    sentencepiece.mkdir()
    (sentencepiece / "sentencepiece.bpe.model").write_bytes(b"\x00")
    assert "sentencepiece.bpe.model (a SentencePiece model)" in refused(capsys, *base, "--tokenizer", sentencepiece)
    message = refused(
        capsys, *base, "--tokenizer", folders["unigram"], "--vocab", DATA / "reference" / "bert-base-uncased-vocab.txt"
    )
    assert "not allowed with argument" in message
    message = refused(capsys, *base, "--tokenizer", folders["byte-level-bpe"], *flags({"cls": "<SOS>", "sep": "<EOT>"}))
    assert "names no mask token" in message
    assert "is not in its vocabulary" in refused(
        capsys, *base, "--tokenizer", folders["byte-level-bpe"], *flags({"mask": "<nothing>"})
    )
    assert not (tmp_path / "out").exists()


def test_special_tokens_written_in_a_document_stay_text_and_blank_documents_are_skipped(tmp_path, articles, folders):
    """A Unigram vocabulary holds its special tokens as pieces that outscore any other, so its model makes "</s>"
    in a document the end-of-sequence id: the records carry the unknown token there instead, counted, and a
    document of whitespace alone is skipped as empty."""
    doc_id, text, language = articles[0]
    quoted = text + " In HTML-like markup it is written <s> ... </s>, and a gap as <mask>."
    inputs = write_articles(
        tmp_path / "docs.jsonl", [(doc_id, quoted, language), ("blank", "   \n\n \t", language), *articles[1:4]]
    )
    tokenizer = loaded(folders, "unigram")
    found = DocumentTokenizer(tokenizer).tokenize(quoted)
    unk, specials = tokenizer.specials["unk"], {tokenizer.specials[r] for r in ("cls", "sep", "pad", "mask")}
    assert found.specials_as_text == 3 and not specials & set(found.ids.tolist())
    assert (found.ids == unk).sum() >= 3
    out = create(tmp_path, folders, "unigram", [inputs], "--masking", "dynamic", "--num-shards", "1")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["special_tokens_as_text"] == 3
    assert manifest["documents"]["skipped"] == {"empty": 1}
    lay = tokenizer.layout
    before, between, after = lay.pair_frame
    for row in pq.read_table(out / "seq128" / "train-00000-of-00001.parquet").to_pylist():
        ids, b, n = row["input_ids"], row["segment_b_start"], row["length"]
        inner = ids[before : b - between] + ids[b : n - after]
        assert not specials & set(inner)


def test_whole_word_masking_needs_a_tokenizer_that_marks_words(tmp_path, capsys, documents, documents_jsonl):
    """A BPE that splits at whitespace and marks nothing (no Ġ, ▁ or ##) cannot say where a word starts."""
    from tokenizers import models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "[PAD]"]
    tok.train_from_iterator(
        (text for _, text in documents), trainers.BpeTrainer(vocab_size=2000, special_tokens=specials)
    )
    tok.post_processor = processors.BertProcessing(
        ("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]"))
    )
    path = tmp_path / "unmarked.json"
    tok.save(str(path))
    base = ["create", "--input", documents_jsonl, "--output", tmp_path / "out", "--tokenizer", path]
    assert "marks no word boundaries" in refused(capsys, *base, "--whole-word-mask")
    assert run_cli(*base, "--eval-fraction", "0", "--num-shards", "1") == 0  # without it, the tokenizer serves


def test_a_tokenizer_with_more_ids_than_the_records_store_is_refused(
    tmp_path, capsys, monkeypatch, folders, documents_jsonl
):
    """The limits are those of the formats (2**32 for Parquet); lowered here below a real tokenizer's 1,002 ids."""
    from bertcorpus.pipeline.create import command

    monkeypatch.setitem(command.ID_LIMITS, "parquet", 1000)
    base = ["create", "--input", documents_jsonl, "--output", tmp_path / "out", "--masking", "dynamic"]
    assert "has 1,002 ids, more than parquet records can store (1,000)" in refused(
        capsys, *base, "--tokenizer", folders["unigram"]
    )


def test_reuse_and_the_loader_notice_a_changed_tokenizer(tmp_path, capsys, folders, documents_jsonl):
    from bertcorpus import LoaderError, PretrainingLoader

    folder = tmp_path / "tok"
    folder.mkdir()
    for p in folders["unigram"].iterdir():
        (folder / p.name).write_bytes(p.read_bytes())
    argv = ["create", "--input", documents_jsonl, "--output", tmp_path / "out", "--tokenizer", folder]
    argv += ["--masking", "dynamic", "--eval-fraction", "0", "--num-shards", "1", "--reuse"]
    assert run_cli(*argv) == 0
    capsys.readouterr()
    assert run_cli(*argv) == 0
    assert "is up to date" in capsys.readouterr().out
    (folder / "tokenizer.json").write_text((folder / "tokenizer.json").read_text() + "\n")
    assert run_cli(*argv) == 0
    assert "its tokenizer.sha256 differs" in capsys.readouterr().out
    PretrainingLoader(tmp_path / "out", seq_length=128, batch_size=8)[0]  # loads as made
    copy = tmp_path / "out" / "tokenizer" / "tokenizer.json"
    copy.write_text(copy.read_text() + " ")
    with pytest.raises(LoaderError, match="is not the one the ids came from"):
        PretrainingLoader(tmp_path / "out", seq_length=128, batch_size=8)


def test_stats_inspect_and_plan_take_a_tokenizer_output_with_no_flag(tmp_path, capsys, folders):
    """The vocab size, the special tokens and the decoding come from the output's own copy of its tokenizer."""
    from conftest import DATA

    run = tmp_path / "run"
    wiki = DATA / "wiki" / "enwiki-2014-sample-truncated.xml.bz2"
    assert run_cli("extract-wiki", "--input", wiki, "--output", run / "wiki") == 0
    argv = ["create", "--input", run / "wiki", "--output", run / "records", "--tokenizer", folders["unigram"]]
    assert run_cli(*argv, "--masking", "dynamic", "--num-shards", "1") == 0
    capsys.readouterr()
    assert run_cli("stats", run, "--output", tmp_path / "card") == 0
    card = json.loads((tmp_path / "card" / "stats.json").read_text())
    words = card["unknown_words"]
    assert words["unknown_pieces"] == "<unk>" and 1.5 < words["pieces_per_word"] < 5
    assert card["records"]["records"]["vocab"]["size"] == 1002 and not card.get("warnings")
    assert "pieces per word" in (tmp_path / "card" / "report.html").read_text()
    capsys.readouterr()
    assert run_cli("inspect", run / "records" / "seq128" / "train-00000-of-00001.parquet", "-n", "1") == 0
    shown = capsys.readouterr().out
    assert "<s> ▁" in shown and "</s> </s> ||" in shown
    planned = ["plan", "create", "--input", run / "wiki", "--output", tmp_path / "planned"]
    assert run_cli(*planned, "--tokenizer", folders["unigram"]) == 0


def test_masks_drawn_at_load_time_follow_the_tokenizer(tmp_path, folders, documents_jsonl):
    """The loader's masks on a tokenizer.json's instances: the rate of the tokens that are no special token,
    80/10/10 from its ordinary tokens, and each word of its Metaspace marks masked whole, with one decision."""
    from bertcorpus import PretrainingLoader

    out = create(tmp_path, folders, "unigram", [documents_jsonl], "--masking", "dynamic", "--num-shards", "1")
    tokenizer = loaded(folders, "unigram")
    special = special_ids(tokenizer)
    loader = PretrainingLoader(out, seq_length=128, batch_size=64, whole_word_mask=True, layout="huggingface")
    specials = [*tokenizer.layout.prefix, *tokenizer.layout.middle, *tokenizer.layout.suffix]
    touched = whole = once = masked = candidates = 0
    shown_all, labels_all = [], []
    for batch in (loader[i] for i in range(min(len(loader), 40))):
        labels, shown = batch["labels"], batch["input_ids"]
        assert not batch["token_type_ids"].any()  # RoBERTa's template: one token type
        for row in range(len(labels)):
            original = np.where(labels[row] >= 0, labels[row], shown[row])
            real = batch["attention_mask"][row] > 0
            is_special = np.isin(original, specials)
            candidates += int((real & ~is_special).sum())
            chosen = labels[row] >= 0
            masked += int(chosen.sum())
            assert not (chosen & is_special).any()
            starts = ~special.is_continuation[original] | is_special | ~real
            starts[1:] |= is_special[:-1]
            word = np.cumsum(starts)
            for w in np.unique(word[chosen]):
                members = (word == w) & real & ~is_special
                touched += 1
                whole += bool(chosen[members].all())
                once += len(set((shown[row][members] == special.mask).tolist())) == 1
            shown_all.append(shown[row][chosen])
            labels_all.append(labels[row][chosen])
    assert abs(masked / candidates - 0.15) < 0.02  # whole words round the budget down a little, never up
    assert touched > 500 and whole / touched >= 0.99 and once / touched >= 0.99
    shown_all, labels_all = np.concatenate(shown_all), np.concatenate(labels_all)
    is_mask = shown_all == special.mask
    assert abs(is_mask.mean() - 0.8) < 0.03
    replaced = shown_all[~is_mask & (shown_all != labels_all)]
    assert len(replaced) and np.isin(replaced, special.regular).all()


@pytest.mark.slow  # a tiny model trained 600 steps: about a minute
def test_a_tiny_model_learns_from_a_modernbert_shape_output(tmp_path, folders):
    """Records made with ModernBERT's shape of tokenizer, masks drawn at load time and no pair objective, teach the
    trainer's tiny model: on the eval split it beats both the most frequent masked token (accuracy) and the
    tokens' frequencies alone (loss), by many standard errors."""
    pytest.importorskip("tensorflow")
    from bertcorpus.trainer.loader import PretrainingLoader
    from bertcorpus.trainer.train import TrainConfig

    from conftest import SAMPLE_TEXT, book_sections

    books = tmp_path / "books.jsonl"
    books.write_text("".join(json.dumps({"id": i, "text": text}) + "\n" for i, text in book_sections()))
    data = tmp_path / "records"
    argv = ["create", "--input", books, SAMPLE_TEXT, "--tokenizer", folders["modernbert-shape"], "--output", data]
    flags = ["--dupe-factor", "5", "--eval-fraction", "0.1", "--masking", "dynamic", "--pair-objective", "none"]
    assert run_cli(*argv, *flags) == 0
    run = tmp_path / "run"
    assert (
        run_cli(
            "train",
            "--data",
            data,
            "--output",
            run,
            "--config",
            "tiny",
            "--batch-size",
            "8",
            "--steps",
            "600",
            "--log-every",
            "100",
            "--checkpoint-every",
            "1000",
        )
        == 0
    )

    def masked_targets(split: str) -> np.ndarray:
        loader = PretrainingLoader(data, seq_length=128, split=split, batch_size=8, seed=TrainConfig.seed)
        return np.concatenate([b["masked_lm_ids"][b["masked_lm_weights"] > 0] for b in loader])

    vocab_size = len(loaded(folders, "modernbert-shape"))
    train, held_out = masked_targets("train"), masked_targets("eval")
    frequencies = (np.bincount(train, minlength=vocab_size) + 1) / (len(train) + vocab_size)
    frequency_loss = -np.log(frequencies[held_out]).mean()
    results = json.loads((run / "eval_results.json").read_text())
    assert json.loads((run / "config.json").read_text())["model"]["vocab_size"] == vocab_size
    assert results["masked_lm_baseline_accuracy"] == pytest.approx(np.bincount(held_out).max() / len(held_out))
    # 0.015 is five standard errors of an accuracy near 0.09 over the ~10,000 masked tokens of the eval split
    assert results["masked_lm_accuracy"] > results["masked_lm_baseline_accuracy"] + 0.015, results
    assert results["masked_lm_loss"] < frequency_loss - 0.1, (results, frequency_loss)


def test_the_tokenizer_s_bytes_are_in_the_job_once(tmp_path, folders):
    """The 1.8 MB tokenizer.json goes into the job's graph only in the step that makes the side input every step
    reads: Beam pickles a step three times as it builds the graph and again in every bundle's processor, so a copy
    inside each of the five steps that use it cost seconds of CPU a run."""
    import apache_beam as beam

    from bertcorpus.pipeline.create.config import CreateConfig
    from bertcorpus.pipeline.create.job import CreatePretrainingData
    from bertcorpus.pipeline.create.job_vocab import read_job_tokenizer

    folder = folders["byte-level-bpe"]
    specials = FAMILIES["byte-level-bpe"][1]
    vocab, sha = read_job_tokenizer(str(folder), specials, dry_run=False, rendering=False)
    assert len(vocab.data) > 1_500_000
    cfg = CreateConfig(inputs=[], output=str(tmp_path / "o"), vocab=None, tokenizer=str(folder), masking="dynamic")
    pipeline = beam.Pipeline()
    _ = pipeline | CreatePretrainingData(cfg, vocab, sha, [str(tmp_path / "none.jsonl")])
    transforms = pipeline.to_runner_api().components.transforms.values()
    large = sorted(t.unique_name for t in transforms if len(t.spec.payload) > 100_000)
    # Create and its parts: the one step that a worker runs of them holds the bytes (the FlatMap)
    assert large and all(name.startswith("CreatePretrainingData/carry the vocab") for name in large), large
    assert sum(1 for name in large if "FlatMap" in name) == 1
