"""The card of `bertcorpus stats`: every finished stage under DIR read once, into the figures that become stats.json.

    DIR ─ find manifest.json (DIR, one and two levels down) ─┬─ documents stages ─ one pass over the Parquet files:
                                                             │    sizes, sources, extremes; [UNK] words with the vocab
                                                             ├─ records stages ─ one pass over the shards, through
                                                             │    the reader of their stored form (RECORD_READERS;
                                                             │    Parquet: masks of epoch 0 drawn by trainer.loader)
                                                             │    per seq config: lengths, label, masking, [UNK],
                                                             │    vocab, padding per length bin
                                                             └─ every manifest ─ lineage: files linked by name + sha256

Memory is bounded by construction: fixed-size counters, one Parquet row group or one batch of records at a time
(and for records of the Parquet form, one flag per instance of a split: which of them the loader gave already).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.stats.datasheet import build_datasheet
from bertcorpus.pipeline.stats.dedup_card import dedup_section
from bertcorpus.pipeline.stats.paths import portable
from bertcorpus.pipeline.stats.record_sources import record_sources
from bertcorpus.pipeline.stats.records import record_form, records_pass, token_ids
from bertcorpus.pipeline.stats.stages import MANIFEST, Stage, find_stages
from bertcorpus.transforms.languages import UNDETERMINED

DOCUMENT_BATCH = 1024  # documents read at once
TOP_UNKNOWN_WORDS = 20


# ---------------------------------------------------------------------------------------------- vocab


def resolve_vocab(explicit: str | None, records: list[Stage], root: Path, warnings: list[str]):
    """The vocab to use and where it came from; checks its sha256 against each records manifest. An output made with
    a tokenizer.json is read with its own copy of it (the manifest names its special tokens)."""
    from bertcorpus.wordpiece.tokenizer_file import TokenizerFile, TokenizerFileError, read_tokenizer_source
    from bertcorpus.wordpiece.vocab import Vocab

    tokenizer = records[0].manifest.get("tokenizer") if records else None
    if isinstance(tokenizer, dict) and not explicit:
        path = str(records[0].dir / str(tokenizer.get("copy") or "tokenizer"))
        try:
            vocab = TokenizerFile(read_tokenizer_source(path, tokenizer.get("specials") or {}))
        except TokenizerFileError as e:
            raise UserError(f"{e}; pass --vocab (a vocab.txt) or restore the output's tokenizer copy") from None
    elif explicit:
        vocab, path = Vocab.load(explicit), explicit
    elif records:
        named = str((records[0].manifest.get("vocab") or {}).get("path", ""))
        # The output's own copy of its vocab (the Parquet form has one) first: it moves with the output.
        copy = (records[0].manifest.get("vocab") or {}).get("copy")
        candidates = (
            [named]
            if "://" in named
            else [
                str(p)
                for p in dict.fromkeys(
                    ([records[0].dir / str(copy)] if copy else []) + [Path(named), records[0].dir / named, root / named]
                )
                if p.is_file()
            ]
        )
        if not named or not candidates:
            raise UserError(
                f"the vocab {named or '(none)'} named in {records[0].dir / MANIFEST} was not found; pass --vocab"
            )
        path = candidates[0]
        vocab = Vocab.load(path)
    else:
        return None, None
    for stage in records:
        entry = stage.manifest.get("tokenizer") or stage.manifest.get("vocab") or {}
        expected = entry.get("sha256")
        if expected != vocab.sha256:
            warnings.append(
                f"the vocab {path} has sha256 {vocab.sha256}, but {stage.name}/{MANIFEST} records "
                f"{expected}: the records were made with another vocab, so token statistics may "
                "be wrong"
            )
    return vocab, path


# ---------------------------------------------------------------------------------------------- documents pass


def documents_pass(stages: list[Stage], vocab, lowercase: bool, max_documents: int):
    """One read of every documents file: DocumentStats, UnknownWords when there is a vocab, and the documents of
    each source by language where the files have a `language` column (a null tag counts as undetermined)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tqdm import tqdm

    from bertcorpus.transforms.document_stats import DocumentStats, UnknownWords
    from bertcorpus.wordpiece.tokenizer_file import TokenizerFile

    stats = DocumentStats()
    if vocab is None:
        unknown = None
    elif isinstance(vocab, TokenizerFile):
        unknown = UnknownWords.of_tokenizer(vocab)
    else:
        unknown = UnknownWords.of_vocab(vocab, lowercase)
    files = [stage.dir / f["path"] for stage in stages for f in stage.manifest["outputs"]["documents"]]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise UserError(f"documents files named in a manifest are missing: {', '.join(missing[:3])}")
    languages: dict[str, Counter] = {}
    characters: Counter = Counter()  # per language
    total = sum(s.manifest.get("documents", {}).get("kept", 0) for s in stages)
    # disable=None: no bar where stderr is not a terminal, whose log its redraws would fill.
    with tqdm(total=total, desc="documents", unit=" docs", file=sys.stderr, dynamic_ncols=True, disable=None) as bar:
        for path in files:
            try:  # pages are read through their checksums: a damaged one is an error, not other text on the card
                parquet = pq.ParquetFile(path, page_checksum_verification=True)
                names = parquet.schema_arrow.names
                columns = ["id", "source", "title", "text"] + ["language"] * ("language" in names)
                for batch in parquet.iter_batches(columns=columns, batch_size=DOCUMENT_BATCH):
                    ids, sources, titles, texts, *language = (c.to_pylist() for c in batch.columns)
                    tags = [tag or UNDETERMINED for tag in language[0]] if language else [UNDETERMINED] * len(ids)
                    stats.add(ids, sources, titles, texts)
                    for source, tag, text in zip(sources, tags, texts):
                        languages.setdefault(source, Counter())[tag] += 1
                        characters[tag] += len(text)
                    if unknown is not None:
                        for text, tag in zip(texts[: max(0, max_documents - unknown.documents)], tags):
                            unknown.add(text, tag)
                    bar.update(len(ids))
            except (OSError, pa.ArrowException) as e:
                raise UserError(f"{path} cannot be read: {str(e).splitlines()[0]}") from None
    return stats, unknown, (languages, characters)


def language_table(
    by_source: dict[str, Counter], characters: Counter, unknown: dict | None, records: list[Stage]
) -> dict[str, dict]:
    """Per language: documents, characters and the [UNK] share of its words (from the documents), and the tokens of
    the documents create kept, with each output's instances and their target and achieved shares where the records'
    manifests give them."""
    table: dict[str, dict] = {}
    for counts in by_source.values():
        for tag, n in counts.items():
            table.setdefault(tag, {"documents": 0})["documents"] += n
    for tag, n in characters.items():
        table.setdefault(tag, {"documents": 0})["characters"] = n
    for tag, row in (unknown or {}).get("by_language", {}).items():
        entry = table.setdefault(tag, {"documents": 0})
        entry["unk_word_rate"], entry["pieces_per_word"] = row["unk_word_rate"], row.get("pieces_per_word")
    for stage in records:
        for tag, row in (stage.manifest.get("languages") or {}).items():
            entry = table.setdefault(tag, {"documents": row["documents"]})
            entry["tokens"] = entry.get("tokens", 0) + row["tokens"]
        for name, out in stage.manifest.get("outputs", {}).items():
            for split in ("train", "eval"):
                for tag, row in ((out.get(split) or {}).get("languages") or {}).items():
                    table.setdefault(tag, {"documents": 0}).setdefault("outputs", {})[f"{name} {split}"] = row
    return dict(sorted(table.items(), key=lambda kv: (-kv[1].get("documents", 0), kv[0])))


def documents_counts(stage: Stage) -> dict:
    """What the extraction manifest says about every input item: read, kept, skipped and errors by reason."""
    docs = stage.manifest.get("documents", {})
    skipped = dict(docs.get("skipped", {}))
    return {
        "job": stage.job,
        "read": docs.get("read"),
        "kept": docs.get("kept"),
        "skipped": skipped,
        "errors": docs.get("errors"),
        "errors_by_reason": docs.get("errors_by_reason", {}),
        "duplicates_dropped": skipped.get("duplicate_id", 0),
        "characters": docs.get("characters"),
    }


# ---------------------------------------------------------------------------------------------- lineage


def _fingerprint(entry: dict) -> dict:
    keep = ("path", "size", "bytes", "records", "documents", "sha256", "sha256_first_and_last_mib")
    return {k: entry[k] for k in keep if k in entry}


def _files_in(node) -> list[dict]:
    """Every {path, sha256} description anywhere inside a manifest's outputs; a file described under its name as
    key ({"vocab.txt": {"bytes", "sha256"}}, as the vocab job writes) has that name as its path."""
    if isinstance(node, dict):
        if "path" in node and ("sha256" in node or "sha256_first_and_last_mib" in node):
            return [_fingerprint(node)]
        return [
            f
            for key, value in node.items()
            for f in _files_in(
                {"path": key, **value}
                if isinstance(value, dict) and "sha256" in value and "path" not in value
                else value
            )
        ]
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


# The order data flows in: extraction, then the vocab (or its word counts), then create; anything else last.
FLOW_ORDER = {"documents": 0, "vocab": 1, "records": 2}


def build_lineage(stages: list[Stage]) -> dict:
    """Stages in flow order with their input and output files; an input is linked to the stage that wrote a file of
    the same name and sha256, so the chain holds even after a run directory is moved."""
    described = []
    produced: dict[tuple[str, str], str] = {}
    for stage in sorted(stages, key=lambda s: FLOW_ORDER.get(s.kind, len(FLOW_ORDER))):
        outputs = _files_in(stage.manifest.get("outputs", {}))
        outputs.append({"path": MANIFEST, "bytes": stage.manifest_bytes, "sha256": stage.manifest_sha256})
        for f in outputs:
            produced.setdefault((Path(f["path"]).name, f.get("sha256", "")), stage.name)
        described.append(
            {
                "stage": stage.name,
                "job": stage.job,
                "kind": stage.kind,
                "inputs": _stage_inputs(stage),
                "input_runs": stage.manifest.get("input_runs") or [],
                "outputs": outputs,
            }
        )
    links: dict[tuple[str, str], int] = {}
    for d in described:
        for entry in d["inputs"]:
            source = produced.get((Path(str(entry["path"])).name, entry.get("sha256") or ""))
            if source is not None and source != d["stage"]:
                entry["from"] = source
                links[(source, d["stage"])] = links.get((source, d["stage"]), 0) + 1
    return {"stages": described, "links": [{"from": a, "to": b, "files": n} for (a, b), n in sorted(links.items())]}


# ---------------------------------------------------------------------------------------------- the card


def build_card(
    root: Path, vocab_arg: str | None, max_records: int, max_documents: int, source_info: dict | None = None
) -> tuple[dict, dict]:
    """(stats.json content, what the plots need beyond it: the record accumulators). Paths in the card are relative
    to `root`, or named where they lie outside it; `source_info` holds each source's licence and provenance."""
    from bertcorpus.pipeline.sinks.output import TOOL_VERSION
    from bertcorpus.transforms.document_stats import EDGES
    from bertcorpus.transforms.record_stats import bin_padding

    warnings: list[str] = []
    stages = find_stages(root, warnings)
    if not stages:
        raise UserError(
            f"no {MANIFEST} in {root} or one or two levels below it; stats reads finished outputs of "
            "extract-wiki, extract-books or create (a directory without a manifest is incomplete)"
        )
    documents = [s for s in stages if s.kind == "documents"]
    records = [s for s in stages if s.kind == "records"]
    vocab, vocab_path = resolve_vocab(vocab_arg, records, root, warnings)
    lowercase = bool(records[0].manifest.get("config", {}).get("do_lower_case", True)) if records else True
    card: dict = {
        "tool": "bertcorpus",
        "version": TOOL_VERSION,
        "job": "stats",
        "directory": root.resolve().name,
        "options": {"vocab": vocab_path, "max_records": max_records or None, "max_documents": max_documents or None},
        "warnings": warnings,
        "lineage": build_lineage(stages),
    }
    card["dedup"] = dedup_section(stages)
    for entry in (i for st in card["lineage"]["stages"] for i in st["inputs"] if i["role"] == "vocab" and vocab):
        # The vocab is usually made outside the run; the file in hand shows whether it is the one recorded.
        entry["checked"] = {"path": vocab_path, "sha256_matches": entry.get("sha256") == vocab.sha256}
    if documents:
        doc_stats, unknown, (languages, characters) = documents_pass(
            documents, vocab, lowercase, max_documents or sys.maxsize
        )
        card["documents"] = {
            "stages": {s.name: documents_counts(s) for s in documents},
            "bin_edges": EDGES.tolist(),
            **doc_stats.summary(),
        }
        card["unknown_words"] = (
            unknown.summary(TOP_UNKNOWN_WORDS)
            if unknown is not None
            else {"absent": "no vocab: pass --vocab to list the words that become [UNK]"}
        )
        if unknown is not None:
            card["unknown_words"].update(vocab=vocab_path, lowercase=lowercase)
    else:
        languages, characters, unknown = {}, Counter(), None
        card["documents"] = {"absent": f"no documents (documents-*.parquet with a {MANIFEST}) in {root}"}
        card["unknown_words"] = {
            "absent": "the words behind [UNK] need the source text, and there are no "
            f"documents in {root}; the [UNK] token rate of the records is given "
            "per sequence configuration"
        }
    accumulators = {}
    card["records"] = {}
    if not records:
        card["records"]["absent"] = f"no records (seq*/ with a {MANIFEST} from create) in {root}"
    ids = token_ids(vocab) if records else None
    for stage in records:
        per_seq = {}
        bin_size = record_form(stage)["bin_size"]
        for seq, (info, splits) in records_pass(stage, ids, max_records, warnings).items():
            total = None
            for acc in splits.values():
                total = acc if total is None else total.merge(acc)
            accumulators[(stage.name, seq)] = total
            read = {s: a.instances for s, a in splits.items()}
            manifest_bins = info.pop("manifest_bins")
            summaries = {**{s: a.summary() for s, a in splits.items()}, "all": total.summary()}
            if bin_size:
                for split, summary in summaries.items():
                    summary["padding"] = bin_padding(summary["real_tokens_hist"], bin_size, info["max_seq_length"])
                    counted = {b["width"]: b["instances"] for b in summary["padding"]["bins"] if b["instances"]}
                    if (
                        split in manifest_bins
                        and read == info["instances"]
                        and counted != {k: v for k, v in manifest_bins[split].items() if v}
                    ):
                        warnings.append(
                            f"{stage.dir / MANIFEST} counts {seq} {split} instances per bin as "
                            f"{manifest_bins[split]}, but their lengths give {counted}"
                        )
            per_seq[seq] = {**info, "records_read": read, "sampled": read != info["instances"], **summaries}
        card["records"][stage.name] = {
            "vocab": {
                "path": vocab_path,
                "sha256": vocab.sha256,
                "size": len(vocab),
                "manifest_sha256": (stage.manifest.get("tokenizer") or stage.manifest.get("vocab") or {}).get("sha256"),
                **({"tokenizer": stage.manifest["tokenizer"]} if stage.manifest.get("tokenizer") else {}),
            },
            "form": record_form(stage),
            "made_from": records_source(stage),
            "seq_configs": per_seq,
        }
    card["languages"] = language_table(
        languages, characters, unknown.summary() if unknown is not None else None, records
    )
    by_source, unsourced, extractions = card["documents"].get("by_source", {}), None, stages
    if not documents:  # the records' own documents, where the files their manifests name are still there
        found = record_sources(records, {s.manifest_sha256 for s in stages})
        by_source, languages, extractions = dict(found.by_source), found.languages, stages + found.runs
        unsourced = {"documents": found.unsourced, "files": found.unsourced_files} if found.unsourced_files else None
    card["datasheet"] = build_datasheet(card, extractions, source_info or {}, by_source, languages, unsourced)
    return portable(card, str(root.resolve())), accumulators


# The settings of create that shape what its records hold, as its manifest's config names them.
RECIPE_SETTINGS = ("dupe_factor", "masked_lm_prob", "short_seq_prob", "whole_word_mask", "do_lower_case", "seed")


def records_source(stage: Stage) -> dict:
    """What create read and how it was set, from its manifest: documents, sentences and tokens, and the settings."""

    def section(key: str) -> dict:
        value = stage.manifest.get(key)
        return value if isinstance(value, dict) else {}

    documents, counts, config = section("documents"), section("counts"), section("config")
    return {
        "documents": documents.get("kept"),
        "sentences": counts.get("sentences"),
        "tokens": counts.get("tokens"),
        "settings": {k: config[k] for k in RECIPE_SETTINGS if k in config},
    }
