"""dedup on Chinese, which has no spaces between its words: shingles and benchmark n-grams are runs of characters,
so a near copy of a Chinese document is found as a near copy of an English one is (before, each of its clauses was
one "word", one changed character made a clause share nothing, and none of 20 copies was found). Real text: the
bundled modern Chinese prose; the benchmark is a SQuAD-format file (the layout of CMRC 2018) whose context is a
passage of it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import zstandard

from conftest import DATA, run_cli

PROSE = DATA / "zh" / "huzheng-fofa-public-domain.txt.zst"
LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]


def paragraphs() -> list[str]:
    text = zstandard.ZstdDecompressor().decompress(PROSE.read_bytes()).decode("utf-8")
    return [p.strip() for p in text.split("\n") if len(p.strip()) >= 40]


def write_jsonl(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path


def ledger(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for f in sorted(out.glob(f"removed-{name}-*.jsonl")) for line in f.open()]


def test_near_copies_of_chinese_documents_are_found(tmp_path):
    """20 documents of 12 paragraphs, each copied with one paragraph dropped and one character changed in every
    third paragraph: at least 16 of the 20 copies go (as for the same edit on English text)."""
    rng, paras = random.Random(1), paragraphs()
    originals, copies = [], []
    for i in range(20):
        kept = paras[i * 12 : (i + 1) * 12]
        originals.append({"id": f"orig-{i}", "text": "\n\n".join(kept), "language": "zh-Hans"})
        edited = list(kept)
        del edited[rng.randrange(len(edited))]
        for k in range(0, len(edited), 3):
            at = rng.randrange(len(edited[k]))
            edited[k] = edited[k][:at] + "的" + edited[k][at + 1 :]
        copies.append({"id": f"copy-{i}", "text": "\n\n".join(edited), "language": "zh-Hans"})
    a, b = write_jsonl(tmp_path / "a.jsonl", originals), write_jsonl(tmp_path / "b.jsonl", copies)
    out = tmp_path / "out"
    assert run_cli("dedup", "--input", a, b, "--output", out, *LOCAL) == 0
    removed = ledger(out, "b")
    assert len(removed) >= 16 and all(r["reason"] == "near" for r in removed)
    assert all(r["match"]["id"] == r["id"].replace("copy", "orig") for r in removed)
    assert all(r["language"] == "zh-Hans" for r in removed)
    assert not ledger(out, "a")


def test_a_chinese_benchmark_passage_is_cut_out(tmp_path):
    paras = paragraphs()
    passage = paras[500]
    squad = {
        "version": "v1.0",
        "data": [
            {
                "title": "测试",
                "paragraphs": [
                    {"context": passage, "qas": [{"id": "q1", "question": "这段话说了什么？", "answers": []}]}
                ],
            }
        ],
    }
    bench = tmp_path / "cmrc-dev.json"
    bench.write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    docs = [{"id": f"doc-{i}", "text": "\n\n".join(paras[490 + i * 20 : 510 + i * 20])} for i in range(3)]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", docs)
    out = tmp_path / "out"
    assert run_cli("dedup", "--input", corpus, "--output", out, "--decontaminate", bench, *LOCAL) == 0
    rows = ledger(out, "corpus")
    assert [r["id"] for r in rows] == ["doc-0"] and rows[0]["reason"] == "benchmark"
    texts = "\n".join(
        r["text"] for f in sorted((out / "corpus").glob("documents-*.parquet")) for r in pq.read_table(f).to_pylist()
    )
    assert passage not in texts and paras[491] in texts and paras[520] in texts
