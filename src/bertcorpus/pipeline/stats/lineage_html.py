"""The lineage section of the data card's page: each stage that made the data, its inputs, outputs and vocab."""

from __future__ import annotations

import re

from bertcorpus.pipeline.stats.html_parts import escape, short_sha, stage_dir, table
from bertcorpus.pipeline.stats.stages import STATS

_SHARD_NUMBER = re.compile(r"-\d{5}-of-(\d{5})")


def _output_rows(outputs: list[dict]) -> list[list]:
    """One row per file, or per set of numbered shards (their sizes and records summed; each hash is in stats.json).
    Files of no bytes (a dead letter without errors) are left out."""
    groups: dict[str, list[dict]] = {}
    for o in (o for o in outputs if o.get("bytes") != 0):
        groups.setdefault(_SHARD_NUMBER.sub(r"-*-of-\1", o["path"]), []).append(o)
    rows = []
    for pattern, files in groups.items():

        def total(key: str, files=files):
            values = [f.get(key) for f in files]
            return None if None in values else sum(values)

        single = len(files) == 1
        rows.append(
            [
                f"<code>{escape(files[0]['path'] if single else pattern)}</code>",
                total("records") if "records" in files[0] else total("documents"),
                total("bytes"),
                short_sha(files[0].get("sha256")) if single else f"{len(files)} files: each in {STATS}",
            ]
        )
    return rows


def _outputs_table(outputs: list[dict]) -> str:
    rows = _output_rows(outputs)
    if all(row[1] is None for row in rows):  # files of no records, such as a vocab and its tokenizer files
        return table(["output", "bytes", "sha256"], [[row[0]] + row[2:] for row in rows], {1})
    return table(["output", "records", "bytes", "sha256"], rows, {1, 2})


def _written_by(entry: dict) -> str:
    return stage_dir(entry["from"]) if "from" in entry else "no stage here"


def _stage_html(stage: dict) -> str:
    inputs = [i for i in stage["inputs"] if i["role"] != "vocab"]
    roles = {i["role"] for i in inputs} != {"input"}
    rows = [
        ([escape(i["role"])] if roles else [])
        + [
            f"<code>{escape(i['path'])}</code>",
            i.get("size"),
            short_sha(i.get("sha256") or i.get("sha256_first_and_last_mib")),
            _written_by(i),
        ]
        for i in inputs
    ]
    header = (["role"] if roles else []) + ["input", "bytes", "sha256", "written by"]
    return (
        f"<h3>{escape(stage['job'])} → {stage_dir(stage['stage'])}</h3>"
        + _input_runs_html(stage.get("input_runs", []))
        + table(header, rows, {int(roles) + 1})
        + _outputs_table(stage["outputs"])
    )


def _input_runs_html(runs: list[dict]) -> str:
    """What made the documents a stage read, as its manifest records it: the dedup step (run and source) too."""
    said = [
        f"<code>{escape(r['input'])}</code>: {escape(r['job'])}"
        + (
            f" (source <code>{escape(r['dedup']['source'])}</code> of the run <code>{escape(r['dedup']['run'])}</code>)"
            if isinstance(r.get("dedup"), dict)
            else ""
        )
        for r in runs
    ]
    return f"<p>Documents read were made by: {'; '.join(said)}.</p>" if said else ""


def _vocab_html(stages: list[dict]) -> str:
    """The vocab step between extraction and create: each vocab file the records were made with, once."""
    used: dict[tuple, tuple[dict, list[str]]] = {}
    for stage in stages:
        for entry in stage["inputs"]:
            if entry["role"] == "vocab":
                used.setdefault((entry["path"], entry.get("sha256")), (entry, []))[1].append(stage["stage"])
    rows = [
        [
            f"<code>{escape(entry['path'])}</code>",
            short_sha(entry.get("sha256")),
            _written_by(entry),
            _vocab_found(entry),
            ", ".join(stage_dir(s) for s in users),
        ]
        for entry, users in used.values()
    ]
    listed = table(["vocab", "sha256", "written by", "the file read here", "read by"], rows)
    return f"<h3>The vocab create read</h3>{listed}" if listed else ""


def _vocab_found(entry: dict) -> str:
    checked = entry.get("checked")
    if checked is None:
        return "—"
    where = "" if checked["path"] == entry["path"] else f"<code>{escape(checked['path'])}</code>: "
    return where + ("the same sha256" if checked["sha256_matches"] else "<b>a different sha256</b>")


def lineage_html(lineage: dict) -> str:
    if lineage["links"]:
        chain = "; ".join(
            f"{stage_dir(link['from'])} → {stage_dir(link['to'])} "
            f"({link['files']} file{'s' if link['files'] > 1 else ''})"
            for link in lineage["links"]
        )
        parts = [
            f"<p>Stages in the order data flows through them, linked by files that one wrote and the next "
            f"read (same name and sha256): {chain}.</p>"
        ]
    else:
        parts = [
            "<p>Stages in the order data flows through them. No stage read a file that another stage here wrote.</p>"
        ]
    stages = lineage["stages"]
    vocab_step = _vocab_html(stages)
    for stage in stages:
        if stage["kind"] == "records" and vocab_step:
            parts.append(vocab_step)
            vocab_step = ""
        parts.append(_stage_html(stage))
    return "".join(parts) + vocab_step
