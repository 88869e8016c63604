"""`bertcorpus stats DIR`: a data card (stats.json, report.html and its plots) for documents, records or a run.

    DIR ─ find manifest.json (DIR, one and two levels down) ─┬─ documents stages ─ one pass over the Parquet files:
                                                             │    sizes, sources, extremes; [UNK] words with the vocab
                                                             ├─ records stages ─ one pass over the shards
                                                             │    (TFRecords; Parquet, MDS masked by trainer.loader)
                                                             │    per seq config: lengths, label, masking, [UNK],
                                                             │    vocab, padding per length bin
                                                             └─ every manifest ─ lineage: files linked by name + sha256
      ─ DIR/stats.json, DIR/report_files/*.png, DIR/README.md (a Hugging Face dataset card), DIR/report.html (last)

This is not a Beam job: the statistics of even a full corpus are a single sequential read, and a sample cap
(--max-records, --max-documents) bounds the time. Memory is bounded by construction: fixed-size counters,
one Parquet row group or one batch of records at a time (see records.py for the Parquet form's one flag per
instance).

stages.py finds the stages, card.py reads them into the card (records.py its records), plots.py draws its plots,
html.py writes the report: what was built first, then the plots, the documents, and the lineage last.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.sinks import output
from bertcorpus.pipeline.stats.card import build_card
from bertcorpus.pipeline.stats.datasheet import hub_readme, read_source_info
from bertcorpus.pipeline.stats.html import render_html
from bertcorpus.pipeline.stats.plots import write_plots
from bertcorpus.pipeline.stats.stages import REPORT_FILES, STATS

ACCEPTS_BEAM_OPTIONS = False
REPORT = "report.html"
HUB_README = "README.md"  # the dataset card a Hugging Face dataset repository shows


def add_arguments(parser) -> None:
    parser.add_argument(
        "dir",
        metavar="DIR",
        help="a documents directory, a records directory, or a run directory holding both "
        "(manifests are searched one and two levels down)",
    )
    parser.add_argument("--vocab", help="vocab.txt (default: the one named in the records manifest)")
    parser.add_argument("--output", help="where stats.json, report.html and report_files/ go (default: DIR)")
    parser.add_argument(
        "--source-info",
        metavar="FILE",
        help="YAML or JSON: each source's license (Hugging Face ids), license_name, provenance, limits and "
        "intended_use, for the datasheet and README.md; sources that gave no documents here are left out "
        "(default: what the extraction manifests say; licence unknown but for Wikipedia's)",
    )
    parser.add_argument(
        "--max-records",
        type=int,
        default=0,
        metavar="N",
        help="read at most N records per seq config, spread over the shards (default: all)",
    )
    parser.add_argument(
        "--max-documents",
        type=int,
        default=0,
        metavar="N",
        help="tokenise at most N documents for the [UNK] word list; the other document statistics "
        "always cover every document (default: all)",
    )


def run(args, beam_args: list[str]) -> int:
    root = Path(args.dir)
    if "://" in args.dir or not root.is_dir():
        raise UserError(f"{args.dir} is not a local directory")
    if args.max_records < 0 or args.max_documents < 0:
        raise UserError("--max-records and --max-documents must be >= 0")
    out = Path(args.output) if args.output else root
    source_info = read_source_info(args.source_info)
    card, accumulators = build_card(root, args.vocab, args.max_records, args.max_documents, source_info)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT).unlink(missing_ok=True)  # an old report must not point at plots about to be replaced
    try:
        plots = write_plots(card, accumulators, out / REPORT_FILES)
        output.write_atomically(str(out / STATS), (json.dumps(card, indent=1, ensure_ascii=False) + "\n").encode())
        output.write_atomically(str(out / HUB_README), hub_readme(card).encode())
        output.write_atomically(str(out / REPORT), render_html(card, plots).encode())
    except BaseException:
        _remove_card(out)
        raise
    for warning in card["warnings"]:
        print(f"bertcorpus stats: warning: {warning}", file=sys.stderr)
    unused = sorted(set(source_info) - {s["source"] for s in card["datasheet"]["sources"]})
    if unused:  # one file may describe the sources of several runs; the card names only those of this one
        print(
            f"bertcorpus stats: note: --source-info describes {', '.join(unused)}, which gave no documents here: "
            "the card leaves them out",
            file=sys.stderr,
        )
    print(
        f"stats: {out / STATS}\nreport: {out / REPORT} ({len(plots)} plots in {out / REPORT_FILES})\n"
        f"dataset card: {out / HUB_README}"
    )
    return 0


def _remove_card(out: Path) -> None:
    """What a failed run (a full disk) wrote of the card: no stats.json or plots without their report are left,
    and no file keeps the disk full. Trouble here leaves the files in place; the run's own error is what to say."""
    with contextlib.suppress(OSError):
        for path in [out / STATS, out / HUB_README, *(out / REPORT_FILES).glob("*.png")]:
            path.unlink(missing_ok=True)
        (out / REPORT_FILES).rmdir()  # only where it is empty: it may hold the user's own files
