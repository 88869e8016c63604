"""`bertcorpus stats DIR`: a data card (stats.json, report.html and its plots) for documents, records or a run.

    DIR ─ find manifest.json (DIR, one and two levels down) ─┬─ documents stages ─ one pass over the Parquet files:
                                                             │    sizes, sources, extremes; [UNK] words with the vocab
                                                             ├─ records stages ─ one pass over the TFRecord shards
                                                             │    per seq config: lengths, NSP, masking, [UNK], vocab
                                                             └─ every manifest ─ lineage: files linked by name + sha256
      ─ DIR/stats.json, DIR/report_files/*.png, DIR/report.html (last)

This is not a Beam job: the statistics of even a full corpus are a single sequential read, and a sample cap
(--max-records, --max-documents) bounds the time. Memory is bounded by construction: fixed-size counters,
one Parquet row group or one batch of records at a time.
"""
from __future__ import annotations

import hashlib
import html
import itertools
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import UserError

ACCEPTS_BEAM_OPTIONS = False
MANIFEST = "manifest.json"
REPORT = "report.html"
REPORT_FILES = "report_files"
STATS = "stats.json"
RECORD_BATCH = 4096        # records decoded at once
DOCUMENT_BATCH = 1024      # documents read at once
TOP_UNKNOWN_WORDS = 20
SPLITS = ("train", "eval")


# ---------------------------------------------------------------------------------------------- finding stages

@dataclass
class Stage:
    """One finished job output: its directory and its manifest."""

    name: str          # the directory relative to DIR ("." for DIR itself)
    dir: Path
    manifest: dict
    manifest_sha256: str
    manifest_bytes: int

    @property
    def job(self) -> str:
        return str(self.manifest.get("job", "unknown"))

    @property
    def kind(self) -> str:
        outputs = self.manifest.get("outputs")
        if not isinstance(outputs, dict):
            return "other"
        if isinstance(outputs.get("documents"), list):
            return "documents"
        if self.job == "create" or any(isinstance(v, dict) and "max_seq_length" in v for v in outputs.values()):
            return "records"
        return "other"


def find_stages(root: Path, warnings: list[str]) -> list[Stage]:
    """Every readable manifest in DIR and one or two levels below it (hidden and report folders skipped)."""
    paths = [root / MANIFEST, *sorted(root.glob(f"*/{MANIFEST}")), *sorted(root.glob(f"*/*/{MANIFEST}"))]
    stages = []
    for path in paths:
        parts = path.relative_to(root).parts[:-1]
        if not path.is_file() or any(p.startswith(".") or p == REPORT_FILES for p in parts):
            continue
        raw = path.read_bytes()
        try:
            manifest = json.loads(raw)
        except ValueError as e:
            warnings.append(f"{path} is not valid JSON ({e}); skipped")
            continue
        if not isinstance(manifest, dict):
            warnings.append(f"{path} is not a bertcorpus manifest; skipped")
            continue
        stages.append(Stage("/".join(parts) or ".", path.parent, manifest, hashlib.sha256(raw).hexdigest(),
                            len(raw)))
    return stages


# ---------------------------------------------------------------------------------------------- vocab

def resolve_vocab(explicit: str | None, records: list[Stage], root: Path, warnings: list[str]):
    """The vocab to use and where it came from; checks its sha256 against each records manifest."""
    from wordpiece.vocab import Vocab

    if explicit:
        vocab, path = Vocab.load(explicit), explicit
    elif records:
        named = str(records[0].manifest.get("vocab", {}).get("path", ""))
        candidates = [named] if "://" in named else [str(p) for p in dict.fromkeys(
            [Path(named), records[0].dir / named, root / named]) if p.is_file()]
        if not named or not candidates:
            raise UserError(f"the vocab {named or '(none)'} named in {records[0].dir / MANIFEST} was not found; "
                            "pass --vocab")
        path = candidates[0]
        vocab = Vocab.load(path)
    else:
        return None, None
    for stage in records:
        expected = stage.manifest.get("vocab", {}).get("sha256")
        if expected != vocab.sha256:
            warnings.append(f"the vocab {path} has sha256 {vocab.sha256}, but {stage.name}/{MANIFEST} records "
                            f"{expected}: the records were made with another vocab, so token statistics may "
                            "be wrong")
    return vocab, path


# ---------------------------------------------------------------------------------------------- documents pass

def documents_pass(stages: list[Stage], vocab, lowercase: bool, max_documents: int):
    """One read of every documents file: DocumentStats, and UnknownWords when there is a vocab."""
    import pyarrow.parquet as pq
    from tqdm import tqdm

    from transforms.document_stats import DocumentStats, UnknownWords
    from wordpiece.tokenizer import WordPieceTokenizer

    stats = DocumentStats()
    unknown = UnknownWords(WordPieceTokenizer(vocab, lowercase)) if vocab is not None else None
    files = [stage.dir / f["path"] for stage in stages for f in stage.manifest["outputs"]["documents"]]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise UserError(f"documents files named in a manifest are missing: {', '.join(missing[:3])}")
    total = sum(s.manifest.get("documents", {}).get("kept", 0) for s in stages)
    with tqdm(total=total, desc="documents", unit=" docs", file=sys.stderr, dynamic_ncols=True) as bar:
        for path in files:
            for batch in pq.ParquetFile(path).iter_batches(columns=["id", "source", "title", "text"],
                                                           batch_size=DOCUMENT_BATCH):
                ids, sources, titles, texts = (c.to_pylist() for c in batch.columns)
                stats.add(ids, sources, titles, texts)
                if unknown is not None:
                    for text in texts[:max(0, max_documents - unknown.documents)]:
                        unknown.add(text)
                bar.update(len(ids))
    return stats, unknown


def documents_counts(stage: Stage) -> dict:
    """What the extraction manifest says about every input item: read, kept, skipped and errors by reason."""
    docs = stage.manifest.get("documents", {})
    skipped = dict(docs.get("skipped", {}))
    return {"job": stage.job, "read": docs.get("read"), "kept": docs.get("kept"), "skipped": skipped,
            "errors": docs.get("errors"), "errors_by_reason": docs.get("errors_by_reason", {}),
            "duplicates_dropped": skipped.get("duplicate_id", 0), "characters": docs.get("characters")}


# ---------------------------------------------------------------------------------------------- records pass

def token_ids(vocab):
    from transforms.record_stats import TokenIds
    from wordpiece.vocab import MASK, UNK

    ids = vocab.ids
    return TokenIds(vocab_size=len(vocab), mask=ids[MASK], unk=ids[UNK])


def _quotas(sizes: list[int], cap: int) -> list[int]:
    """Records to read from each shard: all of them, or `cap` in all, shared in proportion to the shards' sizes
    (largest remainders first), so that a sample draws on every shard and on both splits."""
    total = sum(sizes)
    if cap <= 0 or cap >= total:
        return list(sizes)
    exact = [cap * n / total for n in sizes]
    quotas = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(sizes)), key=lambda i: quotas[i] - exact[i])
    for i in by_remainder[:cap - sum(quotas)]:
        quotas[i] += 1
    return quotas


def records_pass(stage: Stage, ids, max_records: int, warnings: list[str]) -> dict:
    """{seq name: (config and shard table, {split: RecordStats})}, reading at most max_records per seq config."""
    from tqdm import tqdm

    from transforms.record_stats import RecordFormatError, RecordStats, decode_batch
    from transforms.tfrecord import iter_tfrecords

    result = {}
    for seq, out in stage.manifest["outputs"].items():
        length, predictions = int(out["max_seq_length"]), int(out["max_predictions_per_seq"])
        shards = [(split, s) for split in SPLITS if split in out for s in out[split]["shards"]]
        quotas = _quotas([s["records"] for _, s in shards], max_records)
        accumulators = {split: RecordStats(length, predictions, ids) for split in SPLITS if split in out}
        rows = []
        with tqdm(total=sum(quotas), desc=f"{stage.name} {seq}", unit=" records", file=sys.stderr,
                  dynamic_ncols=True) as bar:
            for (split, shard), quota in zip(shards, quotas):
                path = stage.dir / shard["path"]
                if not path.is_file():
                    raise UserError(f"{path} is named in {stage.dir / MANIFEST} but missing")
                read = 0
                with open(path, "rb") as f:
                    frames = iter_tfrecords(f)
                    records = itertools.islice(frames, quota)
                    try:
                        while batch := list(itertools.islice(records, RECORD_BATCH)):
                            accumulators[split].add(decode_batch(batch, length, predictions))
                            read += len(batch)
                            bar.update(len(batch))
                        more = quota == shard["records"] and next(frames, None) is not None
                    except (ValueError, RecordFormatError) as e:
                        raise UserError(f"{path}, after record {read}: {e}") from None
                row = {"path": shard["path"], "split": split, "records": shard["records"],
                       "bytes": shard.get("bytes"), "file_bytes": path.stat().st_size, "records_read": read}
                rows.append(row)
                if row["bytes"] is not None and row["file_bytes"] != row["bytes"]:
                    warnings.append(f"{path} has {row['file_bytes']:,} bytes, its manifest says {row['bytes']:,}")
                if read < quota or more:
                    warnings.append(f"{path} does not hold the {shard['records']:,} records its manifest says")
        result[seq] = ({"max_seq_length": length, "max_predictions_per_seq": predictions,
                        "instances": {split: out[split]["instances"] for split in accumulators},
                        "shards": rows}, accumulators)
    return result


# ---------------------------------------------------------------------------------------------- lineage

def _fingerprint(entry: dict) -> dict:
    keep = ("path", "size", "bytes", "records", "documents", "sha256", "sha256_first_and_last_mib")
    return {k: entry[k] for k in keep if k in entry}


def _files_in(node) -> list[dict]:
    """Every {path, sha256} description anywhere inside a manifest's outputs."""
    if isinstance(node, dict):
        if "path" in node and ("sha256" in node or "sha256_first_and_last_mib" in node):
            return [_fingerprint(node)]
        return [f for value in node.values() for f in _files_in(value)]
    if isinstance(node, list):
        return [f for value in node for f in _files_in(value)]
    return []


def _stage_inputs(stage: Stage) -> list[dict]:
    inputs = []
    for entry in stage.manifest.get("inputs", []):
        if isinstance(entry, dict) and "path" in entry:
            inputs.append({**_fingerprint(entry), "role": "input"})
            if isinstance(entry.get("index"), dict):
                inputs.append({**_fingerprint(entry["index"]), "role": "index"})
    vocab = stage.manifest.get("vocab")
    if isinstance(vocab, dict) and "path" in vocab:
        inputs.append({"path": vocab["path"], "sha256": vocab.get("sha256"), "role": "vocab"})
    return inputs


def build_lineage(stages: list[Stage]) -> dict:
    """Stages with their input and output files; an input is linked to the stage that wrote a file of the same
    name and sha256, so the chain holds even after a run directory is moved."""
    described = []
    produced: dict[tuple[str, str], str] = {}
    for stage in stages:
        outputs = _files_in(stage.manifest.get("outputs", {}))
        outputs.append({"path": MANIFEST, "bytes": stage.manifest_bytes, "sha256": stage.manifest_sha256})
        for f in outputs:
            produced.setdefault((Path(f["path"]).name, f.get("sha256", "")), stage.name)
        described.append({"stage": stage.name, "job": stage.job, "kind": stage.kind,
                          "inputs": _stage_inputs(stage), "outputs": outputs})
    links: dict[tuple[str, str], int] = {}
    for d in described:
        for entry in d["inputs"]:
            source = produced.get((Path(str(entry["path"])).name, entry.get("sha256") or ""))
            if source is not None and source != d["stage"]:
                entry["from"] = source
                links[(source, d["stage"])] = links.get((source, d["stage"]), 0) + 1
    return {"stages": described,
            "links": [{"from": a, "to": b, "files": n} for (a, b), n in sorted(links.items())]}


# ---------------------------------------------------------------------------------------------- the card

def build_card(root: Path, vocab_arg: str | None, max_records: int, max_documents: int) -> tuple[dict, dict]:
    """(stats.json content, what the plots need beyond it: the record accumulators)."""
    from pipeline.output import TOOL_VERSION
    from transforms.document_stats import EDGES

    warnings: list[str] = []
    stages = find_stages(root, warnings)
    if not stages:
        raise UserError(f"no {MANIFEST} in {root} or one or two levels below it; stats reads finished outputs of "
                        "extract-wiki, extract-books or create (a directory without a manifest is incomplete)")
    documents = [s for s in stages if s.kind == "documents"]
    records = [s for s in stages if s.kind == "records"]
    vocab, vocab_path = resolve_vocab(vocab_arg, records, root, warnings)
    lowercase = bool(records[0].manifest.get("config", {}).get("do_lower_case", True)) if records else True
    card: dict = {"tool": "bertcorpus", "version": TOOL_VERSION, "job": "stats", "directory": str(root),
                  "options": {"vocab": vocab_path, "max_records": max_records or None,
                              "max_documents": max_documents or None},
                  "warnings": warnings, "lineage": build_lineage(stages)}
    for entry in (i for st in card["lineage"]["stages"] for i in st["inputs"] if i["role"] == "vocab" and vocab):
        # The vocab is usually made outside the run; the file in hand shows whether it is the one recorded.
        entry["checked"] = {"path": vocab_path, "sha256_matches": entry.get("sha256") == vocab.sha256}
    if documents:
        doc_stats, unknown = documents_pass(documents, vocab, lowercase, max_documents or sys.maxsize)
        card["documents"] = {"stages": {s.name: documents_counts(s) for s in documents},
                             "bin_edges": EDGES.tolist(), **doc_stats.summary()}
        card["unknown_words"] = (unknown.summary(TOP_UNKNOWN_WORDS) if unknown is not None else
                                 {"absent": "no vocab: pass --vocab to list the words that become [UNK]"})
        if unknown is not None:
            card["unknown_words"].update(vocab=vocab_path, lowercase=lowercase)
    else:
        card["documents"] = {"absent": f"no documents (documents-*.parquet with a {MANIFEST}) in {root}"}
        card["unknown_words"] = {"absent": "the words behind [UNK] need the source text, and there are no "
                                           f"documents in {root}; the [UNK] token rate of the records is given "
                                           "per sequence configuration"}
    accumulators = {}
    card["records"] = {}
    if not records:
        card["records"]["absent"] = f"no records (seq*/ with a {MANIFEST} from create) in {root}"
    ids = token_ids(vocab) if records else None
    for stage in records:
        per_seq = {}
        for seq, (info, splits) in records_pass(stage, ids, max_records, warnings).items():
            total = None
            for acc in splits.values():
                total = acc if total is None else total.merge(acc)
            accumulators[(stage.name, seq)] = total
            read = {s: a.instances for s, a in splits.items()}
            per_seq[seq] = {**info, "records_read": read, "sampled": read != info["instances"],
                            **{s: a.summary() for s, a in splits.items()}, "all": total.summary()}
        card["records"][stage.name] = {"vocab": {"path": vocab_path, "sha256": vocab.sha256,
                                                 "manifest_sha256": stage.manifest.get("vocab", {}).get("sha256")},
                                       "seq_configs": per_seq}
    return card, accumulators


# ---------------------------------------------------------------------------------------------- plots

def _figure(width: float = 6.4, height: float = 3.2):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    # Fixed margins fit every plot here, and cost nothing; tight_layout measures all the text first.
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.17, top=0.9)
    ax.grid(alpha=0.3)
    return fig, ax


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)


def plot_sizes(by_source: dict[str, dict], edges: list[float], what: str, path: Path) -> None:
    """Documents per size bin, one line per source, on a logarithmic size axis."""
    fig, ax = _figure()
    edges_arr = np.asarray(edges)
    used = np.zeros(len(edges) - 1, bool)
    for source, hist in by_source.items():
        counts = np.asarray(hist["counts"])
        used |= counts > 0
        ax.stairs(counts[1:], edges_arr[1:], label=f"{source} ({hist['documents']:,})", linewidth=1.5)
    found = np.flatnonzero(used[1:]) + 1
    if len(found):
        ax.set_xlim(edges_arr[found[0]], edges_arr[found[-1] + 1])
    ax.set_xscale("log")
    ax.set_xlabel(f"{what} per document (log scale, 10 bins per decade)")
    ax.set_ylabel("documents")
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_lengths(summary: dict, length: int, path: Path) -> None:
    fig, ax = _figure()
    hist = np.asarray(summary["real_tokens_hist"])
    ax.stairs(hist, np.arange(len(hist) + 1), fill=True, color="#4472c4")
    ax.set_yscale("log")  # full-length instances dominate; a log scale shows the short ones too
    ax.axvline(summary["mean_real_tokens"], color="#c00000", linestyle="--",
               label=f"mean {summary['mean_real_tokens']:.1f}")
    ax.set_xlim(0, length + 1)
    ax.set_xlabel(f"real tokens per instance (sum of input_mask; max {length})")
    ax.set_ylabel("instances")
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_segments(summary: dict, length: int, path: Path) -> None:
    fig, ax = _figure()
    edges = np.arange(length + 2)
    for segment in ("a", "b"):
        mean = summary[f"mean_segment_{segment}_tokens"]
        ax.stairs(summary[f"segment_{segment}_tokens_hist"], edges, linewidth=1.5,
                  label=f"segment {segment.upper()} (mean {mean:.1f})")
    ax.set_xlim(0, length + 1)
    ax.set_xlabel("tokens per segment (without [CLS]/[SEP])")
    ax.set_ylabel("instances")
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_masked(summary: dict, predictions: int, path: Path) -> None:
    fig, ax = _figure()
    hist = summary["masked_positions_hist"]
    ax.stairs(hist, np.arange(len(hist) + 1) - 0.5, fill=True, color="#70ad47")
    ax.set_xlim(-0.5, predictions + 0.5)
    ax.set_xlabel(f"masked positions per instance (max_predictions_per_seq {predictions})")
    ax.set_ylabel("instances")
    _save(fig, path)


def plot_vocab(counts: np.ndarray, coverage: float, path: Path) -> None:
    fig, ax = _figure()
    ranked = np.sort(counts)[::-1]
    ranked = ranked[ranked > 0]
    if len(ranked):
        # A few hundred log-spaced ranks draw the same curve as all of them.
        ranks = np.unique(np.geomspace(1, len(ranked), 400).astype(np.int64))
        ax.loglog(ranks, ranked[ranks - 1], color="#7030a0")
    ax.set_xlabel(f"vocab id rank (ids used by text tokens: {len(ranked):,} of {len(counts):,})")
    ax.set_ylabel("occurrences in text tokens")
    ax.set_title(f"vocab coverage (input_ids ∪ masked_lm_ids): {coverage:.1%}", fontsize=9)
    _save(fig, path)


def plot_shards(rows: list[dict], path: Path) -> None:
    fig, ax = _figure()
    colours = {"train": "#4472c4", "eval": "#ed7d31"}
    for split in SPLITS:
        picked = [(i, r["records"]) for i, r in enumerate(rows) if r["split"] == split]
        if picked:
            ax.bar([i for i, _ in picked], [n for _, n in picked], width=1.0, color=colours[split], label=split)
    ax.set_xlabel("shard (train shards first, then eval)")
    ax.set_ylabel("records")
    ax.legend(fontsize=8)
    _save(fig, path)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "run"


def write_plots(card: dict, accumulators: dict, folder: Path) -> dict[str, str]:
    """Every plot as folder/NAME.png; returns {plot key: file name}."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    written = {}

    def target(key: str) -> Path:
        written[key] = f"{_slug(key)}.png"
        return folder / written[key]

    docs = card["documents"]
    if "absent" not in docs:
        plot_sizes(docs["chars_by_source"], docs["bin_edges"], "characters", target("document_chars"))
        plot_sizes(docs["words_by_source"], docs["bin_edges"], "words", target("document_words"))
    several = len([k for k in card["records"] if k != "absent"]) > 1
    for stage, info in card["records"].items():
        if stage == "absent":
            continue
        for seq, s in info["seq_configs"].items():
            prefix = f"{stage} {seq}" if several else seq
            summary, length = s["all"], s["max_seq_length"]
            if not summary["instances"]:
                continue
            plot_lengths(summary, length, target(f"{prefix} lengths"))
            plot_segments(summary, length, target(f"{prefix} segments"))
            plot_masked(summary, s["max_predictions_per_seq"], target(f"{prefix} masked"))
            plot_vocab(accumulators[(stage, seq)].original_counts, summary["vocab_coverage"],
                       target(f"{prefix} vocab"))
            plot_shards(s["shards"], target(f"{prefix} shards"))
    return written


# ---------------------------------------------------------------------------------------------- HTML

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 0.9em; word-break: break-all; }
.warn { background: #fff4ce; border: 1px solid #e0c060; padding: 0.5em 1em; }
.note { color: #555; font-size: 0.9em; }
figure { display: inline-block; margin: 0.5em 1em 0.5em 0; }
figcaption { font-size: 0.85em; color: #555; max-width: 40em; }
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _n(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else _e(value)


def _table(header: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="n">{_n(c)}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _figure_html(plots: dict[str, str], key: str, caption: str) -> str:
    if key not in plots:
        return ""
    return (f'<figure><img src="{REPORT_FILES}/{_e(plots[key])}" alt="{_e(caption)}" width="640" height="320">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _short(sha: str | None) -> str:
    return f"<code title=\"{_e(sha)}\">{_e(sha[:16])}…</code>" if sha else "—"


def _lineage_html(lineage: dict) -> str:
    parts = ["<h2>Lineage</h2>"]
    if lineage["links"]:
        chain = "; ".join(f"<code>{_e(l['from'])}</code> → <code>{_e(l['to'])}</code> ({l['files']} files)"
                          for l in lineage["links"])
        parts.append(f"<p>Stages linked by files that one wrote and the next read (same name and sha256): "
                     f"{chain}.</p>")
    else:
        parts.append("<p>No stage read a file that another stage here wrote.</p>")
    for stage in lineage["stages"]:
        parts.append(f"<h3>{_e(stage['job'])} → <code>{_e(stage['stage'])}/</code></h3>")
        rows = [[_e(i.get("role", "")), f"<code>{_e(i['path'])}</code>", i.get("size"),
                 _short(i.get("sha256") or i.get("sha256_first_and_last_mib")),
                 _written_by(i)] for i in stage["inputs"]]
        parts.append(_table(["role", "input", "bytes", "sha256", "written by"], rows, {2}))
        outputs = stage["outputs"]
        shown = outputs[:8]
        rows = [[f"<code>{_e(o['path'])}</code>", o.get("records", o.get("documents")), o.get("bytes"),
                 _short(o.get("sha256"))] for o in shown]
        parts.append(_table(["output", "records", "bytes", "sha256"], rows, {1, 2}))
        if len(outputs) > len(shown):
            parts.append(f'<p class="note">… and {len(outputs) - len(shown):,} more outputs, all in stats.json.</p>')
    return "".join(parts)


def _written_by(entry: dict) -> str:
    if "from" in entry:
        return f"<code>{_e(entry['from'])}/</code>"
    checked = entry.get("checked")
    if checked is None:
        return "outside this directory"
    verdict = "same sha256" if checked["sha256_matches"] else "<b>a different sha256</b>"
    return f"outside this directory; <code>{_e(checked['path'])}</code> read here has {verdict}"


def _documents_html(docs: dict, unknown: dict, plots: dict[str, str]) -> str:
    parts = ["<h2>Documents</h2>"]
    if "absent" in docs:
        return parts[0] + f"<p>{_e(docs['absent'])}.</p>" + _unknown_html(unknown)
    for name, c in docs["stages"].items():
        rows = [["read", c["read"]], ["kept", c["kept"]]]
        rows += [["duplicates dropped" if k == "duplicate_id" else f"skipped: {_e(k)}", v]
                 for k, v in sorted(c["skipped"].items())]
        rows += [["errors", c["errors"]]] + [[f"error: {_e(k)}", v] for k, v in sorted(c["errors_by_reason"].items())]
        parts.append(f"<h3>{_e(c['job'])} → <code>{_e(name)}/</code></h3>" + _table(["inputs", "count"], rows, {1}))
    rows = [[_e(s), n] for s, n in docs["by_source"].items()] + [["<b>all</b>", docs["documents"]]]
    parts.append("<h3>Documents by source</h3>" + _table(["source", "documents"], rows, {1}))
    size_rows = []
    for what in ("chars", "words"):
        h = docs[what]
        median = f"{h['median_bin'][0]:,.0f} – {h['median_bin'][1]:,.0f}" if h["median_bin"] else "—"
        size_rows.append([what, h["total"], h["mean"], h["min"], median, h["max"]])
    parts.append(_table(["per document", "total", "mean", "min", "median (bin)", "max"], size_rows, {1, 2, 3, 5}))
    parts.append(_figure_html(plots, "document_chars", "Characters per document, by source"))
    parts.append(_figure_html(plots, "document_words", "Words (whitespace-separated) per document, by source"))
    for title, key in (("Largest documents", "largest"), ("Smallest documents", "smallest")):
        rows = [[f"<code>{_e(d['id'])}</code>", _e(d["source"]), _e(d["title"] or "—"), d["chars"]]
                for d in docs[key]]
        parts.append(f"<h3>{title}</h3>" + _table(["id", "source", "title", "characters"], rows, {3}))
    return "".join(parts) + _unknown_html(unknown)


def _unknown_html(unknown: dict) -> str:
    parts = ["<h3>Words that become [UNK]</h3>"]
    if "absent" in unknown:
        return parts[0] + f"<p>{_e(unknown['absent'])}.</p>"
    parts.append(f"<p>{unknown['unk_words']:,} of {unknown['words']:,} whitespace-separated words "
                 f"({(unknown['unk_word_rate'] or 0):.4%}) in {unknown['documents']:,} documents contain [UNK] "
                 f"when tokenised with <code>{_e(unknown['vocab'])}</code>"
                 f"{' (lower-cased)' if unknown['lowercase'] else ''}."
                 f"{'' if unknown['counts_exact'] else ' Counts are lower bounds: too many distinct words.'}</p>")
    rows = [[f"<code>{_e(w['word'])}</code>", _e(_code_points(w["word"])), w["count"]] for w in unknown["top"]]
    return "".join(parts) + _table(["word", "characters outside ASCII", "count"], rows, {2})


def _code_points(word: str) -> str:
    """The non-ASCII characters of a word as U+XXXX, for those a reader's fonts cannot show."""
    unusual = list(dict.fromkeys(c for c in word if ord(c) > 0x7E))
    return " ".join(f"U+{ord(c):04X}" for c in unusual[:6]) + (" …" if len(unusual) > 6 else "")


# (label, key in a split's summary, format): the rows of a seq config's table.
RECORD_ROWS = (
    ("instances read", "instances", "{:,}"),
    ("random next (label 1)", "random_next", "{:,}"),
    ("random-next share", "random_next_share", "{:.2%}"),
    ("mean real tokens", "mean_real_tokens", "{:.1f}"),
    ("full-length share", "full_length_share", "{:.1%}"),
    ("mean tokens in A", "mean_segment_a_tokens", "{:.1f}"),
    ("mean tokens in B", "mean_segment_b_tokens", "{:.1f}"),
    ("masked positions", "masked_positions", "{:,}"),
    ("mean masked per instance", "mean_masked_positions", "{:.2f}"),
    ("masked shown as [MASK]", "mask_share", "{:.2%}"),
    ("masked kept as the original", "keep_share", "{:.2%}"),
    ("masked shown as a random token", "random_share", "{:.2%}"),
    ("[UNK] share of text tokens", "unk_token_rate", "{:.4%}"),
    ("vocab coverage", "vocab_coverage", "{:.1%}"),
)


def _seq_html(title: str, s: dict, vocab: dict, plots: dict[str, str], prefix: str) -> str:
    parts = [f"<h2>Records: <code>{_e(title)}</code> (max_seq_length {s['max_seq_length']}, "
             f"max_predictions_per_seq {s['max_predictions_per_seq']})</h2>"]
    if s["sampled"]:
        read = " + ".join(f"{n:,} {split}" for split, n in s["records_read"].items())
        of = " + ".join(f"{n:,}" for n in s["instances"].values())
        parts.append(f'<p class="note">Statistics of a sample: {read} records read of {of}, drawn from every '
                     "shard in proportion to its size.</p>")
    columns = [k for k in ("train", "eval", "all") if k in s]
    rows = [["instances (manifest)"] + [s["instances"].get(c, sum(s["instances"].values())) for c in columns]]
    rows += [[label] + [fmt.format(s[c][key]) if s[c][key] is not None else None for c in columns]
             for label, key, fmt in RECORD_ROWS]
    parts.append(_table([""] + columns, rows, set(range(1, len(columns) + 1))))
    same = vocab["sha256"] == vocab["manifest_sha256"]
    parts.append(f'<p class="note">Expected: random-next share 50%; masked positions shown as [MASK] / original / '
                 f"random token 80% / 10% / 10%. Vocab <code>{_e(vocab['path'])}</code>, sha256 "
                 f"{_short(vocab['sha256'])}{' (as in the manifest)' if same else ' — <b>not the manifest’s</b>'}."
                 "</p>")
    for key, caption in (("lengths", "Real tokens per instance, train and eval (log scale)"),
                         ("segments", "Tokens in segment A and in segment B"),
                         ("masked", "Masked positions per instance"),
                         ("vocab", "Vocab ids by how often they occur in the text tokens (before masking)"),
                         ("shards", "Records per shard")):
        parts.append(_figure_html(plots, f"{prefix} {key}", caption))
    rows = [[f"<code>{_e(r['path'])}</code>", r["records"], r["records_read"], r["bytes"], r["file_bytes"]]
            for r in s["shards"]]
    parts.append(f"<details><summary>{len(rows):,} shards</summary>"
                 + _table(["shard", "records (manifest)", "records read", "bytes (manifest)", "bytes (file)"],
                          rows, {1, 2, 3, 4}) + "</details>")
    return "".join(parts)


def _records_html(records: dict, plots: dict[str, str]) -> str:
    if "absent" in records:
        return f"<h2>Records</h2><p>{_e(records['absent'])}.</p>"
    several = len(records) > 1
    return "".join(_seq_html(f"{stage}/{seq}", s, info["vocab"], plots, f"{stage} {seq}" if several else seq)
                   for stage, info in records.items() for seq, s in info["seq_configs"].items())


def render_html(card: dict, plots: dict[str, str]) -> str:
    warnings = "".join(f"<li>{_e(w)}</li>" for w in card["warnings"])
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>Data card: {_e(card['directory'])}</title><style>{STYLE}</style></head><body>",
        f"<h1>Data card: <code>{_e(card['directory'])}</code></h1>",
        f'<p class="note">bertcorpus {_e(card["version"])} stats; every number is also in {STATS}.</p>',
        f'<div class="warn"><b>Warnings</b><ul>{warnings}</ul></div>' if warnings else "",
        _lineage_html(card["lineage"]),
        _documents_html(card["documents"], card["unknown_words"], plots),
        _records_html(card["records"], plots),
        "</body></html>\n",
    ])


# ---------------------------------------------------------------------------------------------- command line

def add_arguments(parser) -> None:
    parser.add_argument("dir", metavar="DIR",
                        help="a documents directory, a records directory, or a run directory holding both "
                             "(manifests are searched one and two levels down)")
    parser.add_argument("--vocab", help="vocab.txt (default: the one named in the records manifest)")
    parser.add_argument("--output", help="where stats.json, report.html and report_files/ go (default: DIR)")
    parser.add_argument("--max-records", type=int, default=0, metavar="N",
                        help="read at most N records per seq config, spread over the shards (default: all)")
    parser.add_argument("--max-documents", type=int, default=0, metavar="N",
                        help="tokenise at most N documents for the [UNK] word list (default: all); the other "
                             "document statistics always cover every document")


def run(args, beam_args: list[str]) -> int:
    root = Path(args.dir)
    if "://" in args.dir or not root.is_dir():
        raise UserError(f"{args.dir} is not a local directory")
    if args.max_records < 0 or args.max_documents < 0:
        raise UserError("--max-records and --max-documents must be >= 0")
    out = Path(args.output) if args.output else root
    card, accumulators = build_card(root, args.vocab, args.max_records, args.max_documents)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT).unlink(missing_ok=True)  # an old report must not point at plots about to be replaced
    plots = write_plots(card, accumulators, out / REPORT_FILES)
    (out / STATS).write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / REPORT).write_text(render_html(card, plots), encoding="utf-8")
    for warning in card["warnings"]:
        print(f"bertcorpus stats: warning: {warning}", file=sys.stderr)
    print(f"stats: {out / STATS}\nreport: {out / REPORT} ({len(plots)} plots in {out / REPORT_FILES})")
    return 0
