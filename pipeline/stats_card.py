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

import hashlib
import itertools
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import UserError

MANIFEST = "manifest.json"
STATS = "stats.json"           # the card
REPORT_FILES = "report_files"  # the plots' folder, never searched for manifests
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
        if self.job in ("vocab", "vocab-counts"):
            return "vocab"
        outputs = self.manifest.get("outputs")
        if not isinstance(outputs, dict):
            return "other"
        if isinstance(outputs.get("documents"), list):
            return "documents"
        if self.job == "create" or any(isinstance(v, dict) and "max_seq_length" in v for v in outputs.values()):
            return "records"
        return "other"


def _shard_problem(split: str, entry) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("shards"), list):
        return f"its {split} output has no list of shards"
    if not isinstance(entry.get("instances"), int):
        return f"its {split} output has no instance count"
    for shard in entry["shards"]:
        if not (isinstance(shard, dict) and isinstance(shard.get("path"), str)
                and isinstance(shard.get("records"), int)):
            return f"a {split} shard has no path or record count: {json.dumps(shard)[:80]}"
    return None


def _json_kind(value) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def manifest_problem(manifest) -> str | None:
    """Why a parsed manifest.json cannot be read as a stage, or None: the fields stats relies on, checked before
    any of them is used, so that a damaged manifest gets its own message instead of a traceback."""
    if not isinstance(manifest, dict):
        return f"it holds {_json_kind(manifest)}, not a JSON object"
    for key, kind in (("outputs", dict), ("inputs", list), ("vocab", dict), ("documents", dict)):
        if key in manifest and manifest[key] is not None and not isinstance(manifest[key], kind):
            return f'its "{key}" is {_json_kind(manifest[key])}, not {_json_kind(kind())}'
    outputs = manifest.get("outputs") or {}
    if "documents" in outputs:
        files = outputs["documents"]
        if not isinstance(files, list) or not all(isinstance(f, dict) and isinstance(f.get("path"), str)
                                                  for f in files):
            return 'its "outputs" name documents files without a path'
        return None
    for seq, out in outputs.items():
        if not isinstance(out, dict) or ("max_seq_length" not in out and manifest.get("job") != "create"):
            continue
        if not all(isinstance(out.get(k), int) for k in ("max_seq_length", "max_predictions_per_seq")):
            return f"its output {seq} has no integer max_seq_length and max_predictions_per_seq"
        for split in SPLITS:
            problem = _shard_problem(split, out[split]) if split in out else None
            if problem:
                return f"output {seq}: {problem}"
    return None


def find_stages(root: Path, warnings: list[str]) -> list[Stage]:
    """Every valid manifest in DIR and one or two levels below it (hidden and report folders skipped).

    An invalid one is skipped with a warning that says where and why; when no valid one is left, that is an
    error, since the user must repair or remove the manifest."""
    paths = [root / MANIFEST, *sorted(root.glob(f"*/{MANIFEST}")), *sorted(root.glob(f"*/*/{MANIFEST}"))]
    stages, invalid = [], []
    for path in paths:
        parts = path.relative_to(root).parts[:-1]
        if not path.is_file() or any(p.startswith(".") or p == REPORT_FILES for p in parts):
            continue
        raw = path.read_bytes()
        try:
            manifest = json.loads(raw)
        except ValueError as e:  # UnicodeDecodeError is one too
            invalid.append(f"{path} is not a valid manifest: it is not JSON ({e})")
            continue
        problem = manifest_problem(manifest)
        if problem:
            invalid.append(f"{path} is not a valid bertcorpus manifest: {problem}")
            continue
        stages.append(Stage("/".join(parts) or ".", path.parent, manifest, hashlib.sha256(raw).hexdigest(),
                            len(raw)))
    if invalid and not stages:
        raise UserError("; ".join(invalid) + " (rerun the job that wrote it, or remove it)")
    warnings += [f"{message}; skipped" for message in invalid]
    return stages


# ---------------------------------------------------------------------------------------------- vocab

def resolve_vocab(explicit: str | None, records: list[Stage], root: Path, warnings: list[str]):
    """The vocab to use and where it came from; checks its sha256 against each records manifest."""
    from wordpiece.vocab import Vocab

    if explicit:
        vocab, path = Vocab.load(explicit), explicit
    elif records:
        named = str(records[0].manifest.get("vocab", {}).get("path", ""))
        # The output's own copy of its vocab (the Parquet form has one) first: it moves with the output.
        copy = records[0].manifest.get("vocab", {}).get("copy")
        candidates = [named] if "://" in named else [str(p) for p in dict.fromkeys(
            ([records[0].dir / str(copy)] if copy else []) + [Path(named), records[0].dir / named, root / named])
            if p.is_file()]
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
    # disable=None: no bar where stderr is not a terminal, whose log its redraws would fill.
    with tqdm(total=total, desc="documents", unit=" docs", file=sys.stderr, dynamic_ncols=True, disable=None) as bar:
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
    from wordpiece.vocab import MASK, SEP, UNK

    ids = vocab.ids
    return TokenIds(vocab_size=len(vocab), mask=ids[MASK], unk=ids[UNK], sep=ids[SEP])


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


@dataclass
class SplitRead:
    """One split of one seq config, as a reader is asked for it: its shards (manifest entries) and how many records
    of each to read (a reader that cannot choose its records by shard reads as many in all). A reader may say how
    it drew the masks in `masks`."""

    stage: Stage
    split: str
    length: int
    predictions: int
    shards: list[dict]
    quotas: list[int]
    masks: dict | None = None

    def path(self, shard: int) -> Path:
        return self.stage.dir / self.shards[shard]["path"]

    def miscount(self, shard: int) -> str:
        return f"{self.path(shard)} does not hold the {self.shards[shard]['records']:,} records its manifest says"


def read_tfrecord_split(request: SplitRead, warnings: list[str]) -> Iterator[tuple[np.ndarray, dict]]:
    """The first `quota` records of each TFRecord shard, decoded into the reference feature layout a batch at a
    time, with each record's shard number. A whole shard is read one record past its count, to find records its
    manifest does not know."""
    from transforms.record_stats import RecordFormatError, decode_batch
    from transforms.tfrecord import iter_tfrecords

    for number, quota in enumerate(request.quotas):
        path, whole, read = request.path(number), quota == request.shards[number]["records"], 0
        try:
            with open(path, "rb") as f:
                records = itertools.islice(iter_tfrecords(f), quota + whole)
                while batch := list(itertools.islice(records, RECORD_BATCH)):
                    n = min(len(batch), quota - read)
                    if n < len(batch):
                        warnings.append(request.miscount(number))
                    if n:
                        decoded = decode_batch(batch[:n], request.length, request.predictions)
                        read += n
                        yield np.full(n, number), decoded
        except (ValueError, RecordFormatError) as e:
            raise UserError(f"{path}, after record {read}: {e}") from None
        if read < quota:
            warnings.append(request.miscount(number))


def read_parquet_split(request: SplitRead, warnings: list[str]) -> Iterator[tuple[np.ndarray, dict]]:
    """Instances of the Parquet form with the masks that trainer.loader draws for epoch 0 with its default seed and
    the manifest's masking settings (the first epoch of a trainer that leaves them alone), in the reference feature
    layout, padded to the batch's length bin; with each instance's shard number.

    Every instance once, in epoch order: the loader completes a split's (or a bin's) last batch with instances it
    gave already, and those are left out here; a sample is the epoch's first instances, spread over every shard
    by the epoch's shuffle. What is held beyond a batch is one flag per instance of the split."""
    import tempfile

    from trainer.loader import LoaderError, PretrainingLoader

    total, wanted = sum(s["records"] for s in request.shards), sum(request.quotas)
    if not wanted:
        return
    first_instance = np.cumsum([0] + [s["records"] for s in request.shards])
    # The loader keeps its index of instance lengths in a cache; stats leaves nothing behind outside its output.
    with tempfile.TemporaryDirectory(prefix="bertcorpus-stats-") as cache:
        try:
            loader = PretrainingLoader(str(request.stage.dir), seq_length=request.length, split=request.split,
                                       batch_size=min(RECORD_BATCH, total), drop_remainder=False, cache_dir=cache)
            state = loader.state_dict(0)
            request.masks = {"drawn_by": "trainer.loader.PretrainingLoader", "epoch": state["epoch"],
                             "seed": state["seed"], "masked_lm_prob": state["masked_lm_prob"],
                             "max_predictions_per_seq": state["max_predictions_per_seq"],
                             "whole_word_mask": state["whole_word_mask"]}
            seen = np.zeros(total, bool)
            taken = 0
            for i in range(len(loader)):
                instances = loader.batch_instances(i)
                fresh = np.zeros(len(instances), bool)
                fresh[np.unique(instances, return_index=True)[1]] = True
                fresh &= ~seen[instances]
                fresh[np.flatnonzero(fresh)[wanted - taken:]] = False
                if not fresh.any():
                    continue
                batch = loader[i]
                seen[instances[fresh]] = True
                taken += int(fresh.sum())
                yield (np.searchsorted(first_instance, instances[fresh], side="right") - 1,
                       {name: values[fresh] for name, values in batch.items()})
                if taken == wanted:
                    break
        except LoaderError as e:
            raise UserError(str(e)) from None


# How each stored form of records is read: {manifest form's file_format: reader}. A reader yields batches in the
# reference feature layout (what RecordStats counts) with each record's shard, so that a new form needs only its
# reader here.
RECORD_READERS = {"tfrecord": read_tfrecord_split, "parquet": read_parquet_split}
STATIC_NSP_FORM = {"masking": "static", "pair_objective": "nsp", "bin_size": None, "file_format": "tfrecord",
                   "label": "random_next"}


def record_form(stage: Stage) -> dict:
    """The manifest's description of its records; manifests written before create had other forms name none."""
    form = stage.manifest.get("form")
    return {**STATIC_NSP_FORM, **form} if isinstance(form, dict) else dict(STATIC_NSP_FORM)


def records_pass(stage: Stage, ids, max_records: int, warnings: list[str]) -> dict:
    """{seq name: (config and shard table, {split: RecordStats})}, reading at most max_records per seq config."""
    from tqdm import tqdm

    from transforms.record_stats import LABELS, RecordFormatError, RecordStats

    form = record_form(stage)
    reader = RECORD_READERS.get(form["file_format"])
    if reader is None:
        raise UserError(f"{stage.dir / MANIFEST} names records stored as {form['file_format']}; stats reads "
                        f"{', '.join(RECORD_READERS)} records")
    if form["label"] not in LABELS:
        raise UserError(f"{stage.dir / MANIFEST} names the label {form['label']}; stats knows {', '.join(LABELS)}")
    result = {}
    for seq, out in stage.manifest["outputs"].items():
        length, predictions = int(out["max_seq_length"]), int(out["max_predictions_per_seq"])
        splits = [split for split in SPLITS if split in out]
        quotas = iter(_quotas([s["records"] for split in splits for s in out[split]["shards"]], max_records))
        requests = [SplitRead(stage, split, length, predictions, out[split]["shards"],
                              [next(quotas) for _ in out[split]["shards"]]) for split in splits]
        for request in requests:
            for number in range(len(request.shards)):
                if not request.path(number).is_file():
                    raise UserError(f"{request.path(number)} is named in {stage.dir / MANIFEST} but missing")
        accumulators = {split: RecordStats(length, predictions, ids, form["label"]) for split in splits}
        rows = []
        with tqdm(total=sum(sum(r.quotas) for r in requests), desc=f"{stage.name} {seq}", unit=" records",
                  file=sys.stderr, dynamic_ncols=True, disable=None) as bar:  # (as in documents_pass)
            for request in requests:
                read = np.zeros(len(request.shards), np.int64)
                for shard_of, batch in reader(request, warnings):
                    try:
                        accumulators[request.split].add(batch)
                    except RecordFormatError as e:
                        where = np.unique(shard_of)
                        raise UserError(f"{request.path(where[0]) if len(where) == 1 else stage.dir / seq}: "
                                        f"{e}") from None
                    read += np.bincount(shard_of, minlength=len(read))
                    bar.update(len(shard_of))
                for number, shard in enumerate(request.shards):
                    path = request.path(number)
                    row = {"path": shard["path"], "split": request.split, "records": shard["records"],
                           "bytes": shard.get("bytes"), "file_bytes": path.stat().st_size,
                           "records_read": int(read[number])}
                    rows.append(row)
                    if row["bytes"] is not None and row["file_bytes"] != row["bytes"]:
                        warnings.append(f"{path} has {row['file_bytes']:,} bytes, its manifest says {row['bytes']:,}")
        masks = next((r.masks for r in requests if r.masks), {"stored": "in the records, as create drew them"})
        result[seq] = ({"max_seq_length": length, "max_predictions_per_seq": predictions,
                        "instances": {split: out[split]["instances"] for split in splits},
                        "manifest_bins": {split: out[split]["bins"] for split in splits if "bins" in out[split]},
                        "masks": masks, "shards": rows}, accumulators)
    return result


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
        return [f for key, value in node.items()
                for f in _files_in({"path": key, **value} if isinstance(value, dict) and "sha256" in value
                                   and "path" not in value else value)]
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
    from transforms.record_stats import bin_padding

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
                    counted = {str(b["width"]): b["instances"] for b in summary["padding"]["bins"] if b["instances"]}
                    if (split in manifest_bins and read == info["instances"]
                            and counted != {k: v for k, v in manifest_bins[split].items() if v}):
                        warnings.append(f"{stage.dir / MANIFEST} counts {seq} {split} instances per bin as "
                                        f"{manifest_bins[split]}, but their lengths give {counted}")
            per_seq[seq] = {**info, "records_read": read, "sampled": read != info["instances"], **summaries}
        card["records"][stage.name] = {"vocab": {"path": vocab_path, "sha256": vocab.sha256, "size": len(vocab),
                                                 "manifest_sha256": stage.manifest.get("vocab", {}).get("sha256")},
                                       "form": record_form(stage), "made_from": records_source(stage),
                                       "seq_configs": per_seq}
    return card, accumulators


# The settings of create that shape what its records hold, as its manifest's config names them.
RECIPE_SETTINGS = ("dupe_factor", "masked_lm_prob", "short_seq_prob", "whole_word_mask", "do_lower_case", "seed")


def records_source(stage: Stage) -> dict:
    """What create read and how it was set, from its manifest: documents, sentences and tokens, and the settings."""
    def section(key: str) -> dict:
        value = stage.manifest.get(key)
        return value if isinstance(value, dict) else {}

    documents, counts, config = section("documents"), section("counts"), section("config")
    return {"documents": documents.get("kept"), "sentences": counts.get("sentences"), "tokens": counts.get("tokens"),
            "settings": {k: config[k] for k in RECIPE_SETTINGS if k in config}}
