"""create's recipes end to end on real text: the Parquet form of dynamic masking read by plain pyarrow, sentence-order
pairs, packed sentences without a pair objective, length bins, their manifests, and the static default's bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bertcorpus.transforms.sentences import document_sentences
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.vocab import Vocab

from conftest import BOOKS, SAMPLE_TEXT, VOCAB, run_cli

LOCAL = ["--runner", "DirectRunner"]
TOKENS = Vocab.load(str(VOCAB)).tokens
CLS, SEP, MASK = (TOKENS.index(t) for t in ("[CLS]", "[SEP]", "[MASK]"))


def create(out: Path, *flags, inputs=(*BOOKS, SAMPLE_TEXT)) -> dict:
    assert run_cli("create", "--input", *inputs, "--vocab", VOCAB, "--output", out, *LOCAL, *flags) == 0
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dynamic")
    create(
        out,
        "--masking",
        "dynamic",
        "--seq-configs",
        "128:20,512:80",
        "--bin-size",
        "64",
        "--num-shards",
        "3",
        "--eval-fraction",
        "0.1",
    )
    return out


def rows(out: Path, pattern: str) -> list[dict]:
    return [row for path in sorted(out.glob(pattern)) for row in pq.read_table(path).to_pylist()]


def test_dynamic_masking_writes_unmasked_instances_that_plain_pyarrow_reads(dynamic):
    manifest = json.loads((dynamic / "manifest.json").read_text())
    assert manifest["form"] == {
        "masking": "dynamic",
        "pair_objective": "nsp",
        "bin_size": 64,
        "file_format": "parquet",
        "label": "random_next",
        "whole_word_mask": False,
        "word_segmenter": None,
        "language_sampling_alpha": 1.0,
    }
    assert manifest["config"]["dupe_factor"] == 1  # dynamic masking's default: one pass, masked every epoch
    assert (dynamic / "vocab.txt").read_bytes() == VOCAB.read_bytes() and manifest["vocab"]["copy"] == "vocab.txt"
    for name, length in (("seq128", 128), ("seq512", 512)):
        for split in ("train", "eval"):
            entry = manifest["outputs"][name][split]
            files = sorted((dynamic / name).glob(f"{split}-*.parquet"))
            assert [s["path"] for s in entry["shards"]] == [f"{name}/{f.name}" for f in files]
            schema = pq.read_schema(files[0])
            assert [(f.name, str(f.type)) for f in schema] == [
                ("input_ids", "list<element: uint16>"),
                ("segment_b_start", "uint16"),
                ("next_sentence_label", "uint8"),
                ("length", "uint16"),
                ("language", "string"),  # the sample's documents carry none: und
            ]
            found = rows(dynamic, f"{name}/{split}-*.parquet")
            assert {r["language"] for r in found} == {"und"}
            assert len(found) == entry["instances"] == sum(s["records"] for s in entry["shards"]) > 100
            for shard, f in zip(entry["shards"], files):
                assert shard["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
            labels = np.array([r["next_sentence_label"] for r in found])
            assert entry["label_share"] == pytest.approx(labels.mean(), abs=1e-6)
            edges = np.minimum((np.array([r["length"] for r in found]) - 1) // 64 * 64 + 64, length)
            # by width, as numbers: [{"width": 64, "instances": n}, {"width": 128, ...}]
            assert entry["bins"] == [{"width": int(e), "instances": int((edges == e).sum())} for e in np.unique(edges)]
            for r in found:
                ids, b = r["input_ids"], r["segment_b_start"]
                assert len(ids) == r["length"] <= length and ids[0] == CLS and ids[b - 1] == SEP == ids[-1]
                assert MASK not in ids and ids.count(SEP) == 2 and 2 <= b < r["length"]


def test_dynamic_output_is_byte_identical_when_rerun(dynamic, tmp_path):
    again = tmp_path / "again"
    create(
        again,
        "--masking",
        "dynamic",
        "--seq-configs",
        "128:20,512:80",
        "--bin-size",
        "64",
        "--num-shards",
        "3",
        "--eval-fraction",
        "0.1",
    )
    files = sorted(p.relative_to(dynamic) for p in dynamic.rglob("*.parquet"))
    assert files and all((dynamic / f).read_bytes() == (again / f).read_bytes() for f in files)


def test_dynamic_output_takes_a_tenth_of_the_disk_of_static_masks_times_ten(tmp_path, books_jsonl):
    flags = ("--num-shards", "2", "--eval-fraction", "0")
    static = create(tmp_path / "static", *flags, inputs=[books_jsonl])["outputs"]["seq128"]["train"]
    dynamic = create(tmp_path / "dynamic", "--masking", "dynamic", *flags, inputs=[books_jsonl])["outputs"]["seq128"][
        "train"
    ]
    per_instance = [sum(s["bytes"] for s in out["shards"]) / out["instances"] for out in (static, dynamic)]
    assert static["instances"] / dynamic["instances"] == pytest.approx(10, rel=0.01)
    assert per_instance[0] / per_instance[1] > 1.5  # unpadded and compressed: smaller per instance too
    assert sum(s["bytes"] for s in static["shards"]) / sum(s["bytes"] for s in dynamic["shards"]) > 15


@pytest.fixture(scope="module")
def documents_tokens() -> list[np.ndarray]:
    """The token ids of every input document, as create tokenises them."""
    tokenizer = WordPieceTokenizer(Vocab.load(str(VOCAB)), True)
    docs = [book.read_text(encoding="utf-8") for book in BOOKS]
    texts = [document_sentences(text) for text in docs]
    texts += [block.splitlines() for block in SAMPLE_TEXT.read_text().split("\n\n")]
    return [tokenizer.encode_sentences(sentences)[0] for sentences in texts]


def occurs(needle: list[int], haystacks: list[np.ndarray]) -> list[tuple[int, int]]:
    """(document, position) of every occurrence of the ids in the documents."""
    found = []
    for d, hay in enumerate(haystacks):
        for start in np.flatnonzero(hay[: len(hay) - len(needle) + 1] == needle[0]).tolist():
            if hay[start : start + len(needle)].tolist() == needle:
                found.append((d, start))
    return found


def test_sop_pairs_really_follow_each_other_and_half_are_swapped(tmp_path, documents_tokens):
    out = tmp_path / "sop"
    manifest = create(
        out,
        "--masking",
        "dynamic",
        "--pair-objective",
        "sop",
        "--num-shards",
        "2",
        "--eval-fraction",
        "0",
        "--dupe-factor",
        "2",
    )
    assert manifest["form"]["label"] == "swapped" and "random_next_share" not in manifest["outputs"]["seq128"]["train"]
    found = rows(out, "seq128/train-*.parquet")
    labels = np.array([r["next_sentence_label"] for r in found])
    assert len(labels) > 2000 and labels.sum() * 2 == len(labels)  # exactly half: each bucket balances its own
    assert manifest["outputs"]["seq128"]["train"]["label_share"] == 0.5
    assert manifest["outputs"]["seq128"]["train"]["sop_draws_skipped"]["single_sentence_document"] > 0
    for r in found[:300]:
        ids, b = r["input_ids"], r["segment_b_start"]
        first, second = ids[1 : b - 1], ids[b:-1]
        earlier, later = (second, first) if r["next_sentence_label"] else (first, second)
        # Both come from one document, the later one after the earlier; untruncated, right after it.
        places = {(d, p + len(earlier)) for d, p in occurs(earlier, documents_tokens)}
        follows = [(d, p) for d, p in occurs(later, documents_tokens) if any(d == d2 and p >= p2 for d2, p2 in places)]
        assert follows
        if r["length"] < 128:
            assert set(follows) & places


def test_static_sop_records_parse_with_the_reference_spec(tmp_path):
    import tensorflow as tf

    from bertcorpus.trainer.data import feature_spec

    out = tmp_path / "sop"
    create(out, "--pair-objective", "sop", "--num-shards", "2", "--eval-fraction", "0", "--dupe-factor", "2")
    records = [r.numpy() for r in tf.data.TFRecordDataset(sorted(map(str, out.glob("seq128/train-*.tfrecord"))))]
    parsed = tf.io.parse_example(records, feature_spec(128, 20))
    labels = parsed["next_sentence_labels"].numpy()[:, 0]
    assert labels.sum() * 2 == len(labels) > 2000
    ids, positions = parsed["input_ids"].numpy(), parsed["masked_lm_positions"].numpy()
    weights = parsed["masked_lm_weights"].numpy()
    shown = np.take_along_axis(ids, positions, 1)[weights > 0]
    assert abs((shown == MASK).mean() - 0.8) < 0.02


def test_no_pair_objective_packs_one_segment_across_documents(tmp_path):
    out = tmp_path / "none"
    manifest = create(
        out, "--masking", "dynamic", "--pair-objective", "none", "--num-shards", "2", "--eval-fraction", "0"
    )
    assert manifest["form"]["label"] == "unused" and manifest["outputs"]["seq128"]["train"]["label_share"] is None
    found = rows(out, "seq128/train-*.parquet")
    assert all(r["next_sentence_label"] == 0 and r["segment_b_start"] == r["length"] for r in found)
    assert all(r["input_ids"][0] == CLS and r["input_ids"][-1] == SEP for r in found)
    # Instances are full up to the next whole sentence; many hold pieces of several documents.
    assert np.mean([r["length"] for r in found]) > 100
    assert np.mean([r["input_ids"].count(SEP) > 1 for r in found]) > 0.1
    real = sum(r["length"] - r["input_ids"].count(SEP) - 1 for r in found)
    assert real == manifest["counts"]["tokens"]  # every token of every document, once


def test_a_long_context_config_keeps_long_documents_whole(tmp_path):
    """--seq-configs L:P:MIN (NeoBERT's 1024+ subsets): the long config reads every token of every document of MIN
    tokens or more, in order within each document, and of no shorter one; the short config reads them all."""
    out = tmp_path / "phases"
    flags = ["--masking", "dynamic", "--pair-objective", "none", "--eval-fraction", "0", "--num-shards", "2"]
    manifest = create(out, *flags, "--seq-configs", "128:39,512:154:300", "--record-format", "mds")
    tokenizer = WordPieceTokenizer(Vocab.load(str(VOCAB)), True)
    blocks = [block for path in (*BOOKS, SAMPLE_TEXT) for block in path.read_text(encoding="utf-8").split("\n\n")]
    sizes = [len(tokenizer.encode_sentences([line for line in block.splitlines() if line])[0]) for block in blocks]
    documents_tokens = [n for n in sizes if n]  # as the reference text format reads them: a blank line between
    long_docs = [n for n in documents_tokens if n >= 300]
    entry = manifest["outputs"]["seq512"]["train"]
    assert manifest["config"]["seq_configs"] == ["128:39", "512:154:300"]
    assert entry["min_document_tokens"] == 300
    assert entry["documents_below_min"] == len(documents_tokens) - len(long_docs) > 0
    assert "min_document_tokens" not in manifest["outputs"]["seq128"]["train"]
    from bertcorpus.transforms.instance_mds import MdsColumns, read_samples

    columns = MdsColumns.for_output(30522, "none", "int64")
    real = {}
    for name in ("seq128", "seq512"):
        count = 0
        for shard in manifest["outputs"][name]["train"]["shards"]:
            data = (out / shard["path"]).read_bytes()
            ids, _, length, *_ = read_samples(data, 0, shard["records"], columns)
            count += int(length.sum()) - int((ids == SEP).sum()) - len(length)  # less [CLS] and every [SEP]
        real[name] = count
    assert real["seq128"] == manifest["counts"]["tokens"] == sum(documents_tokens)
    assert real["seq512"] == sum(long_docs)


def test_lengths_past_uint16_are_refused_before_the_run(tmp_path, capsys):
    argv = ["create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", tmp_path / "o", "--masking", "dynamic"]
    assert run_cli(*argv, "--seq-configs", "70000:20") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "bertcorpus create: error: --seq-configs: a length of 70,000 is past the 65,535 tokens that dynamic "
        "masking's records store (uint16 lengths); split it into shorter instances"
    ]
    assert not (tmp_path / "o").exists()
    assert run_cli(*argv, "--seq-configs", "128:20:50") == 2
    assert "a minimum document length (LENGTH:PREDICTIONS:MIN) needs --pair-objective none" in capsys.readouterr().err


def test_static_default_records_are_the_golden_bytes_of_this_version(tmp_path):
    """The default recipe reproduces BERT: for the same version its records are the same bytes. A change of them
    needs a new version, its digests below and a CHANGELOG.md entry that says why."""
    out = tmp_path / "static"
    assert (
        run_cli(
            "create",
            "--input",
            SAMPLE_TEXT,
            "--vocab",
            VOCAB,
            "--output",
            out,
            "--dupe-factor",
            "2",
            "--num-shards",
            "2",
            *LOCAL,
        )
        == 0
    )
    digests = {f.name: hashlib.sha256(f.read_bytes()).hexdigest()[:16] for f in sorted(out.glob("seq128/*"))}
    version = json.loads((out / "manifest.json").read_text())["version"]
    assert digests == golden_digests(version), f"version {version} wrote other records than its golden digests"


# Version → the first 16 hex digits of each file's sha256, as that version writes them. A version that is not listed
# must write the records of the latest version before it.
STATIC_DIGESTS = {
    "0.1.0": {
        "train-00000-of-00002.tfrecord": "3de5fad0e73e7952",
        "train-00001-of-00002.tfrecord": "444fc7f9a0525245",
    },
}


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def golden_digests(version: str) -> dict[str, str]:
    listed = sorted((v for v in STATIC_DIGESTS if version_key(v) <= version_key(version)), key=version_key)
    assert listed, f"no golden digests for version {version} or any before it"
    return STATIC_DIGESTS[listed[-1]]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--dupe-factor", "0"], "--dupe-factor must be at least 1"),
        (["--bin-size", "0"], "--bin-size must be between 1 and"),
        (["--bin-size", "128"], "--bin-size must be between 1 and the sequence length less one (127)"),
        (["--num-shards", "0"], "argument --num-shards: must be at least 1, not 0"),
        (["--num-buckets", "0"], "argument --num-buckets: must be at least 1, not 0"),
        (["--max-seq-length", "8"], "--max-predictions-per-seq 20 must be between 1 and --max-seq-length (8)"),
        (["--masking", "sometimes"], "invalid choice"),
    ],
)
def test_bad_recipe_flags_get_one_clear_line(tmp_path, capsys, flags, message):
    try:
        code = run_cli("create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", tmp_path / "o", *LOCAL, *flags)
    except SystemExit as e:  # argparse's own refusal
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err and not (tmp_path / "o").exists()


def test_an_empty_train_split_is_refused(tmp_path, capsys):
    # Three documents whose ids the seeded split sends to eval at --eval-fraction 0.5.
    three = tmp_path / "three.jsonl"
    paragraphs = SAMPLE_TEXT.read_text().split("\n\n")
    three.write_text(
        "".join(json.dumps({"id": f"doc-{i}", "text": paragraphs[n]}) + "\n" for n, i in enumerate((2, 4, 6)))
    )
    assert (
        run_cli(
            "create", "--input", three, "--vocab", VOCAB, "--output", tmp_path / "o", "--eval-fraction", "0.5", *LOCAL
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "train split of seq128 holds no instance" in err and not (tmp_path / "o" / "manifest.json").exists()
    assert "; lower --eval-fraction, or give more documents; nothing was published" in err


def test_sop_on_one_sentence_documents_names_them_not_the_eval_split(tmp_path, capsys):
    ones = tmp_path / "ones.txt"
    ones.write_text("One sentence only.\n\nAnother lone one.\n\nA third alone.\n")
    flags = ["--vocab", VOCAB, "--output", tmp_path / "o", "--pair-objective", "sop", "--eval-fraction", "0", *LOCAL]
    assert run_cli("create", "--input", ones, *flags) == 2  # 30 draws: one per document and pass of 10
    assert capsys.readouterr().err.endswith(
        "error: the train split of seq128 holds no instance (--eval-fraction 0.0 of 3 documents; 30 sop draws "
        "skipped as single_sentence_document); give documents of two sentences or more, or use --pair-objective "
        "none, or give more documents; nothing was published\n"
    )


def test_a_casing_flag_that_disagrees_with_the_vocab_is_named_with_its_unk_share(tmp_path, capsys, books_jsonl):
    # The uncased BERT vocab with --no-do-lower-case: capitalised words become [UNK] or more pieces.
    assert (
        run_cli(
            "create",
            "--input",
            books_jsonl,
            "--vocab",
            VOCAB,
            "--output",
            tmp_path / "cased",
            *LOCAL,
            "--no-do-lower-case",
            "--dupe-factor",
            "1",
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "warning: the vocab" in err and "looks uncased" in err and "pass --do-lower-case" in err
    counts = json.loads((tmp_path / "cased" / "manifest.json").read_text())["counts"]
    assert counts["unk_tokens"] / counts["tokens"] > 0.01 and "[UNK]" in err
    assert (
        run_cli(
            "create",
            "--input",
            books_jsonl,
            "--vocab",
            VOCAB,
            "--output",
            tmp_path / "uncased",
            *LOCAL,
            "--dupe-factor",
            "1",
        )
        == 0
    )
    assert "warning" not in capsys.readouterr().err
