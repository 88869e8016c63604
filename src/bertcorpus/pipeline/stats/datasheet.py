"""The data card as a datasheet: per source, its licence and provenance, its languages, what dedup and
decontamination removed, its known limits and intended use; and the README.md with a Hugging Face dataset-card
header that goes beside the outputs, so that an output folder can be published as it is.

What a source is comes from the documents' `source` column (of the documents under DIR, or for records alone of
those create read: record_sources.py); only the sources that gave documents are described. Its licence and
provenance come from a --source-info file (YAML or JSON: source → license, license_name, provenance, limits,
intended_use), else from the extraction manifests: the job and the files it read, by name and sha256, and for
Wikipedia the licence under which Wikimedia publishes its dumps' text. Languages are counted from the documents'
`language` column where they have one, and are `und` (undetermined) where they do not; the README's header gives
the Hub's codes of the card's languages.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.stats.html_parts import escape, number, table
from bertcorpus.pipeline.stats.stages import Stage
from bertcorpus.transforms.languages import UNDETERMINED

FIELDS = ("license", "license_name", "provenance", "limits", "intended_use")
INTENDED_USE = (
    "Pretraining BERT-style masked language models and research on pretraining data. Not for training models "
    "that reproduce the sources verbatim, and not a benchmark: its text may overlap evaluation sets unless dedup's "
    "decontamination removed them."
)
# What Wikimedia's dumps state for article text, when no --source-info says more.
WIKIPEDIA_LICENSE = {
    "license": ["cc-by-sa-4.0", "gfdl"],
    "license_name": "CC BY-SA 4.0 and GFDL (CC BY-SA 3.0 for revisions before June 2023), as Wikimedia publishes "
    "Wikipedia's text",
}
JOB_LIMITS = {
    "extract-wiki": "article prose only: infoboxes, tables, lists, references and tail sections are removed",
    "extract-books": "licence headers, tables of contents and page furniture are removed; one document per book",
}
# The Hugging Face Hub's size categories, by the number of rows (instances, or documents where there are none).
SIZE_CATEGORIES = [
    (1e3, "n<1K"),
    (1e4, "1K<n<10K"),
    (1e5, "10K<n<100K"),
    (1e6, "100K<n<1M"),
    (1e7, "1M<n<10M"),
    (1e8, "10M<n<100M"),
    (1e9, "100M<n<1B"),
    (1e10, "1B<n<10B"),
]


def read_source_info(path: str | None) -> dict[str, dict]:
    """source → its fields, from a YAML or JSON file; one clear line for a file that is not such a mapping."""
    if not path:
        return {}
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"--source-info {path}: {e.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise UserError(f"--source-info {path} is not YAML or JSON: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise UserError(f"--source-info {path} must map each source to its fields ({', '.join(FIELDS)})")
    for source, fields in data.items():
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            raise UserError(
                f"--source-info {path}: source {source!r} has unknown field {unknown[0]!r} "
                f"(fields: {', '.join(FIELDS)})"
            )
        for field, value in fields.items():
            problem = _field_problem(field, value)
            if problem:
                raise UserError(f"--source-info {path}: source {source!r}: {field} {problem}, not {value!r}")
    return {str(k): v for k, v in data.items()}


# A Hugging Face licence id: lower-case letters, digits and . + - _ (cc-by-sa-4.0, apache-2.0, other, unknown).
_LICENSE_ID = re.compile(r"[a-z0-9][a-z0-9.+_-]*")


def _field_problem(field: str, value) -> str | None:
    """What is wrong with a --source-info field's value (the README's header takes licence ids, the page text), or
    None."""
    if field == "license":
        ids = value if isinstance(value, list) and value else [value]
        if all(isinstance(v, str) and _LICENSE_ID.fullmatch(v) for v in ids):
            return None
        return (
            "takes a Hugging Face licence id or a list of them (cc-by-sa-4.0, other, ...; a name goes in license_name)"
        )
    if field == "limits":
        texts = value if isinstance(value, list) else [value]
        return None if all(isinstance(v, str) and v.strip() for v in texts) else "takes a text or a list of texts"
    return None if isinstance(value, str) and value.strip() else "takes a text"


def _listed_inputs(stage: Stage) -> str:
    """The files an extraction read, by name with the start of their sha256: its provenance as its manifest says."""
    inputs = [i for i in stage.manifest.get("inputs", []) if isinstance(i, dict) and "path" in i]
    named = [
        f"{Path(str(i['path'])).name} (sha256 {str(i.get('sha256') or i.get('sha256_first_and_last_mib', ''))[:12]}…)"
        for i in inputs[:3]
    ]
    more = f" and {len(inputs) - 3:,} more files" if len(inputs) > 3 else ""
    version = stage.manifest.get("version", "")
    return f"{stage.job} (bertcorpus {version}) from {', '.join(named)}{more}"


def _source_of(stage: Stage) -> str | None:
    config = stage.manifest.get("config")
    return str(config["source"]) if isinstance(config, dict) and config.get("source") else None


def _removed_by_extraction(stage: Stage) -> dict[str, int]:
    skipped = stage.manifest.get("documents", {}).get("skipped", {})
    return {reason: n for reason, n in skipped.items() if "duplicate" in reason and n}


def _record_limits(stage: Stage) -> list[str]:
    """What create's manifest says it could not do as asked: paragraphs without a sentence stop, documents cut."""
    limits, where = [], "" if stage.name == "." else f"{stage.name}: "
    if unsplit := stage.manifest.get("counts", {}).get("unsplit_paragraphs", 0):
        limits.append(
            f"{where}{unsplit:,} paragraphs of scripts without sentence stops (Thai, Lao) were each taken as "
            "one sentence (long ones cut), so their pairs break at paragraphs, not sentences"
        )
    split = stage.manifest.get("documents", {}).get("split", {})
    if split.get("documents"):
        limits.append(
            f"{where}{split['documents']:,} documents longer than --max-document-mb were cut into "
            f"{split['pieces']:,} pieces, each paired on its own"
        )
    return limits


def _removed_by_dedup(dedup_runs: list[dict]) -> dict[str, dict]:
    """Documents each dedup source lost, by reason, summed over the runs found."""
    removed: dict[str, Counter] = {}
    for run in dedup_runs:
        for source in run["sources"]:
            removed.setdefault(source["name"], Counter()).update({k: v for k, v in source["removed"].items() if v})
    return {name: dict(reasons) for name, reasons in removed.items()}


def build_datasheet(
    card: dict,
    stages: list[Stage],
    info: dict[str, dict],
    by_source: dict[str, int],
    languages: dict[str, Counter],
    unsourced: dict | None,
) -> dict:
    """The datasheet part of the card: a row per source that gave documents (`by_source`, and by language in
    `languages`), and what the README's header needs; `unsourced`: the documents of records whose sources are not
    known here ({"documents", "files"}). A source of `info` without documents is not part of the data: it is left
    out, with its licence."""
    extractions = {_source_of(s): s for s in stages if s.kind == "documents" and s.job.startswith("extract-")}
    sources = []
    for name in sorted(n for n, documents in by_source.items() if documents):
        given, stage = info.get(name, {}), extractions.get(name)
        defaults = WIKIPEDIA_LICENSE if stage is not None and stage.job == "extract-wiki" else {}
        given_limits = given.get("limits") or []
        limits = [given_limits] if isinstance(given_limits, str) else list(given_limits)
        if stage is not None and stage.job in JOB_LIMITS:
            limits.append(JOB_LIMITS[stage.job])
        sources.append(
            {
                "source": name,
                "documents": by_source[name],
                "license": given.get("license", defaults.get("license", "unknown")),
                "license_name": given.get("license_name", defaults.get("license_name", "not stated (--source-info)")),
                "provenance": given.get("provenance") or (_listed_inputs(stage) if stage else "not stated"),
                "languages": dict(languages.get(name) or {UNDETERMINED: by_source[name]}),
                "removed_by_extraction": _removed_by_extraction(stage) if stage else {},
                "limits": limits,
                "intended_use": given.get("intended_use", INTENDED_USE),
            }
        )
    rows = _rows(card) or sum(by_source.values())
    return {
        "sources": sources,
        "unsourced": unsourced,
        "record_limits": [limit for stage in stages if stage.kind == "records" for limit in _record_limits(stage)],
        "removed_by_dedup": _removed_by_dedup(card.get("dedup", [])),
        "decontaminated": any(run.get("benchmarks") for run in card.get("dedup", [])),
        "rows": rows,
        "size_category": size_category(rows),
    }


def _rows(card: dict) -> int:
    """The instances of the largest sequence configuration: what a dataset viewer counts as rows."""
    per_config = [
        sum(config["instances"].values())
        for records in card["records"].values()
        if isinstance(records, dict)
        for config in records["seq_configs"].values()
    ]
    return max(per_config, default=0)


def size_category(rows: int) -> str:
    return next((name for bound, name in SIZE_CATEGORIES if rows < bound), "n>10B")


# ---------------------------------------------------------------------------------------------- the page


def _languages_text(languages: dict) -> str:
    return ", ".join(f"{tag} {n:,}" for tag, n in languages.items())


def datasheet_html(sheet: dict) -> str:
    """The sources' table, what dedup removed, the records' limits and the intended use; of these only the
    records' limits where there are no documents."""
    limits = [f"<p><b>Limit of the records.</b> {escape(limit)}.</p>" for limit in sheet.get("record_limits", [])]
    unsourced = [f'<p class="note">{escape(said)}</p>' for said in [_unsourced_text(sheet)] if said]
    if not sheet["sources"]:
        return "".join(unsourced + limits)
    rows = [
        [
            f"<code>{escape(s['source'])}</code>",
            number(s["documents"]),
            f"{escape(s['license_name'])}<br><code>{escape(_licenses(s['license']))}</code>",
            escape(s["provenance"]),
            escape(_languages_text(s["languages"])),
            escape(_removed_text(s["removed_by_extraction"])),
            "<br>".join(escape(limit) for limit in s["limits"]) or "—",
        ]
        for s in sheet["sources"]
    ]
    parts = [
        table(
            ["source", "documents", "licence", "provenance", "languages", "duplicates removed at extraction", "limits"],
            rows,
            {1},
        ),
        *unsourced,
    ]
    removed = sheet["removed_by_dedup"]
    if removed:
        said = "; ".join(
            f"<code>{escape(name)}</code>: " + (", ".join(f"{r} {n:,}" for r, n in reasons.items()) or "none")
            for name, reasons in removed.items()
        )
        checked = "and benchmark text (decontamination)" if sheet["decontaminated"] else "(no benchmark was named)"
        parts.append(f"<p>Removed by <code>dedup</code>, exact and near copies {checked}: {said}.</p>")
    else:
        parts.append(
            '<p class="note">No dedup run here: copies across sources were not removed, and no benchmark text was '
            "searched for.</p>"
        )
    parts += limits
    parts += [f"<p><b>Intended use.</b> {escape(use)}</p>" for use in _intended_uses(sheet)]
    return "".join(parts)


def _licenses(license_) -> str:
    return ", ".join(_as_list(license_))


def _removed_text(removed: dict[str, int]) -> str:
    """`duplicate 3, near duplicate 1`: what extraction removed, by the manifest's reasons; `none`."""
    return ", ".join(f"{r.replace('_', ' ')} {n:,}" for r, n in removed.items()) or "none"


def _intended_uses(sheet: dict) -> list[str]:
    """The sources' intended uses, each once, in source order; the default one where no source is known."""
    return list(dict.fromkeys(s["intended_use"] for s in sheet["sources"])) or [INTENDED_USE]


def _unsourced_text(sheet: dict) -> str:
    """What the card cannot say of the records' documents whose files are not here; empty where it can say all."""
    unsourced = sheet.get("unsourced")
    if not unsourced:
        return ""
    files = unsourced["files"]
    named = ", ".join(files[:3]) + (f" and {len(files) - 3:,} more" if len(files) > 3 else "")
    return (
        f"{unsourced['documents']:,} documents that create read come from files that are not where its manifest "
        f"names them, as it describes them, or that are not documents files ({named}): their sources and licences "
        "are not known here. Run stats on a folder that holds the documents too."
    )


def hub_languages(tags) -> list[str]:
    """The Hub's language codes for BCP 47 tags: the language subtag of each (zh-Hans and zh-Hant are zh), once."""
    return sorted({tag.split("-")[0].lower() for tag in tags})


# ---------------------------------------------------------------------------------------------- README.md


def hub_readme(card: dict) -> str:
    """A README.md for the output folder: the Hugging Face dataset-card header, then the datasheet in prose."""
    sheet = card["datasheet"]
    licenses = {lic for s in sheet["sources"] for lic in _as_list(s["license"])}
    if sheet.get("unsourced") or not sheet["sources"]:
        licenses.add("unknown")  # of documents whose sources are not known here
    licenses = sorted(licenses)
    languages = hub_languages(card["languages"]) or [UNDETERMINED]
    header = {
        "license": licenses[0] if len(licenses) == 1 else licenses,
        "language": languages,
        "size_categories": [sheet["size_category"]],
        "task_categories": ["fill-mask"],
        "pretty_name": f"BERT pretraining data ({card['directory']})",
    }
    others = [s["license_name"] for s in sheet["sources"] if "other" in _as_list(s["license"])]
    if others:  # the Hub asks a licence it has no id for to be named
        header["license_name"] = "; ".join(dict.fromkeys(others))
    lines = ["---", *(f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in header.items()), "---", ""]
    lines += [
        f"# {header['pretty_name']}",
        "",
        f"Made by bertcorpus {card['version']}. `stats.json` holds every figure and `report.html` shows them with "
        "plots; each stage's `manifest.json` names the files it read and wrote, with their sha256.",
        "",
        "## Sources",
        "",
    ]
    if sheet.get("unsourced"):
        lines += [_unsourced_text(sheet), ""]
    for s in sheet["sources"]:
        lines += [
            f"### {s['source']}",
            "",
            f"- Documents: {s['documents']:,}",
            f"- Licence: {s['license_name']} (`{_licenses(s['license'])}`)",
            f"- Provenance: {s['provenance']}",
            f"- Languages: {_languages_text(s['languages'])}",
            f"- Duplicates removed at extraction: {_removed_text(s['removed_by_extraction'])}",
            *(f"- Limit: {limit}" for limit in s["limits"]),
            "",
        ]
    removed = sheet["removed_by_dedup"]
    lines += ["## Duplicates and benchmark text", ""]
    if removed:
        lines += [
            f"- `{name}`: " + (", ".join(f"{r} {n:,}" for r, n in reasons.items()) or "nothing removed")
            for name, reasons in removed.items()
        ]
        lines += ["" if sheet["decontaminated"] else "No benchmark was named to decontaminate against.", ""]
    else:
        lines += ["No dedup run: copies across sources were not removed, and no benchmark text was searched for.", ""]
    if sheet.get("record_limits"):
        lines += ["## Limits of the records", "", *(f"- {limit}" for limit in sheet["record_limits"]), ""]
    lines += ["## Intended use", "", *_intended_uses(sheet), ""]
    return "\n".join(lines)


def _as_list(value) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]
