"""The vocab's files and the checks around them: a byte-order mark and missing special tokens in vocab.txt, the
tokenizer.json and tokenizer_config.json beside it (tokenising exactly as `create` does), the manifest with its
held-out sample, the casing and [UNK] checks for `create`, and plain progress lines where stderr is no terminal."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_tokenizer import EDGE_CASES

from bertcorpus.pipeline.engines.progress import Progress
from bertcorpus.pipeline.vocab.files import recorded_unk_share
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.vocab import Vocab, VocabError
from bertcorpus.wordpiece.vocab_checks import casing_mismatch, unk_share_mismatch, vocab_casing

from conftest import DATA, SAMPLE_TEXT, TESTS, VOCAB, run_cli

BOOKS = sorted((DATA / "books" / "gutenberg_utf8").glob("*.txt"))
UNSEEN_BOOKS = sorted((DATA / "books" / "pg19_format").glob("*.txt"))
FILES = ["manifest.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Three real novels, each one document of ~20,000 lines (~1.1 MB of JSONL)."""
    path = tmp_path_factory.mktemp("corpus") / "novels.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for book in BOOKS:
            f.write(json.dumps({"id": book.stem, "text": book.read_text(encoding="utf-8")}) + "\n")
    return path


def make_vocab(corpus: Path, folder: Path, *extra: str) -> Path:
    out = folder / "vocab.txt"
    assert run_cli("vocab", "--input", corpus, "--output", out, "--vocab-size", "3000", *extra) == 0
    return out


@pytest.fixture(scope="module")
def uncased(corpus, tmp_path_factory) -> Path:
    return make_vocab(corpus, tmp_path_factory.mktemp("uncased"))


@pytest.fixture(scope="module")
def cased(corpus, tmp_path_factory) -> Path:
    return make_vocab(corpus, tmp_path_factory.mktemp("cased"), "--cased")


def manifest_of(vocab_path: Path) -> dict:
    return json.loads((vocab_path.parent / "manifest.json").read_text(encoding="utf-8"))


def unseen_texts() -> list[str]:
    """Real text no vocab here was trained on, and the tokenizer's edge cases but the one holding "[MASK]"."""
    return (
        [b.read_text(encoding="utf-8") for b in UNSEEN_BOOKS]
        + [SAMPLE_TEXT.read_text(encoding="utf-8")]
        + [t for t in EDGE_CASES if "[MASK]" not in t]
    )


# ------------------------------------------------------------------------------------------ reading vocab.txt


def test_a_byte_order_mark_leaves_pad_special():
    raw = VOCAB.read_bytes()
    plain, marked = Vocab.from_bytes(raw), Vocab.from_bytes(b"\xef\xbb\xbf" + raw)
    assert marked.tokens == plain.tokens and marked.id_of("[PAD]") == 0
    # Random replacement draws from these: with the mark, [PAD] was a regular token and id 0 could be drawn.
    assert 0 not in marked.regular_token_ids()
    assert marked.regular_token_ids().tolist() == plain.regular_token_ids().tolist()


def test_a_byte_order_mark_is_read_alike_from_a_file(tmp_path):
    marked = tmp_path / "vocab.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + VOCAB.read_bytes())
    assert Vocab.load(str(marked)).tokens == Vocab.load(str(VOCAB)).tokens


@pytest.mark.parametrize("dropped", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
def test_a_vocab_without_a_special_token_is_refused_naming_it(dropped):
    tokens = [t for t in VOCAB.read_text(encoding="utf-8").splitlines() if t != dropped]
    with pytest.raises(VocabError, match=rf"lacks \{dropped[:-1]}\]; a BERT vocab needs \[PAD\], \[UNK\]"):
        Vocab.from_bytes(("\n".join(tokens) + "\n").encode())


def test_create_refuses_a_vocab_without_pad_in_one_line(tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{t}\n" for t in VOCAB.read_text(encoding="utf-8").splitlines()[1:]), encoding="utf-8")
    assert run_cli("create", "--input", SAMPLE_TEXT, "--vocab", vocab, "--output", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lacks [PAD]" in err and "Traceback" not in err


# ------------------------------------------------------------------------------- tokenizer files and manifest


def test_the_files_beside_the_vocab_and_the_manifest_that_lists_them(uncased):
    assert sorted(p.name for p in uncased.parent.iterdir()) == FILES
    manifest = manifest_of(uncased)
    assert manifest["job"] == "vocab" and manifest["vocab_file"] == "vocab.txt"
    assert manifest["outputs"] == {
        name: {
            "bytes": (uncased.parent / name).stat().st_size,
            "sha256": hashlib.sha256((uncased.parent / name).read_bytes()).hexdigest(),
        }
        for name in FILES
        if name != "manifest.json"
    }
    config = json.loads((uncased.parent / "tokenizer_config.json").read_text())
    assert config["do_lower_case"] is True and config["mask_token"] == "[MASK]"


@pytest.mark.parametrize("which", ["uncased", "cased"])
def test_tokenizer_json_gives_our_ids(which, request):
    from tokenizers import Tokenizer

    path = request.getfixturevalue(which)
    vocab = Vocab.load(str(path))
    ours = WordPieceTokenizer(vocab, lowercase=which == "uncased")
    hf = Tokenizer.from_file(str(path.parent / "tokenizer.json"))
    cls, sep = vocab.id_of("[CLS]"), vocab.id_of("[SEP]")
    for text in unseen_texts():
        ids = ours.encode(text).tolist()
        assert hf.encode(text, add_special_tokens=False).ids == ids
        assert hf.encode(text).ids == [cls, *ids, sep]
    # Like transformers' BERT tokenizers, it takes the special tokens' text as those tokens; `create` does not.
    assert hf.encode("a [MASK] b", add_special_tokens=False).tokens == ["a", "[MASK]", "b"]
    assert ours.tokenize("a [MASK] b")[:2] == ["a", "["] and "[MASK]" not in ours.tokenize("a [MASK] b")


def test_tokenizer_json_of_the_original_vocab_gives_our_ids(tmp_path):
    from tokenizers import Tokenizer

    from bertcorpus.pipeline.vocab.files import tokenizer_files

    (tmp_path / "tokenizer.json").write_bytes(tokenizer_files(VOCAB.read_bytes(), lowercase=True)["tokenizer.json"])
    hf = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    ours = WordPieceTokenizer(Vocab.load(str(VOCAB)))
    for text in unseen_texts() + ["ΟΔΟΣ ΣΑΣ ΑΣ'Σ"]:  # final sigmas, which HF's own lower-casing does not make
        assert hf.encode(text, add_special_tokens=False).ids == ours.encode(text).tolist()


def test_a_second_vocab_into_the_same_folder_is_refused(corpus, uncased, capsys):
    out = uncased.parent / "vocab-cased.txt"
    assert run_cli("vocab", "--input", corpus, "--output", out, "--cased") == 2
    err = capsys.readouterr().err
    assert f"{uncased.parent / 'tokenizer.json'} already exists" in err and "folder of its own" in err
    assert not out.exists()


def test_a_folder_holding_another_jobs_manifest_is_refused_even_with_overwrite(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "manifest.json").write_text('{"job": "extract-books"}')
    assert run_cli("vocab", "--input", SAMPLE_TEXT, "--output", tmp_path / "out" / "vocab.txt", "--overwrite") == 2
    assert "manifest.json belongs to another job (extract-books)" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["manifest.json"]


# ------------------------------------------------------------------------------------------- held-out sample


def test_the_held_out_sample_is_lines_from_every_document(corpus, uncased, tmp_path, capsys):
    held = manifest_of(uncased)["held_out"]
    lines = sum(1 for book in BOOKS for line in book.read_text(encoding="utf-8").split("\n") if line.strip())
    assert held["documents"] == len(BOOKS) == 3
    assert 0.005 * lines < held["lines"] < 0.02 * lines and held["words"] > 1000
    assert 0 <= held["unk_token_share"] <= held["unk_word_rate"] < 0.001
    # The summary says how big the sample is, and both counting paths draw the same lines.
    beam = make_vocab(corpus, tmp_path / "beam", "--count-with-beam")
    row = next(line for line in capsys.readouterr().out.splitlines() if "held-out sample" in line)
    assert f"{held['lines']:,} lines" in row and f"from 3 documents, {held['words']:,} words" in row
    assert manifest_of(beam)["held_out"] == held
    assert beam.read_bytes() == uncased.read_bytes()


def test_held_out_draws_are_the_same_one_by_one_and_at_once():
    from bertcorpus.pipeline.vocab.counting import _draws_at_once, _draws_one_by_one

    below = 2**64 // 100
    for seed in (0, 1, 2**63 + 12345, 2**64 - 1):
        chosen = _draws_at_once(seed, 5000, below)
        assert 20 < len(chosen) < 80  # about 1% of 5,000
        for n in (1, 31, 32, 33, 1000, 5000):
            assert _draws_one_by_one(seed, n, below) == [i for i in chosen if i < n] == _draws_at_once(seed, n, below)


# ------------------------------------------------------------------------------------- checks for `create`


def test_casing_of_the_original_and_of_a_cased_vocab(cased):
    uncased_tokens = Vocab.load(str(VOCAB)).tokens
    cased_tokens = Vocab.load(str(cased)).tokens
    assert vocab_casing(uncased_tokens).cased is False and vocab_casing(cased_tokens).cased is True
    assert casing_mismatch(uncased_tokens, lowercase=True, vocab_name="v") is None
    assert casing_mismatch(cased_tokens, lowercase=False, vocab_name="v") is None
    assert "looks uncased" in casing_mismatch(uncased_tokens, lowercase=False, vocab_name="v")
    assert "looks cased" in casing_mismatch(cased_tokens, lowercase=True, vocab_name="v")
    assert vocab_casing(["[PAD]", "[UNK]", "The"]).cased is None  # too few tokens to tell


def test_a_chinese_vocab_made_here_is_uncased_for_all_its_special_tokens(tmp_path, capsys):
    # bert-base-chinese's layout holds <S> and <T>: among the few whole words of Latin letters a Chinese vocab has,
    # their capitals made create warn that the vocab looked cased.
    vocab = tmp_path / "zh" / "vocab.txt"
    assert run_cli("vocab", "--input", DATA / "zh" / "zhwiki-hanyu-plain.txt", "--output", vocab) == 0
    tokens = Vocab.load(str(vocab)).tokens
    assert tuple(tokens[104:106]) == ("<S>", "<T>")
    assert vocab_casing(tokens).upper_tokens == 0 and casing_mismatch(tokens, lowercase=True, vocab_name="v") is None
    assert vocab_casing(["<S>", "<T>", "</s>", "<unk>", *(["word"] * 30)]).upper_tokens == 0


def unk_share(vocab: Vocab, lowercase: bool) -> tuple[int, int]:
    """([UNK] pieces, all pieces) of the start of each novel, as `create` would count them in a first bucket."""
    tokenizer = WordPieceTokenizer(vocab, lowercase)
    ids = [i for book in BOOKS for i in tokenizer.encode(book.read_text(encoding="utf-8")[:100_000]).tolist()]
    return ids.count(vocab.id_of("[UNK]")), len(ids)


def test_an_unk_share_far_above_the_vocabs_own_is_reported(uncased):
    vocab = Vocab.load(str(uncased))
    recorded = recorded_unk_share(str(uncased), vocab.sha256)
    assert recorded == manifest_of(uncased)["held_out"]["unk_token_share"]
    unk, total = unk_share(vocab, lowercase=False)  # an uncased vocab with --no-do-lower-case
    assert unk / total > 0.02
    assert "are [UNK]" in unk_share_mismatch(unk, total, recorded, str(uncased))
    assert unk_share_mismatch(*unk_share(vocab, lowercase=True), recorded, str(uncased)) is None
    assert unk_share_mismatch(50, 1000, recorded, str(uncased)) is None  # too few tokens and [UNK]s to judge
    # A small text in a script the vocab lacks: few wordpieces, but 100 [UNK]s are far beyond chance.
    assert "10.00% of the wordpieces (100 of 1,000) are [UNK]" in unk_share_mismatch(100, 1000, recorded, "v")


def test_the_original_vocab_records_no_share_and_is_judged_by_a_fixed_limit():
    vocab = Vocab.load(str(VOCAB))
    assert recorded_unk_share(str(VOCAB), vocab.sha256) is None
    assert "records no share" in unk_share_mismatch(*unk_share(vocab, lowercase=False), None, "v")
    assert unk_share_mismatch(*unk_share(vocab, lowercase=True), None, "v") is None


def test_a_changed_vocab_does_not_use_the_recorded_share(uncased, tmp_path):
    assert recorded_unk_share(str(uncased), "0" * 64) is None


# ---------------------------------------------------------------------------------------------- progress


def test_a_piped_run_prints_plain_progress_lines(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertcorpus",
            "vocab",
            "--input",
            str(SAMPLE_TEXT),
            "--output",
            str(tmp_path / "vocab.txt"),
            "--vocab-size",
            "1200",
            "--layout",
            "compact",
        ],
        cwd=TESTS.parent,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"\r" not in done.stdout + done.stderr
    assert b"counting words: " in done.stderr


def test_a_terminal_gets_a_live_bar():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    with Progress(1000, "counting words", stream=terminal) as progress:
        progress.update(1000)
    assert "\r" in terminal.getvalue() and "100%" in terminal.getvalue()
