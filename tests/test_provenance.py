"""create --provenance: every instance says where its tokens came from, in every form, and on real text every
segment's tokens are a contiguous run of the tokenisation of its pieces of document text."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from bertcorpus.transforms.instance_mds import MdsColumns, read_header, read_samples
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile, read_tokenizer_source
from bertcorpus.wordpiece.vocab import Vocab

from conftest import VOCAB, run_cli
from tokenizer_files import tokenizer_folder
from wiki_fixtures import mixed_script_articles, write_articles


@pytest.fixture(scope="module")
def articles() -> list[tuple[str, str, str]]:
    return mixed_script_articles()


@pytest.fixture(scope="module")
def articles_jsonl(tmp_path_factory, articles) -> Path:
    return write_articles(tmp_path_factory.mktemp("articles") / "articles.jsonl", articles)


def create(out: Path, inputs: Path, *flags: str) -> Path:
    assert run_cli("create", "--input", inputs, "--output", out, "--provenance", "--num-shards", "2", *flags) == 0
    return out


def contains(stream: np.ndarray, run: np.ndarray) -> bool:
    """Whether `run` is a contiguous run of `stream`."""
    if not len(run):
        return True
    return any(np.array_equal(stream[at : at + len(run)], run) for at in np.flatnonzero(stream == run[0]))


def runs_outside(instances, texts: dict[str, str], encode) -> tuple[int, int]:
    """(segments checked, segments whose tokens are no run of the tokenisation of their pieces, each piece encoded
    on its own and the ids put one after another). instances: (the segments' ids, the provenance rows)."""
    checked = outside = 0
    for segments, pieces in instances:
        for number, tokens in enumerate(segments):
            own = [p for p in pieces if p["segment"] == number]
            assert own, "a segment without its pieces"
            ids = np.concatenate([encode(texts[p["document"]][p["start"] : p["end"]]) for p in own])
            checked += 1
            outside += not contains(ids, np.asarray(tokens))
    return checked, outside


def pair_segments(ids, b_start: int, length: int, frame=(1, 1, 1)) -> list[np.ndarray]:
    before, between, after = frame
    return [ids[before : b_start - between], ids[b_start : length - after]]


def test_every_form_records_the_pieces_its_tokens_come_from(tmp_path, articles, articles_jsonl):
    texts = {doc_id: text for doc_id, text, _ in articles}
    tokenizer = WordPieceTokenizer(Vocab.load(str(VOCAB)))
    base = ["--vocab", VOCAB]
    # Parquet
    out = create(tmp_path / "parquet", articles_jsonl, *base, "--masking", "dynamic")
    rows = [r for p in sorted((out / "seq128").glob("train-*.parquet")) for r in pq.read_table(p).to_pylist()]
    instances = [
        (pair_segments(np.array(r["input_ids"]), r["segment_b_start"], r["length"]), r["provenance"]) for r in rows
    ]
    checked, outside = runs_outside(instances, texts, tokenizer.encode)
    assert checked == 2 * len(rows) > 8000 and outside == 0
    # MDS
    out = create(tmp_path / "mds", articles_jsonl, *base, "--masking", "dynamic", "--record-format", "mds")
    instances = []
    for shard in sorted((out / "seq128" / "train").glob("shard.*.mds")):
        data = shard.read_bytes()
        n, config = read_header(data)
        columns = MdsColumns.from_config(config)
        assert "provenance" in columns.names
        ids, starts, length, b_start, *_ = read_samples(data, 0, n, columns)
        pieces = mds_provenance(data, n, columns)
        for i in range(n):
            sample = ids[starts[i] : starts[i] + length[i]]
            instances.append((pair_segments(sample, int(b_start[i]), int(length[i])), pieces[i]))
    assert runs_outside(instances, texts, tokenizer.encode)[1] == 0
    # TFRecords: the reference's seven features, and a Parquet beside each shard, a row per record in order
    out = create(tmp_path / "tfrecord", articles_jsonl, *base, "--dupe-factor", "2")
    manifest = json.loads((out / "manifest.json").read_text())
    instances = []
    for shard in manifest["outputs"]["seq128"]["train"]["shards"]:
        side = pq.read_table(out / shard["provenance"]["path"])
        assert side.schema.metadata[b"bertcorpus.shard_sha256"].decode() == shard["sha256"]
        assert side.column("record").to_pylist() == list(range(shard["records"]))
        records = static_records(out / shard["path"])
        for i, pieces in enumerate(side.column("provenance").to_pylist()):
            restored = records["input_ids"][i].copy()
            weights = records["masked_lm_weights"][i] > 0
            restored[records["masked_lm_positions"][i][weights]] = records["masked_lm_ids"][i][weights]
            n = int(records["input_mask"][i].sum())
            b = int(np.argmax(records["segment_ids"][i])) if records["segment_ids"][i].any() else n
            instances.append((pair_segments(restored, b, n), pieces))
    assert len(instances) > 8000 and runs_outside(instances, texts, tokenizer.encode)[1] == 0


def mds_provenance(data: bytes, n: int, columns: MdsColumns) -> list[list[dict]]:
    from bertcorpus.transforms.instance_mds import _read_columns

    _, arrays = _read_columns(data, 0, n, columns)
    values, sizes = arrays["provenance"]
    ends = np.cumsum(sizes)
    return [json.loads(bytes(values[e - s : e])) for e, s in zip(ends, sizes)]


def static_records(path: Path) -> dict[str, np.ndarray]:
    from bertcorpus.transforms.example_decoding import joined_records, parse_examples
    from bertcorpus.transforms.tfrecord import feature_spec, iter_tfrecords

    with path.open("rb") as f:
        return parse_examples(*joined_records(list(iter_tfrecords(f))), feature_spec(128, 20))


@pytest.mark.parametrize("whole", [True, False], ids=["unit-local", "encoded-whole"])
def test_a_tokenizer_json_s_pieces_re_encode_to_their_tokens(tmp_path, articles, articles_jsonl, whole):
    """Byte-level BPE (its units one after another: a piece per segment), and a Unigram that encodes a text whole
    (Metaspace without splitting: a piece per sentence); packed rows of several documents for the second."""
    texts = {doc_id: text for doc_id, text, _ in articles}
    if whole:
        folder = tokenizer_folder("anthropic-claude-v1", tmp_path)
        flags = ["--special-token", "cls=<SOS>", "--special-token", "sep=<EOT>", "--special-token", "mask=<META>"]
        objective = []
    else:
        folder = tokenizer_folder("xlmr-shape", tmp_path)
        config = json.loads((folder / "tokenizer.json").read_text())
        config["pre_tokenizer"]["split"] = False
        (folder / "tokenizer.json").write_text(json.dumps(config))
        flags, objective = [], ["--pair-objective", "none"]
    loaded = TokenizerFile(read_tokenizer_source(str(folder), dict(f.split("=") for f in flags[1::2])))
    out = create(tmp_path / "out", articles_jsonl, "--tokenizer", folder, *flags, "--masking", "dynamic", *objective)
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    hf.encode_special_tokens = True

    def encode(piece: str) -> np.ndarray:
        return np.array(hf.encode(piece, add_special_tokens=False).ids)

    lay = loaded.layout
    rows = [r for p in sorted((out / "seq128").glob("train-*.parquet")) for r in pq.read_table(p).to_pylist()]
    instances = []
    for r in rows:
        ids = np.array(r["input_ids"])
        if objective:  # a packed row: its documents' pieces one after another, the suffixes between them
            inner = ids[len(lay.single_prefix) : r["length"] - len(lay.single_suffix)]
            documents = np.split(inner, np.flatnonzero(np.isin(inner, lay.single_suffix)))
            runs = [d[np.isin(d, lay.single_suffix, invert=True)] for d in documents]
            by_document = [p["document"] for p in r["provenance"]]
            per_doc = [[p for p in r["provenance"] if p["document"] == d] for d in dict.fromkeys(by_document)]
            assert len(per_doc) == len(runs)
            instances += [([run], [{**p, "segment": 0} for p in pieces]) for run, pieces in zip(runs, per_doc)]
        else:
            instances.append((pair_segments(ids, r["segment_b_start"], r["length"], lay.pair_frame), r["provenance"]))
    checked, outside = runs_outside(instances, texts, encode)
    assert checked > 3000 and outside == 0
    pieces_per_segment = sum(len(p) for _, p in instances) / sum(len(segments) for segments, _ in instances)
    assert (pieces_per_segment > 1.5) == (not whole)  # by sentence where the tokenizer encodes a text whole


def test_without_provenance_the_forms_are_as_before(tmp_path, articles_jsonl):
    out = tmp_path / "plain"
    assert run_cli("create", "--input", articles_jsonl, "--output", out, "--vocab", VOCAB, "--masking", "dynamic") == 0
    schema = pq.read_schema(next((out / "seq128").glob("train-*.parquet")))
    assert schema.names == ["input_ids", "segment_b_start", "next_sentence_label", "length", "language"]
    assert "provenance" not in json.loads((out / "manifest.json").read_text())["config"]


@pytest.mark.parametrize("world_size", [1, 3])
def test_the_order_file_is_what_the_loader_serves(tmp_path, articles_jsonl, world_size):
    from bertcorpus import PretrainingLoader
    from bertcorpus.trainer.provenance_files import documents_of, shard_provenance

    out = create(tmp_path / "out", articles_jsonl, "--vocab", VOCAB, "--masking", "dynamic", "--bin-size", "32")
    order = tmp_path / "order.parquet"
    argv = ["order", "--input", out, "--output", order, "--batch-size", "16", "--world-size", str(world_size)]
    assert run_cli(*argv, "--seed", "7", "--epochs", "0-1") == 0
    table = pq.read_table(order).to_pydict()
    settings = dict(seq_length=128, batch_size=16, world_size=world_size, seed=7)
    served = {}
    for epoch in (0, 1):
        for rank in range(world_size):
            loader = PretrainingLoader(out, rank=rank, epoch=epoch, **settings)
            for step in range(len(loader)):
                served[epoch, step, rank] = loader.batch_instances(step).tolist()
    written = {}
    for epoch, step, rank, instance in zip(table["epoch"], table["step"], table["rank"], table["instance"]):
        written.setdefault((epoch, step, rank), []).append(instance)
    assert written == served and len(written) > 20
    # each instance's documents are those its provenance names
    loader = PretrainingLoader(out, **settings)
    form = loader.dataset.file_format
    by_shard = {s.name: [documents_of(p) for p in shard_provenance(form, s)] for s in loader.dataset.shards}
    assert all(by_shard[s][r] == d for s, r, d in zip(table["shard"], table["row"], table["documents"]))


def test_the_order_of_another_version_s_output_and_a_changed_provenance_are_refused(tmp_path, capsys, articles_jsonl):
    from bertcorpus import LoaderError, PretrainingLoader

    out = create(tmp_path / "out", articles_jsonl, "--vocab", VOCAB, "--dupe-factor", "1")
    manifest = json.loads((out / "manifest.json").read_text())
    shard = manifest["outputs"]["seq128"]["train"]["shards"][0]
    PretrainingLoader(out, seq_length=128, batch_size=8)  # as made
    # the provenance of another shard in its place: its metadata names the other shard
    other = manifest["outputs"]["seq128"]["train"]["shards"][1]["provenance"]["path"]
    (out / shard["provenance"]["path"]).write_bytes((out / other).read_bytes())
    shard["provenance"]["sha256"] = manifest["outputs"]["seq128"]["train"]["shards"][1]["provenance"]["sha256"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(LoaderError, match="no longer matches its shard"):
        PretrainingLoader(out, seq_length=128, batch_size=8)
    manifest["version"] = "0.2.0"
    (out / "manifest.json").write_text(json.dumps(manifest))
    from conftest import exit_status

    capsys.readouterr()
    assert exit_status("order", "--input", out, "--output", tmp_path / "o.parquet", "--batch-size", "8") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was made by bertcorpus 0.2.0" in err[0]
