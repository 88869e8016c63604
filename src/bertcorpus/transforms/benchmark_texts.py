"""Evaluation benchmark files as distributed, read into the texts a corpus must not contain and the examples each
text belongs to, for decontamination: SQuAD v1.1/v2.0 JSON, GLUE TSV, SuperGLUE JSONL, and any JSONL, JSON or Parquet
whose text fields are named. (The speed benchmarks of this project are benchmarks/.)

    SQuAD      {"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question"}]}]}]}
               texts: each context (its examples: the ids of its questions) and each question
    GLUE TSV   a header row naming the columns (CoLA's train and dev files have none: source, label, mark,
               sentence); texts: the columns of TEXT_FIELDS it has; example: its index or id column, else its row
    records    JSONL (SuperGLUE, GLUE as JSONL), a JSON array, or Parquet: the layout is found from the fields of the
               first record (LAYOUTS); example: its idx or id field, else its row. With text fields named by the
               user (--benchmark-text-field), those fields of any layout.

A text that several examples share (a SQuAD context, an MNLI premise) is one text with all their ids.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field

__all__ = ["Benchmark", "BenchmarkError", "BenchmarkText", "parse_benchmark"]


class BenchmarkError(ValueError):
    """A benchmark file that cannot be read as any layout; the message names the file and says why."""


@dataclass
class BenchmarkText:
    text: str
    examples: list[str]  # the ids of the examples that hold this text


@dataclass
class Benchmark:
    name: str
    layout: str  # "SQuAD", "GLUE TSV", a LAYOUTS name, or "fields text,…"
    examples: int  # distinct example ids
    texts: list[BenchmarkText] = field(default_factory=list)
    unreadable_rows: int = 0  # rows of a TSV or JSONL that could not be parsed (QQP's train file has a few)


# The fields that hold text in the tasks of GLUE and SuperGLUE (and their JSONL copies), by layout: the first whose
# fields a record has is its layout. Nested fields are read by the extractors below.
LAYOUTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("MultiRC", ("passage.text", "passage.questions")),
    ("ReCoRD", ("passage.text", "qas")),
    ("COPA", ("premise", "choice1", "choice2")),
    ("BoolQ", ("question", "passage")),
    ("CB/RTE/AX-g", ("premise", "hypothesis")),
    ("WiC", ("word", "sentence1", "sentence2")),
    ("WSC", ("text", "target")),
    ("QQP", ("question1", "question2")),
    ("QNLI", ("question", "sentence")),
    ("MRPC", ("#1 String", "#2 String")),
    ("sentence pair (RTE/WNLI/STS-B/MNLI/AX)", ("sentence1", "sentence2")),
    ("single sentence (CoLA/SST-2)", ("sentence",)),
)
TEXT_FIELDS = (
    "sentence",
    "sentence1",
    "sentence2",
    "question",
    "question1",
    "question2",
    "premise",
    "hypothesis",
    "choice1",
    "choice2",
    "passage",
    "text",
    "#1 String",
    "#2 String",
)
ID_FIELDS = ("idx", "id", "index", "guid", "pairID")
UNKNOWN = (
    "an unknown benchmark layout: not SQuAD JSON, a GLUE TSV or a SuperGLUE JSONL file (for another JSONL, JSON or "
    "Parquet file, name its text fields with --benchmark-text-field)"
)


class _Texts:
    """Texts in the order met, each once, with the examples that hold it."""

    def __init__(self):
        self.by_text: dict[str, list[str]] = {}
        self.examples: set[str] = set()

    def add(self, example: str, *texts) -> None:
        self.examples.add(example)
        for text in texts:
            if isinstance(text, str) and text.strip():
                holders = self.by_text.setdefault(text, [])
                if not holders or holders[-1] != example:
                    holders.append(example)

    def benchmark(self, name: str, layout: str, unreadable: int = 0) -> Benchmark:
        texts = [BenchmarkText(text, examples) for text, examples in self.by_text.items()]
        return Benchmark(name, layout, len(self.examples), texts, unreadable)


def parse_benchmark(name: str, file_name: str, data: bytes, text_fields: list[str] | None = None) -> Benchmark:
    """A benchmark file's texts; `file_name` (without a compression suffix) gives its format, `name` its name in
    messages and reports. Raises BenchmarkError for an empty file, an unknown layout, a SQuAD file without
    contexts, and a file that holds no text."""
    if not data.strip():
        raise BenchmarkError(f"benchmark {file_name}: the file is empty")
    lower = file_name.lower()
    if lower.endswith(".parquet"):
        records, unreadable = _parquet_records(file_name, data), 0
    elif lower.endswith(".tsv"):
        return _checked(_glue_tsv(name, file_name, data, text_fields), file_name)
    elif lower.endswith((".json", ".jsonl")):
        document, error = _whole_json(data) if lower.endswith(".json") else (None, None)
        if isinstance(document, dict):
            return _checked(_squad(name, file_name, document), file_name)
        if isinstance(document, list):
            records, unreadable = document, 0
        else:
            records, unreadable, line_error = _json_lines(data)
            if not records:  # not JSON as a whole, nor a line of it: a truncated or damaged file, named as such
                raise BenchmarkError(f"benchmark {file_name}: not valid JSON: {error or line_error}")
    else:
        raise BenchmarkError(
            f"benchmark {file_name}: {UNKNOWN}; its name ends in none of .json, .jsonl, .tsv, .parquet"
        )
    return _checked(_records(name, file_name, records, unreadable, text_fields), file_name)


def _checked(benchmark: Benchmark, file_name: str) -> Benchmark:
    if not benchmark.texts:
        raise BenchmarkError(f"benchmark {file_name}: no text in its {benchmark.examples:,} examples")
    return benchmark


def _whole_json(data: bytes) -> tuple[object, str | None]:
    """The file as one JSON document, or None and why it is not one (the error and its place: line, column, char),
    where it may still be JSON lines under a .json name, as some exports write them."""
    try:
        return json.loads(data), None
    except ValueError as e:
        return None, str(e)


def _json_lines(data: bytes) -> tuple[list, int, str | None]:
    """The records of a JSON lines file, the count of lines that are not JSON, and why the first of them is not."""
    records, unreadable, first_error = [], 0, None
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as e:
            unreadable += 1
            first_error = first_error or f"line {number}: {e}"
    return records, unreadable, first_error


def _parquet_records(file_name: str, data: bytes) -> list[dict]:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(io.BytesIO(data)).to_pylist()
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise BenchmarkError(f"benchmark {file_name}: not a readable Parquet file: {str(e).splitlines()[0]}") from None


# ---------------------------------------------------------------------------------------------- SQuAD


def _squad(name: str, file_name: str, document: dict) -> Benchmark:
    articles = document.get("data")
    if not isinstance(articles, list):
        raise BenchmarkError(f"benchmark {file_name}: {UNKNOWN}; it is a JSON object without a list of articles")
    texts, contexts = _Texts(), 0
    for a, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        for p, paragraph in enumerate(paragraphs if isinstance(paragraphs, list) else []):
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str):
                continue
            contexts += 1
            questions = [q for q in paragraph.get("qas") or [] if isinstance(q, dict)]
            ids = [str(q.get("id", f"{a}/{p}/{i}")) for i, q in enumerate(questions)] or [f"{a}/{p}"]
            for example in ids:
                texts.add(example, paragraph["context"])
            for example, question in zip(ids, questions):
                texts.add(example, question.get("question"))
    if not contexts:
        raise BenchmarkError(
            f"benchmark {file_name}: a SQuAD file without contexts ({len(articles):,} articles, no paragraph with "
            'a "context")'
        )
    version = document.get("version")
    return texts.benchmark(name, f"SQuAD {version}" if isinstance(version, str) else "SQuAD")


# ---------------------------------------------------------------------------------------------- GLUE TSV


def _glue_tsv(name: str, file_name: str, data: bytes, text_fields: list[str] | None) -> Benchmark:
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    rows = [row for row in csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE) if row]
    header = rows[0]
    if len(header) == 4 and header[1] in ("0", "1"):  # CoLA's train and dev files: no header row
        columns, body, id_column, layout = [3], rows, None, "GLUE TSV: CoLA (no header)"
    else:
        named = [c for c in text_fields or () if c in header]
        wanted = named or [c for c in header if c in TEXT_FIELDS]
        if not wanted:
            raise BenchmarkError(
                f"benchmark {file_name}: {UNKNOWN}; its header has none of the text columns "
                f"{', '.join(text_fields or TEXT_FIELDS)}"
            )
        columns, body = [header.index(c) for c in wanted], rows[1:]
        id_column = next((header.index(c) for c in ID_FIELDS if c in header), None)
        layout = f"GLUE TSV: {', '.join(wanted)}"
    texts, unreadable = _Texts(), 0
    for number, row in enumerate(body):
        if len(row) < len(header):
            unreadable += 1
            continue
        texts.add(row[id_column] if id_column is not None else str(number), *(row[i] for i in columns))
    return texts.benchmark(name, layout, unreadable)


# ---------------------------------------------------------------------------------------------- records


def _value(record: dict, path: str):
    value = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _layout(record: dict) -> str | None:
    return next((layout for layout, fields in LAYOUTS if all(_value(record, f) is not None for f in fields)), None)


def _record_texts(layout: str, record: dict) -> list:
    """The texts of one record of a known layout."""
    if layout == "MultiRC":
        passage = record["passage"]
        questions = [q for q in passage.get("questions") or [] if isinstance(q, dict)]
        answers = [a.get("text") for q in questions for a in q.get("answers") or [] if isinstance(a, dict)]
        return [passage.get("text"), *(q.get("question") for q in questions), *answers]
    if layout == "ReCoRD":
        queries = [q.get("query") for q in record.get("qas") or [] if isinstance(q, dict)]
        return [record["passage"].get("text"), *queries]
    return [record.get(f) for f in dict(LAYOUTS)[layout] if f in TEXT_FIELDS]


def _records(name: str, file_name: str, records: list, unreadable: int, text_fields: list[str] | None) -> Benchmark:
    dicts = [r for r in records if isinstance(r, dict)]
    unreadable += len(records) - len(dicts)
    if not dicts:
        raise BenchmarkError(f"benchmark {file_name}: {UNKNOWN}; it holds no JSON object")
    named = text_fields and any(all(_value(r, f) is not None for f in text_fields) for r in dicts[:100])
    layout = f"fields {', '.join(text_fields)}" if named else _layout(dicts[0])
    if layout is None:
        raise BenchmarkError(f"benchmark {file_name}: {UNKNOWN}; its first record has the fields {', '.join(dicts[0])}")
    texts = _Texts()
    for number, record in enumerate(dicts):
        example = next((str(record[f]) for f in ID_FIELDS if record.get(f) is not None), str(number))
        values = [_value(record, f) for f in text_fields] if named else _record_texts(layout, record)
        texts.add(example, *values)
    return texts.benchmark(name, layout, unreadable)
