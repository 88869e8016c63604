"""The whole `dedup` job on real data: the bundled 2014 Wikipedia sample against a second revision of its articles,
the Gutenberg books in two encodings, planted benchmark passages, reruns with two worker processes, a corpus
without duplicates, and the bad input that gets one line.

Only one dump of these articles is in the repository, so the second revision is made here by edits to a copy of
the extracted articles, of the kinds an editor makes: some articles untouched, some with only case and spacing
changed, some with a few words fixed and a sentence added (near copies), some cut down to half their paragraphs
(no longer copies), some deleted, two copies of a new article (the opening of a Gutenberg book), and two stubs."""

from __future__ import annotations

import json
import re
import shutil
import unicodedata
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import DATA, file_digests, run_cli

WIKI_DUMP = DATA / "wiki" / "enwiki-2014-sample-truncated.xml.bz2"
BOOKS = DATA / "books"
NEW_ARTICLE = BOOKS / "gutenberg_utf8" / "11-0.txt"  # text the 2014 articles do not hold
LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
TWO_PROCESSES = ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def documents(folder: Path) -> dict[str, dict]:
    return {r["id"]: r for f in sorted(folder.glob("documents-*.parquet")) for r in pq.read_table(f).to_pylist()}


def ledger(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for f in sorted(out.glob(f"removed-{name}-*.jsonl")) for line in f.open()]


def dedup(out: Path, *args, options=LOCAL, expect: int = 0) -> dict:
    assert run_cli("dedup", *args, "--output", out, *options) == expect
    return json.loads((out / "manifest.json").read_text()) if expect == 0 else {}


def shingles(text: str) -> set[tuple[str, ...]]:
    """Word 5-shingles found independently of the job: NFKC, casefolded, words of letters and digits."""
    words = re.findall(r"[^\W_]+", unicodedata.normalize("NFKC", text).casefold())
    return {tuple(words[i : i + 5]) for i in range(len(words) - 4)}


def true_jaccard(a: str, b: str) -> float:
    x, y = shingles(a), shingles(b)
    return len(x & y) / len(x | y)


# ---------------------------------------------------------------------------------------------- the revision

FIX_WORDS = ("notably", "significantly", "largely")


def revised(i: int, text: str) -> str | None:
    """The 2015 revision of the i-th article: None where the article was deleted."""
    paragraphs = text.split("\n\n")
    kind = i % 5
    if kind == 0:
        return text
    if kind == 1:  # spacing and capitals only
        return "\n\n   ".join([paragraphs[0].swapcase(), *paragraphs[1:]]).replace(". ", ".  ")
    if kind == 2:  # a word fixed in every sixth paragraph, and a sentence added
        for p in range(0, len(paragraphs), 6):
            words = paragraphs[p].split(" ")
            if len(words) > 4:
                words[3] = FIX_WORDS[p % 3]
            paragraphs[p] = " ".join(words)
        return "\n\n".join(paragraphs) + "\n\nThis article was expanded and checked again in the 2015 revision."
    if kind == 3:  # half of its paragraphs removed
        return "\n\n".join(paragraphs[::2])
    return None


@pytest.fixture(scope="module")
def wiki2014(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("extracted") / "wiki2014"
    assert run_cli("extract-wiki", "--input", WIKI_DUMP, "--output", out, *LOCAL) == 0
    return out


@pytest.fixture(scope="module")
def articles(wiki2014) -> list[dict]:
    return sorted(documents(wiki2014).values(), key=lambda d: d["id"])


@pytest.fixture(scope="module")
def wiki2015(tmp_path_factory, articles) -> Path:
    path = tmp_path_factory.mktemp("revision") / "wiki2015.jsonl"
    rows = [
        {"id": a["id"], "title": a["title"], "url": a["url"], "text": text}
        for i, a in enumerate(articles)
        if (text := revised(i, a["text"])) is not None
    ]
    new = NEW_ARTICLE.read_text(encoding="utf-8")[:6000]
    rows += [
        {"id": "enwiki:new-1", "title": "New", "text": new},
        {"id": "enwiki:new-2", "title": "New", "text": new},
        {"id": "enwiki:new-3", "title": "New", "text": new.replace(" the ", " a ", 2)},  # a near copy of new-1
        {"id": "enwiki:stub-a", "title": "Stub", "text": "A stub."},
        {"id": "enwiki:stub-b", "title": "Stub", "text": "A stub."},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def two_revisions(tmp_path_factory, wiki2014, wiki2015) -> Path:
    out = tmp_path_factory.mktemp("dedup") / "out"
    dedup(out, "--input", wiki2014, wiki2015)
    return out


def test_copies_are_removed_from_the_later_source_only(two_revisions, wiki2014, articles):
    assert documents(two_revisions / "wiki2014") == documents(wiki2014)  # byte for byte, every field
    assert ledger(two_revisions, "wiki2014") == []
    removed = {r["id"]: r for r in ledger(two_revisions, "wiki2015")}
    for i, article in enumerate(articles):
        if i % 5 in (0, 1):
            assert removed[article["id"]]["reason"] == "exact"
            assert removed[article["id"]]["match"] == {"source": "wiki2014", "id": article["id"]}
        elif i % 5 == 2:
            similarity = true_jaccard(article["text"], revised(i, article["text"]))
            if similarity >= 0.85:
                row = removed[article["id"]]
                assert row["reason"] == "near"
                assert row["match"]["source"] == "wiki2014" and row["match"]["id"] == article["id"]
                assert row["match"]["jaccard"] == pytest.approx(similarity, abs=0.01)
    near = [r for r in removed.values() if r["reason"] == "near"]
    assert len(near) >= 25 and all(r["match"]["jaccard"] >= 0.8 for r in near)
    assert removed["enwiki:new-2"] == {
        "source": "wiki2015",
        "id": "enwiki:new-2",
        "reason": "exact",
        "match": {"source": "wiki2015", "id": "enwiki:new-1"},
        "chars": 6000,
        "language": "und",  # a JSONL line without a language field, and no --language
    }
    inside = removed["enwiki:new-3"]  # copies inside one source follow the same rules
    assert inside["reason"] == "near" and inside["match"]["source"] == "wiki2015"
    assert inside["match"]["id"] == "enwiki:new-1" and inside["match"]["jaccard"] > 0.95


def test_what_is_no_copy_stays_as_it_was(two_revisions, wiki2015, articles):
    given = {json.loads(line)["id"]: json.loads(line) for line in wiki2015.open()}
    kept = documents(two_revisions / "wiki2015")
    cut_down = [
        a for i, a in enumerate(articles) if i % 5 == 3 and true_jaccard(a["text"], given[a["id"]]["text"]) < 0.75
    ]
    assert len(cut_down) >= 25
    for article in cut_down + [{"id": "enwiki:new-1"}, {"id": "enwiki:stub-a"}, {"id": "enwiki:stub-b"}]:
        row = kept[article["id"]]
        assert row["text"] == given[article["id"]]["text"] and row["source"] == "wiki2015"
        assert row["title"] == given[article["id"]]["title"]
    removed = {r["id"] for r in ledger(two_revisions, "wiki2015")}
    assert set(kept) | removed == set(given) and not set(kept) & removed


def test_every_document_and_character_is_accounted_for(two_revisions, wiki2015):
    manifest = json.loads((two_revisions / "manifest.json").read_text())
    late = next(s for s in manifest["sources"] if s["name"] == "wiki2015")
    rows = ledger(two_revisions, "wiki2015")
    kept = documents(two_revisions / "wiki2015")
    assert late["read"] == len(wiki2015.read_text().splitlines()) == late["kept"] + len(rows)
    assert late["removed"]["exact"] == sum(r["reason"] == "exact" for r in rows)
    assert late["characters"]["read"] == sum(len(json.loads(line)["text"]) for line in wiki2015.open())
    assert late["characters"]["kept"] == sum(len(d["text"]) for d in kept.values())
    assert late["characters"]["removed"] == sum(r["chars"] for r in rows)
    assert late["too_short_to_compare"] == 2
    near_from = manifest["duplicates"]["removed_by_pair"]["near"]["wiki2015"]
    assert near_from["wiki2015"] == 1 and near_from["wiki2014"] + 1 == late["removed"]["near"]
    assert sum(manifest["duplicates"]["jaccard_histogram"]["counts"]) == late["removed"]["near"]
    # Each source's folder reads like an extraction's output: create takes it as input.
    source = json.loads((two_revisions / "wiki2015" / "manifest.json").read_text())
    assert source["job"] == "dedup" and source["documents"]["kept"] == late["kept"]
    assert [f["path"] for f in source["outputs"]["documents"]] == ["documents-00000-of-00001.parquet"]


def test_create_and_the_data_card_name_the_dedup_step(two_revisions, tmp_path):
    from conftest import VOCAB

    run_dir = tmp_path / "run"
    shutil.copytree(two_revisions, run_dir / "dedup")
    records, extra = run_dir / "records", ["--dupe-factor", "1", "--num-buckets", "1"]
    assert (
        run_cli("create", "--input", run_dir / "dedup" / "wiki2015", "--vocab", VOCAB, "--output", records, *extra) == 0
    )
    (run,) = json.loads((records / "manifest.json").read_text())["input_runs"]
    assert run["job"] == "dedup" and run["dedup"]["source"] == "wiki2015" and run["dedup"]["priority"] == 1
    assert run["dedup"]["run"] == str(run_dir / "dedup" / "manifest.json")
    assert run_cli("stats", run_dir, "--output", tmp_path / "card") == 0
    card = json.loads((tmp_path / "card" / "stats.json").read_text())
    (section,) = card["dedup"]
    manifest = json.loads((two_revisions / "manifest.json").read_text())
    assert section["removed_by_pair"] == manifest["duplicates"]["removed_by_pair"]
    assert section["top_clusters"][0]["ledger"] == ["dedup/removed-wiki2015-00000-of-00001.jsonl"]
    create_stage = next(s for s in card["lineage"]["stages"] if s["job"] == "create")
    # The card names the run's files relative to the folder it describes, never by the machine's paths.
    relative = json.loads(json.dumps(run).replace(str(run_dir) + "/", ""))
    assert create_stage["input_runs"] == [relative] and relative["input"] == "dedup/wiki2015"
    assert create_stage["inputs"][0]["from"] == "dedup/wiki2015"
    page = (tmp_path / "card" / "report.html").read_text()
    assert "Duplicates and benchmark text removed" in page and "near: removed from" in page
    assert "source <code>wiki2015</code> of the run" in page


def test_two_worker_processes_write_the_same_bytes(two_revisions, wiki2014, wiki2015, tmp_path):
    again = tmp_path / "again"
    manifest = dedup(again, "--input", wiki2014, wiki2015, options=TWO_PROCESSES)
    for pattern in ("*/documents-*", "*/errors-*", "removed-*"):
        assert file_digests(again, pattern) == file_digests(two_revisions, pattern)
    first = json.loads((two_revisions / "manifest.json").read_text())
    for m in (manifest, first):
        m["config"].pop("output")
    assert manifest == first


def test_a_corpus_without_copies_passes_through_unchanged(wiki2014, tmp_path):
    manifest = dedup(tmp_path / "out", "--input", wiki2014)
    assert documents(tmp_path / "out" / "wiki2014") == documents(wiki2014)
    assert ledger(tmp_path / "out", "wiki2014") == []
    (source,) = manifest["sources"]
    assert source["read"] == source["kept"] == len(documents(wiki2014))
    assert source["characters"]["removed"] == 0


def test_two_editions_of_a_book_in_two_encodings(tmp_path):
    for folder in ("gutenberg_utf8", "gutenberg_cp1252_with_header"):
        assert run_cli("extract-books", "--input", BOOKS / folder, "--output", tmp_path / folder, *LOCAL) == 0
    utf8, cp1252 = tmp_path / "gutenberg_utf8", tmp_path / "gutenberg_cp1252_with_header"
    dedup(tmp_path / "out", "--input", utf8, cp1252)
    assert documents(tmp_path / "out" / "gutenberg_utf8") == documents(utf8)
    (row,) = ledger(tmp_path / "out", "gutenberg_cp1252_with_header")
    assert row["id"] == "books:pg84" and row["reason"] == "near"
    assert row["match"]["source"] == "gutenberg_utf8" and row["match"]["id"] == "books:84-0"
    assert row["match"]["jaccard"] > 0.99
    assert set(documents(tmp_path / "out" / "gutenberg_cp1252_with_header")) == {"books:pg64317"}


# ---------------------------------------------------------------------------------------------- benchmarks


@pytest.fixture(scope="module")
def planted(tmp_path_factory, articles) -> dict:
    """Real paragraphs of three articles as SQuAD contexts, and real sentences of two others as a GLUE TSV."""
    folder = tmp_path_factory.mktemp("benchmarks")
    long = [a for a in articles if len(a["text"]) > 20000]
    squad_articles, glue_articles = long[3:6], long[10:12]

    def paragraph(a):
        candidates = [p for p in a["text"].split("\n\n") if len(p.split()) > 60]
        return candidates[len(candidates) // 2]

    def sentence(a):
        return next(s for p in a["text"].split("\n\n") for s in p.split(". ") if 20 < len(s.split()) < 40)

    contexts = {a["id"]: paragraph(a) for a in squad_articles}
    squad = {
        "version": "v2.0",
        "data": [
            {
                "title": "planted",
                "paragraphs": [
                    {"context": c, "qas": [{"id": f"q-{n}", "question": "What does the paragraph say?"}]}
                    for n, c in enumerate(contexts.values())
                ],
            }
        ],
    }
    (folder / "squad").mkdir()
    (folder / "squad" / "dev-v2.0.json").write_text(json.dumps(squad))
    sentences = {a["id"]: sentence(a) for a in glue_articles}
    (folder / "SST-2").mkdir()
    (folder / "SST-2" / "dev.tsv").write_text(
        "sentence\tlabel\n"
        + "".join(f"{s}\t1\n" for s in sentences.values())
        + "a gorgeous , witty , seductive movie that nobody in this corpus ever wrote about .\t1\n"
    )
    return {
        "squad": folder / "squad" / "dev-v2.0.json",
        "glue": folder / "SST-2" / "dev.tsv",
        "contexts": contexts,
        "sentences": sentences,
    }


@pytest.mark.parametrize("policy", ["cut", "drop"])
def test_planted_benchmark_passages_are_found_and_removed(tmp_path, wiki2014, planted, policy):
    out = tmp_path / "out"
    manifest = dedup(
        out, "--input", wiki2014, "--decontaminate", planted["squad"], planted["glue"], "--contamination", policy
    )
    given, kept = documents(wiki2014), documents(out / "wiki2014")
    planted_in = {**planted["contexts"], **planted["sentences"]}
    rows = ledger(out, "wiki2014")
    assert {r["id"] for r in rows} == set(planted_in) and {r["reason"] for r in rows} == {"benchmark"}
    for doc_id, passage in planted_in.items():
        text = given[doc_id]["text"]
        mine = [r for r in rows if r["id"] == doc_id]
        assert mine[0]["match"]["benchmark"] in ("squad/dev-v2.0", "SST-2/dev")
        assert mine[0]["match"]["ngram"] in passage
        pieces = [d for i, d in kept.items() if i.startswith(f"{doc_id}#")]
        if policy == "drop":
            assert doc_id not in kept and not pieces and mine[0]["chars"] == len(text)
            continue
        assert doc_id not in kept and len(pieces) >= 1
        start, end = mine[0]["span"]
        assert start <= text.index(passage) and text.index(passage) + len(passage) <= end
        for piece in pieces:
            assert piece["text"] in text and passage not in piece["text"]
            assert {k: piece[k] for k in ("source", "title", "url")} == {
                k: given[doc_id][k] for k in ("source", "title", "url")
            }
        assert sum(len(p["text"]) for p in pieces) + sum(r["chars"] for r in mine) == len(text)
    # The documents no benchmark text was found in are untouched.
    untouched = {i: d for i, d in given.items() if i not in planted_in}
    assert {i: d for i, d in kept.items() if "#" not in i} == untouched
    reports = {b["name"]: b for b in manifest["benchmarks"]}
    assert reports["squad/dev-v2.0"]["contaminated_examples"] == 3
    assert reports["SST-2/dev"]["contaminated_examples"] == 2 and reports["SST-2/dev"]["examples"] == 3
    found = [json.loads(line) for line in (out / "contaminated-SST-2-dev.jsonl").open()]
    assert [f["found_in"] for f in found] == [[{"source": "wiki2014", "id": i}] for i in planted["sentences"]]
    squad_found = [json.loads(line)["example"] for line in (out / "contaminated-squad-dev-v2.0.jsonl").open()]
    assert squad_found == ["q-0", "q-1", "q-2"]
    if policy == "cut":  # the data card reports each benchmark, with a link to its examples found
        assert run_cli("stats", out, "--output", tmp_path / "card") == 0
        (section,) = json.loads((tmp_path / "card" / "stats.json").read_text())["dedup"]
        card = {b["name"]: b for b in section["benchmarks"]}
        assert card["SST-2/dev"]["contaminated_examples"] == 2 and card["squad/dev-v2.0"]["examples"] == 3
        assert card["SST-2/dev"]["report"] == "contaminated-SST-2-dev.jsonl"
        assert card["squad/dev-v2.0"]["removed"]["wiki2014"]["regions"] >= 3
        page = (tmp_path / "card" / "report.html").read_text()
        assert "<code>SST-2/dev</code>" in page and '<a href="contaminated-SST-2-dev.jsonl">' in page


# ---------------------------------------------------------------------------------------------- bad input


def _error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    "content, name, expected",
    [
        ("a,b\n1,2\n", "bench.csv", "unknown benchmark layout"),
        ('{"premise_x": "a", "hyp": "b"}\n', "bench.jsonl", "unknown benchmark layout"),
        (
            '{"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"qas": []}]}]}',
            "dev.json",
            "a SQuAD file without contexts",
        ),
        ("", "empty.jsonl", "the file is empty"),
        (  # a SQuAD file cut short: the JSON error and its place
            '{"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "Actrius is a 1996 film',
            "dev-v2.0.json",
            "not valid JSON: Unterminated string starting at: line 1 column 72 (char 71)",
        ),
    ],
)
def test_a_bad_benchmark_file_is_one_line(capsys, tmp_path, wiki2014, content, name, expected):
    bench = tmp_path / name
    bench.write_text(content)
    assert run_cli("dedup", "--input", wiki2014, "--output", tmp_path / "out", "--decontaminate", bench) == 2
    line = _error_line(capsys)
    assert line.startswith(f"bertcorpus dedup: error: benchmark {name}: ") and expected in line
    assert not (tmp_path / "out").exists()


def test_bad_inputs_and_settings_are_one_line(capsys, tmp_path, wiki2014):
    out = tmp_path / "out"
    cases = [
        (["--input", BOOKS / "gutenberg_utf8"], "is not a documents output: the folder has no manifest.json"),
        (["--input", WIKI_DUMP], "is not a documents output"),
        (["--input", wiki2014, str(wiki2014) + "/"], "are the same folder"),
        (
            ["--input", wiki2014, "--bands", "20", "--rows", "9"],
            "--bands 20 × --rows 9 = 180 does not fit --num-hashes 160",
        ),
        (["--input", wiki2014, "--threshold", "0"], "--threshold must be in (0, 1], not 0"),
        (["--input", wiki2014, "--threshold", "1.5"], "--threshold must be in (0, 1], not 1.5"),
    ]
    for args, expected in cases:
        assert run_cli("dedup", *args, "--output", out) == 2
        line = _error_line(capsys)
        assert line.startswith("bertcorpus dedup: error: ") and expected in line, line
    assert not out.exists()


def test_invalid_utf8_is_replaced_and_counted_as_create_does(tmp_path, capsys):
    """A JSONL source holding a cp1252 book's paragraphs as they are on disk: each byte that is not UTF-8 becomes
    U+FFFD, as create reads it, and is counted in both manifests and in the summary."""
    raw = (BOOKS / "gutenberg_cp1252_with_header" / "pg64317.txt").read_bytes()
    paragraphs = [p for p in raw.replace(b"\r\n", b"\n").split(b"\n\n") if len(p.split()) > 20][:200]
    lines = [
        json.dumps({"id": f"pg64317-{n}", "text": p.decode("latin-1")}, ensure_ascii=False).encode("latin-1") + b"\n"
        for n, p in enumerate(paragraphs)
    ]
    (tmp_path / "web.jsonl").write_bytes(b"".join(lines))
    expected = sum(line.decode("utf-8", errors="replace").count("\ufffd") for line in lines)
    assert expected > 50
    capsys.readouterr()
    manifest = dedup(tmp_path / "out", "--input", tmp_path / "web.jsonl")
    (source,) = manifest["sources"]
    assert source["replaced_chars"] == expected
    assert source["read"] == source["kept"] + sum(source["removed"].values())
    per_source = json.loads((tmp_path / "out" / "web" / "manifest.json").read_text())
    assert per_source["dedup"]["replaced_chars"] == per_source["inputs"][0]["replaced_chars"] == expected
    kept = documents(tmp_path / "out" / "web")
    assert sum(d["text"].count("\ufffd") for d in kept.values()) == sum(
        lines[int(i.rsplit("-", 1)[1])].decode("utf-8", errors="replace").count("\ufffd") for i in kept
    )
    assert f"{expected:,} characters replaced by U+FFFD" in capsys.readouterr().out


def test_a_document_over_the_cap_is_compared_and_kept_as_pieces(tmp_path, capsys):
    """A real book and an edited copy of it, with a cap of 0.1 million characters: both are cut at the same
    paragraphs, so each piece of the copy is found as a copy of a piece of the book; the ledger balances, counting
    the pieces, in documents and in characters."""
    book = (DATA / "create" / "84-0.txt").read_text(encoding="utf-8")
    copy = book.replace(" the ", " a ", 3)
    corpus = tmp_path / "books.jsonl"
    corpus.write_text(
        json.dumps({"id": "book", "text": book}) + "\n" + json.dumps({"id": "copy", "text": copy}) + "\n",
        encoding="utf-8",
    )
    capsys.readouterr()
    manifest = dedup(tmp_path / "out", "--input", corpus, "--max-document-mb", "0.1")
    (source,) = manifest["sources"]
    pieces = source["split"]["pieces"]
    assert source["read"] == source["split"]["documents"] == 2 and pieces >= 2 * 5
    assert source["read"] - 2 + pieces == source["kept"] + sum(source["removed"].values())
    assert source["kept"] == sum(source["removed"].values()) == pieces // 2
    assert source["characters"]["read"] == len(book) + len(copy)
    assert source["characters"]["kept"] + source["characters"]["removed"] == source["characters"]["read"]
    kept = documents(tmp_path / "out" / "books")
    assert sorted(kept) == sorted(f"book#part-{n}" for n in range(1, pieces // 2 + 1))
    assert "".join(kept[f"book#part-{n}"]["text"] for n in range(1, pieces // 2 + 1)) == book
    assert {row["id"].split("#")[0] for row in ledger(tmp_path / "out", "books")} == {"copy"}
    per_source = json.loads((tmp_path / "out" / "books" / "manifest.json").read_text())
    assert per_source["documents"]["split"] == source["split"]
    assert f"read 2 + {pieces - 2:,} more pieces = kept" in capsys.readouterr().out
