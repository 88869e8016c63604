"""create --record-format megatron, read by Megatron's own code (megatron-core, on the CPU): IndexedDataset finds
the ids and document boundaries we wrote, and BERTMaskedWordPieceDataset, built through
BlendedMegatronDatasetBuilder from the data paths the manifest gives, makes training samples of them."""

from __future__ import annotations

import json
import os
import shlex
import socket
import warnings
from pathlib import Path

import numpy as np
import pytest

from bertcorpus.transforms.document_tokens import DocumentTokenizer
from bertcorpus.transforms.instances import cut_long_sentences
from bertcorpus.transforms.megatron_index import read_index
from bertcorpus.wordpiece.vocab import Vocab

from conftest import VOCAB, exit_status, run_cli
from tokenizer_files import tokenizer_folder
from wiki_fixtures import mixed_script_articles, write_articles

pytest.importorskip(
    "megatron.core.datasets.helpers_cpp", reason="megatron-core is not installed: pip install -e '.[megatron]'"
)
warnings.filterwarnings("ignore", message=".*Transformer Engine and Apex.*")


@pytest.fixture(scope="module")
def articles_jsonl(tmp_path_factory) -> Path:
    return write_articles(tmp_path_factory.mktemp("articles") / "articles.jsonl", mixed_script_articles())


@pytest.fixture(scope="module")
def process_group():
    """The one-process torch.distributed group Megatron's dataset builders ask for, on the loopback."""
    import torch.distributed as dist

    if not dist.is_initialized():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def megatron_output(tmp_path: Path, articles: Path, *extra: str) -> Path:
    out = tmp_path / "megatron-out"
    assert run_cli("create", "--input", articles, "--output", out, "--record-format", "megatron", *extra) == 0
    return out


def expected_documents(articles: list, vocab) -> list[tuple[tuple[int, ...], ...]]:
    """Each document as create tokenises it, a tuple of its sentences' ids (a long sentence cut as create cuts it)."""
    tokenizer = DocumentTokenizer(vocab)
    docs = []
    for _, text, _ in articles:
        found = tokenizer.tokenize(text)
        lengths, _ = cut_long_sentences(found.lengths[found.lengths > 0], 128 - 3)
        ends = np.cumsum(lengths)
        docs.append(tuple(tuple(found.ids[e - n : e].tolist()) for e, n in zip(ends, lengths)))
    return docs


def read_documents(prefix: str) -> list[tuple[tuple[int, ...], ...]]:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    dataset = IndexedDataset(prefix)
    bounds = dataset.document_indices
    return [tuple(tuple(dataset[i].tolist()) for i in range(bounds[d], bounds[d + 1])) for d in range(len(bounds) - 1)]


def test_indexed_dataset_reads_the_ids_and_boundaries_we_wrote(tmp_path, articles_jsonl):
    out = megatron_output(tmp_path, articles_jsonl, "--vocab", VOCAB, "--num-shards", "2", "--eval-fraction", "0.1")
    manifest = json.loads((out / "manifest.json").read_text())
    outputs = manifest["outputs"]
    assert [len(outputs["train"]["files"]), len(outputs["eval"]["files"])] == [2, 1]
    found = [
        doc
        for split in ("train", "eval")
        for f in outputs[split]["files"]
        for doc in read_documents(str(out / f["prefix"]))
    ]
    expected = expected_documents(mixed_script_articles(), Vocab.load(str(VOCAB)))
    assert sorted(found) == sorted(expected)  # every document once, its sentences and their ids exactly
    assert outputs["train"]["documents"] + outputs["eval"]["documents"] == len(expected)
    for f in outputs["train"]["files"]:
        index = read_index((out / f"{f['prefix']}.idx").read_bytes())
        assert index.dtype == np.uint16 and index.sequences == f["sequences"] and index.documents == f["documents"]
        assert (out / f"{f['prefix']}.bin").stat().st_size == 2 * f["tokens"]


def bert_tokenizer(tmp_path: Path):
    """Megatron's BERT tokenizer over the vocab, through transformers, which reads it offline from a folder."""
    from megatron.core.tokenizers import MegatronTokenizer

    folder = tmp_path / "hf-vocab"
    folder.mkdir(exist_ok=True)
    (folder / "vocab.txt").write_bytes(VOCAB.read_bytes())
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer", "do_lower_case": true}')
    return MegatronTokenizer.from_pretrained(
        tokenizer_path=str(folder), metadata_path={"library": "huggingface", "model_type": "bert"}
    )


def bert_config(tmp_path: Path, tokenizer, classification_head: bool = True, **blend):
    from megatron.core.datasets.bert_dataset import BERTMaskedWordPieceDatasetConfig

    return BERTMaskedWordPieceDatasetConfig(
        random_seed=1,
        sequence_length=128,
        tokenizer=tokenizer,
        masking_probability=0.15,
        short_sequence_probability=0.1,
        masking_max_ngram=1,
        masking_do_full_word=True,
        masking_do_permutation=False,
        masking_use_longer_ngrams=False,
        masking_use_geometric_distribution=False,
        classification_head=classification_head,
        path_to_cache=str(tmp_path / "megatron-cache"),
        **blend,
    )


def test_bert_dataset_builds_samples_from_the_manifest_s_data_paths(tmp_path, articles_jsonl, process_group):
    from megatron.core.datasets.bert_dataset import BERTMaskedWordPieceDataset
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder

    out = megatron_output(tmp_path, articles_jsonl, "--vocab", VOCAB, "--num-shards", "2", "--eval-fraction", "0.1")
    flags = json.loads((out / "manifest.json").read_text())["megatron"]
    assert flags["script"] == "pretrain_bert.py" and flags["dataset"] == "BERTMaskedWordPieceDataset"
    words = flags["flags"]
    train = words[words.index("--train-data-path") + 1 : words.index("--valid-data-path")]
    valid = words[words.index("--valid-data-path") + 1 : words.index("--seq-length")]
    assert words[words.index("--tokenizer-type") + 1] == "BertWordPieceLowerCase"
    assert Path(words[words.index("--vocab-file") + 1]).read_bytes() == VOCAB.read_bytes()
    tokenizer = bert_tokenizer(tmp_path)
    config = bert_config(
        tmp_path, tokenizer, blend_per_split=[(train, [1.0] * len(train)), (valid, [1.0] * len(valid)), None]
    )
    built, validation, _ = BlendedMegatronDatasetBuilder(
        BERTMaskedWordPieceDataset, [200, 20, None], lambda: True, config
    ).build()
    assert len(built) == 200 and len(validation) >= 20  # a split of one file: its whole epoch
    masked = real = 0
    for i in range(200):
        sample = built[i]
        text, types, loss = sample["text"], sample["types"], sample["loss_mask"]
        n = int(sample["padding_mask"].sum())
        assert text[0] == tokenizer.cls and (text[:n] == tokenizer.sep).sum() == 2
        assert types[:n].max() == 1 and loss[0] == 0
        masked += int(loss.sum())
        real += n
    assert 0.12 < masked / real < 0.18


def test_a_tokenizer_json_output_names_megatron_s_hugging_face_tokenizer(tmp_path, articles_jsonl):
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from transformers import AutoTokenizer

    folder = tokenizer_folder("xlmr-shape", tmp_path)
    out = megatron_output(
        tmp_path, articles_jsonl, "--tokenizer", folder, "--pair-objective", "none", "--megatron-sequences", "documents"
    )
    manifest = json.loads((out / "manifest.json").read_text())
    words = manifest["megatron"]["flags"]
    assert manifest["megatron"]["dataset"] == "GPTDataset" and "--bert-no-binary-head" not in words
    model = words[words.index("--tokenizer-model") + 1]
    assert words[words.index("--tokenizer-type") + 1] == "HuggingFaceTokenizer"
    assert AutoTokenizer.from_pretrained(model).mask_token == "<mask>"
    (prefix,) = (f["prefix"] for f in manifest["outputs"]["train"]["files"])
    dataset = IndexedDataset(str(out / prefix))
    assert len(dataset) == len(dataset.document_indices) - 1  # a sequence per document
    assert dataset.sequence_lengths.sum() == manifest["outputs"]["train"]["tokens"]


def test_languages_mixed_by_shares_are_files_weighed_in_the_data_path(tmp_path, articles_jsonl, process_group):
    from megatron.core.datasets.bert_dataset import BERTMaskedWordPieceDataset
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder

    out = megatron_output(
        tmp_path, articles_jsonl, "--vocab", VOCAB, "--language-sampling-alpha", "0.3", "--eval-fraction", "0"
    )
    manifest = json.loads((out / "manifest.json").read_text())
    train = manifest["outputs"]["train"]
    assert sorted(f["language"] for f in train["files"]) == ["el", "en", "ja", "uk", "vi", "zh"]
    weights = [float(w) for w in train["data_path"][0::2]]
    tokens = np.array([f["tokens"] for f in train["files"]], float)
    smoothed = (tokens / tokens.sum()) ** 0.3
    assert np.allclose(weights, smoothed / smoothed.sum(), atol=1e-6)
    words = manifest["megatron"]["flags"]
    assert words[words.index("--train-data-path") + 1 :][: len(train["data_path"])] == train["data_path"]
    assert shlex.join(words)  # the flags are words a shell takes as they are
    # Megatron's blend of the language files, by those weights
    blend = [(train["data_path"][1::2], weights), None, None]
    config = bert_config(tmp_path, bert_tokenizer(tmp_path), blend_per_split=blend)
    built, _, _ = BlendedMegatronDatasetBuilder(
        BERTMaskedWordPieceDataset, [500, None, None], lambda: True, config
    ).build()
    drawn = np.bincount([int(built[i]["dataset_id"]) for i in range(500)], minlength=len(weights)) / 500
    assert np.abs(drawn - np.array(weights)).max() < 0.05


def test_megatron_output_is_the_same_bytes_in_worker_processes(tmp_path, articles_jsonl):
    one = megatron_output(tmp_path / "a", articles_jsonl, "--vocab", VOCAB, "--num-shards", "2")
    two = megatron_output(
        tmp_path / "b",
        articles_jsonl,
        "--vocab",
        VOCAB,
        "--num-shards",
        "2",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=2",
    )
    files = sorted(p.relative_to(one) for p in (one / "megatron").iterdir())
    assert files and files == sorted(p.relative_to(two) for p in (two / "megatron").iterdir())
    assert all((one / f).read_bytes() == (two / f).read_bytes() for f in files)
    assert not (one / "_staging").exists() and not list(one.glob("**/megatron-parts"))


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--masking", "static"], "--record-format megatron takes no static masks: Megatron pairs and masks"),
        (["--bin-size", "32"], "--bin-size: Megatron pairs and masks the sentences at load time"),
        (["--seq-configs", "128:20,512:80"], "give one --max-seq-length"),
        (["--megatron-sequences", "documents"], "--megatron-sequences documents gives no sentences to pair"),
    ],
)
def test_what_megatron_cannot_honour_is_refused_in_one_line(tmp_path, capsys, articles_jsonl, flags, message):
    argv = ["create", "--input", articles_jsonl, "--output", tmp_path / "out", "--vocab", VOCAB]
    assert exit_status(*argv, "--record-format", "megatron", *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_with_provenance_each_sequence_names_the_characters_it_came_from(tmp_path, articles_jsonl):
    import pyarrow.parquet as pq

    from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer

    out = megatron_output(tmp_path, articles_jsonl, "--vocab", VOCAB, "--provenance", "--eval-fraction", "0")
    (entry,) = json.loads((out / "manifest.json").read_text())["outputs"]["train"]["files"]
    texts = {doc_id: text for doc_id, text, _ in mixed_script_articles()}
    rows = pq.read_table(out / f"{entry['prefix']}.provenance.parquet").to_pylist()
    documents = read_documents(str(out / entry["prefix"]))
    assert len(rows) == len(documents) == entry["documents"]
    tokenizer = WordPieceTokenizer(Vocab.load(str(VOCAB)))
    outside = 0
    for row, sequences in zip(rows, documents):
        assert len(row["sequences"]) == len(sequences)
        for span, ids in zip(row["sequences"], sequences):
            made = tokenizer.encode(texts[row["document"]][span["start"] : span["end"]]).tolist()
            outside += not any(made[i : i + len(ids)] == list(ids) for i in range(len(made) - len(ids) + 1))
    assert outside == 0
