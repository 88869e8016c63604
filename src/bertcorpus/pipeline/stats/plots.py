"""The plots of `bertcorpus stats`: PNG files drawn with matplotlib from the card's figures.

Every plot has the same size, so that the report can lay them out in a grid before they load. Constrained layout
fits the axes around their labels, ticks and titles inside that size, so no label is cut at the edge.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np

from bertcorpus.pipeline.sinks import output
from bertcorpus.pipeline.stats.stages import SPLITS

PLOT_INCHES = (6.0, 3.2)
PLOT_DPI = 150  # sharper than the report shows them, for screens of high pixel density
PLOT_PIXELS = (round(PLOT_INCHES[0] * PLOT_DPI), round(PLOT_INCHES[1] * PLOT_DPI))


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=PLOT_INCHES, dpi=PLOT_DPI, layout="constrained")
    ax.grid(alpha=0.3)
    return fig, ax


def _integer_ticks(axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _counts_axis(axis) -> None:
    """A linear axis of counts, labelled as the tables write numbers (12,000)."""
    from matplotlib.ticker import StrMethodFormatter

    axis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    png = io.BytesIO()
    fig.savefig(png, format="png", metadata={"Software": None})
    plt.close(fig)
    output.write_atomically(str(path), png.getvalue())  # a failed write names the file


def plot_sizes(by_source: dict[str, dict], edges: list[float], what: str, path: Path) -> None:
    """Each source's documents per size bin as a share of that source, one line per source, on a logarithmic size
    axis: a source of seven books shows as plainly beside one of two hundred articles."""
    from matplotlib.ticker import PercentFormatter

    fig, ax = _figure()
    edges_arr = np.asarray(edges)
    used = np.zeros(len(edges) - 1, bool)
    for source, hist in by_source.items():
        counts = np.asarray(hist["counts"])
        used |= counts > 0
        shares = counts / max(counts.sum(), 1)
        ax.stairs(shares[1:], edges_arr[1:], label=f"{source} ({hist['documents']:,} documents)", linewidth=1.5)
    found = np.flatnonzero(used[1:]) + 1
    if len(found):
        ax.set_xlim(edges_arr[found[0]], edges_arr[found[-1] + 1])
    ax.set_xscale("log")
    ax.set_xlabel(f"{what} per document (log scale, 10 bins per decade)")
    ax.set_ylabel("share of the source's documents")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_lengths(summary: dict, length: int, path: Path) -> None:
    fig, ax = _figure()
    hist = np.asarray(summary["real_tokens_hist"])
    ax.stairs(hist, np.arange(len(hist) + 1), fill=True, color="#4472c4")
    ax.set_yscale("log")  # full-length instances dominate; a log scale shows the short ones too
    ax.axvline(
        summary["mean_real_tokens"], color="#c00000", linestyle="--", label=f"mean {summary['mean_real_tokens']:.1f}"
    )
    ax.set_xlim(0, length * 1.02 + 1)  # a gap after the full-length bar, which would hide in the frame
    ax.set_xlabel(f"real tokens per instance (sum of input_mask; max {length})")
    ax.set_ylabel("instances")
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_segments(summary: dict, length: int, path: Path) -> None:
    fig, ax = _figure()
    edges = np.arange(length + 2)
    for segment in ("a", "b"):
        mean = summary[f"mean_segment_{segment}_tokens"]
        ax.stairs(
            summary[f"segment_{segment}_tokens_hist"],
            edges,
            linewidth=1.5,
            label=f"segment {segment.upper()} (mean {mean:.1f})",
        )
    # The pairs cut to fit end level near half the length, a spike far above the rest: a log scale shows both.
    ax.set_yscale("log")
    ax.set_xlim(0, length + 1)
    ax.set_xlabel("tokens per segment (without [CLS]/[SEP])")
    ax.set_ylabel("instances (log scale)")
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_masked(summary: dict, predictions: int, path: Path) -> None:
    fig, ax = _figure()
    hist = np.asarray(summary["masked_positions_hist"])
    ax.stairs(hist, np.arange(len(hist) + 1) - 0.5, fill=True, color="#70ad47")
    # Every full-length instance draws the same number of predictions (15% of its tokens, rounded, at most
    # max_predictions_per_seq), so one bar holds most instances: a log scale shows the shorter ones beside it.
    ax.set_yscale("log")
    mode = int(hist.argmax())
    ax.axvline(
        summary["mean_masked_positions"],
        color="#c00000",
        linestyle="--",
        label=f"mean {summary['mean_masked_positions']:.2f}; {hist[mode] / hist.sum():.0%} of instances at {mode}",
    )
    ax.set_xlim(-0.5, predictions + 0.5)
    _integer_ticks(ax.xaxis)
    ax.set_xlabel(f"masked positions per instance (max_predictions_per_seq {predictions})")
    ax.set_ylabel("instances (log scale)")
    ax.legend(fontsize=8, loc="upper left")
    _save(fig, path)


def plot_vocab(counts: np.ndarray, path: Path) -> None:
    """The text's token counts by vocab id (before masking), ranked; the title's coverage is the share of ids used."""
    fig, ax = _figure()
    ranked = np.sort(counts)[::-1]
    ranked = ranked[ranked > 0]
    if len(ranked):
        # A few hundred log-spaced ranks draw the same curve as all of them.
        ranks = np.unique(np.geomspace(1, len(ranked), 400).astype(np.int64))
        ax.loglog(ranks, ranked[ranks - 1], color="#7030a0")
    ax.set_xlabel(f"vocab id rank (ids used by text tokens: {len(ranked):,} of {len(counts):,})")
    ax.set_ylabel("occurrences in text tokens")
    ax.set_title(f"vocab coverage: {len(ranked) / len(counts):.1%} of the ids occur in the text", fontsize=9)
    _save(fig, path)


def plot_shards(rows: list[dict], path: Path) -> None:
    fig, ax = _figure()
    colours = {"train": "#4472c4", "eval": "#ed7d31"}
    for split in SPLITS:
        picked = [(i, r["records"]) for i, r in enumerate(rows) if r["split"] == split]
        if picked:
            ax.bar([i for i, _ in picked], [n for _, n in picked], width=1.0, color=colours[split], label=split)
    _integer_ticks(ax.xaxis)
    ax.set_xlabel("shard (train shards first, then eval)")
    ax.set_ylabel("records")
    _counts_axis(ax.yaxis)
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
            if info["form"]["pair_objective"] != "none":  # one segment: its length is the instance's
                plot_segments(summary, length, target(f"{prefix} segments"))
            plot_masked(summary, s["max_predictions_per_seq"], target(f"{prefix} masked"))
            plot_vocab(accumulators[(stage, seq)].original_counts, target(f"{prefix} vocab"))
            plot_shards(s["shards"], target(f"{prefix} shards"))
    return written
