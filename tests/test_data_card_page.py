"""The data card page as a reader sees it: the real card of a real run (Wikipedia and book samples extracted, records
made from both, in each form: static masks in TFRecords, and Parquet instances masked at load time, in length bins),
rendered by headless Chromium in a 1280-pixel window. The page's layout is measured by a script
added to a copy of it, and a screenshot of the whole page is checked."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bertcorpus.pipeline.stats.plots import PLOT_PIXELS

from conftest import DATA, SAMPLE_TEXT, VOCAB, run_cli
from wiki_fixtures import ENWIKI_2014

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (Debian: apt-get install -y chromium), so the page cannot be rendered",
)
WIDTH = 1280
SECTIONS = ["built", "sources", "languages", "plots", "documents", "lineage"]

MEASURE = """<script>
addEventListener("load", () => {
  const root = document.documentElement;
  const box = e => e.getBoundingClientRect();
  const text = e => e.textContent.trim().replace(/\\s+/g, " ");
  const result = {
    viewport: root.clientWidth, scroll_width: root.scrollWidth, height: root.scrollHeight,
    sections: [...document.querySelectorAll("body > section")].map(s => ({id: s.id, top: box(s).top + scrollY})),
    overflowing: [...document.body.querySelectorAll("*")].filter(e => box(e).right > root.clientWidth + 0.5)
                   .map(e => e.tagName + ": " + text(e).slice(0, 60)),
    images: [...document.images].map(i => ({src: i.getAttribute("src"), complete: i.complete,
                                            natural: i.naturalWidth, shown: box(i).width,
                                            section: (i.closest("section") || {}).id})),
    built: [...document.querySelectorAll("#built tbody tr")].map(r => [...r.cells].map(text)),
  };
  const out = document.createElement("pre");
  out.id = "layout";
  out.textContent = JSON.stringify(result);
  document.body.append(out);
});
</script>"""


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with a fresh profile and nothing that reaches the network."""
    profile.mkdir()
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


BEAM = ("--runner", "DirectRunner")
# The forms of records a card is checked on: the reference's (static masks in TFRecords), and masks drawn at load
# time from Parquet instances with length bins.
FORMS = {"static": (), "dynamic": ("--masking", "dynamic", "--bin-size", "64")}


@pytest.fixture(scope="module")
def stages(tmp_path_factory) -> Path:
    """Documents and a vocab: Wikipedia and book samples extracted, a vocab trained on both."""
    run = tmp_path_factory.mktemp("stages")
    assert run_cli("extract-wiki", "--input", ENWIKI_2014, "--output", run / "wiki", *BEAM) == 0
    assert run_cli("extract-books", "--input", DATA / "books", "--output", run / "books", *BEAM) == 0
    documents = (run / "wiki" / "documents-*.parquet", run / "books" / "documents-*.parquet")
    assert run_cli("vocab", "--input", *documents, "--vocab-size", "3000", "--output", run / "vocab" / "vocab.txt") == 0
    return run


@pytest.fixture(scope="module", params=list(FORMS))
def card(request, stages, tmp_path_factory) -> Path:
    """A run directory: the stages above and records made from both sources, with its card."""
    run = tmp_path_factory.mktemp(f"card-{request.param}")
    for stage in ("wiki", "books", "vocab"):
        shutil.copytree(stages / stage, run / stage)
    documents = (run / "wiki" / "documents-*.parquet", run / "books" / "documents-*.parquet")
    assert (
        run_cli(
            "create",
            "--input",
            *documents,
            "--vocab",
            run / "vocab" / "vocab.txt",
            "--output",
            run / "records",
            "--seq-configs",
            "128:20,512:80",
            "--dupe-factor",
            "1",
            "--eval-fraction",
            "0.1",
            "--num-buckets",
            "2",
            *FORMS[request.param],
            *BEAM,
        )
        == 0
    )
    assert run_cli("stats", run) == 0
    return run


@pytest.fixture(scope="module")
def layout(card, tmp_path_factory) -> dict:
    """What the measuring script saw of the page in a 1280-pixel window."""
    # The copy sits next to the report, so that its relative image paths resolve the same way.
    measured = card / "report-measured.html"
    measured.write_text(
        (card / "report.html").read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8"
    )
    result = chromium(
        tmp_path_factory.mktemp("profile") / "p", f"--window-size={WIDTH},900", "--dump-dom", measured.as_uri()
    )
    measured.unlink()
    found = re.search(r'<pre id="layout">(.*?)</pre>', result.stdout, re.S)
    assert found, f"Chromium gave no layout (exit {result.returncode}): {result.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


@needs_chromium
def test_the_page_leads_with_what_was_built_and_ends_with_the_lineage(card, layout):
    assert [s["id"] for s in layout["sections"]] == SECTIONS
    tops = [s["top"] for s in layout["sections"]]
    assert tops == sorted(tops) and len(set(tops)) == len(tops)
    # The lead's rows: instances of each split and length as the manifest counts them, the label and masking
    # shares, tokens and the [UNK] share as stats.json has them.
    manifest = json.loads((card / "records" / "manifest.json").read_text())["outputs"]
    figures = json.loads((card / "stats.json").read_text())["records"]["records"]["seq_configs"]
    expected = []
    for seq, out in manifest.items():
        for split in ("train", "eval"):
            s = figures[seq][split]
            expected.append(
                [
                    f"{out[split]['instances']:,}",
                    f"{s['real_tokens']:,}",
                    f"{s['mean_real_tokens']:.1f}",
                    f"{s['full_length_share']:.1%}",
                    f"{s['label_share']:.2%}",
                    f"{s['mask_share']:.2%}",
                    f"{s['keep_share']:.2%}",
                    f"{s['random_share']:.2%}",
                    f"{s['unk_token_rate']:.4%}",
                ]
            )
    assert [row[-9:] for row in layout["built"]] == expected
    assert [row[-10] for row in layout["built"]] == ["train", "eval"] * len(manifest)
    # The lineage's stages in flow order: extraction, the vocab and what create read of it, then create.
    page = (card / "report.html").read_text(encoding="utf-8")
    lineage = page[page.index('<section id="lineage">') :]
    steps = [
        lineage.index(f"<h3>{s}")
        for s in ("extract-books → ", "extract-wiki → ", "vocab → ", "The vocab create read", "create → ")
    ]
    assert steps == sorted(steps)


@needs_chromium
def test_the_page_fits_1280_pixels_with_every_plot_loaded(card, layout):
    assert layout["viewport"] <= WIDTH and layout["scroll_width"] <= layout["viewport"]
    assert layout["overflowing"] == []
    pngs = sorted(f"report_files/{p.name}" for p in (card / "report_files").glob("*.png"))
    images = layout["images"]
    assert sorted(i["src"] for i in images) == pngs and len(pngs) == 12
    for image in images:
        assert image["complete"] and image["natural"] > 0, image
        # Shown large enough to read, and never stretched beyond the pixels drawn.
        assert 400 <= image["shown"] <= image["natural"], image
    assert {i.get("section") for i in images} == {"plots", "documents"}


class Tables(HTMLParser):
    """Each table of a page as its rows of data cells: (cell text, whether it is a number cell); header rows, of
    <th> cells only, are left out."""

    def __init__(self):
        super().__init__()
        self.tables: list[list[list[tuple[str, bool]]]] = []
        self.row: list[tuple[str, bool]] = []
        self.cell: list[str] | None = None
        self.numeric = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.row = []
        elif tag == "td":
            self.cell, self.numeric = [], ("class", "n") in attrs

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.row.append(("".join(self.cell).strip(), self.numeric))
            self.cell = None
        elif tag == "tr" and self.row:
            self.tables[-1].append(self.row)
            self.row = []

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def test_no_table_is_empty_and_no_row_is_zero_or_repeated(card):
    parser = Tables()
    parser.feed((card / "report.html").read_text(encoding="utf-8"))
    assert len(parser.tables) >= 8
    for rows in parser.tables:
        assert rows, "an empty table"
        numbers = [tuple(text for text, numeric in row if numeric) for row in rows]
        for row, values in zip(rows, numbers):
            assert not values or set(values) - {"0", "0.00%", "—"}, f"a row of zeros: {row}"
        # Rows of one count per stage may agree by chance; rows of three or more numbers do not.
        repeated = [v for v in numbers if len(v) >= 3 and numbers.count(v) > 1]
        assert not repeated, f"rows that repeat the same numbers: {repeated}"


def test_no_cell_says_none_and_each_language_has_its_share_of_every_output(card):
    page = (card / "report.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert not re.search(r"\bNone\b", text)
    section = page[page.index('<section id="languages">') : page.index("</section>", page.index('id="languages"'))]
    parser = Tables()
    parser.feed(section)
    [rows] = parser.tables
    outputs = re.findall(r"<th>(seq\d+ (?:train|eval)): instances \(share\)</th>", section)
    # the wiki's from its dump, the books' found by extract-books's light detector
    assert len(outputs) == 4 and {row[0][0] for row in rows} == {"en"}
    records = json.loads((card / "records" / "manifest.json").read_text())
    headers = re.findall(r"<th>([^<]*)</th>", section)
    assert "pieces per word" in headers  # of the documents' words, beside their [UNK] share
    for name in outputs:
        column = headers.index(f"{name}: instances (share)")
        seq, split = name.split()
        made = records["outputs"][seq][split]["languages"]
        for row in rows:
            entry = made.get(row[0][0])
            expected = f"{entry['instances']:,} ({entry['share']:.2%})" if entry else "—"
            assert row[column][0] == expected, (name, row)


@needs_chromium
def test_a_screenshot_of_the_whole_page_shows_text_and_plots(card, layout, tmp_path):
    shot = tmp_path / "card.png"
    height = layout["height"] + 100
    result = chromium(
        tmp_path / "profile", f"--window-size={WIDTH},{height}", f"--screenshot={shot}", (card / "report.html").as_uri()
    )
    assert shot.is_file(), f"no screenshot (exit {result.returncode}): {result.stderr[-2000:]}"
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert pixels.shape[:2] == (height, WIDTH)
    page = pixels[: layout["height"]]
    ink = (page.sum(axis=2) < 600).mean(axis=1)  # the share of each pixel row that is not near white
    # Text and plots all the way down: no blank stretch of a third of a window's height.
    assert (ink > 0).mean() > 0.3
    blank = np.diff(np.flatnonzero(ink > 0)).max()
    assert blank < 300, f"a blank stretch of {blank} pixels"
    # The plots' own colours: the bars of record lengths (#4472c4) and of masked positions (#70ad47).
    for colour in ((0x44, 0x72, 0xC4), (0x70, 0xAD, 0x47)):
        assert (np.abs(page - colour).sum(axis=2) < 12).sum() > 2000, colour
    # Plots sit two to a row: the vocab curve (#7030a0), the fourth plot of a sequence length, is in the right half.
    purple = np.abs(page - (0x70, 0x30, 0xA0)).sum(axis=2) < 40
    assert purple[:, WIDTH // 2 + 50 :].sum() > 500


def test_every_plot_keeps_its_labels_inside_the_image(card):
    for png in sorted((card / "report_files").glob("*.png")):
        pixels = np.asarray(Image.open(png).convert("L"))
        frame = np.concatenate([pixels[:3].ravel(), pixels[-3:].ravel(), pixels[:, :3].ravel(), pixels[:, -3:].ravel()])
        assert frame.min() == 255, f"{png.name}: something is drawn at the image's edge, cut off there"
        # All of one size, which the page gives its images so that the layout holds before they load.
        assert pixels.shape[::-1] == PLOT_PIXELS, png.name


@pytest.mark.parametrize(
    "objective, label, named",
    [("sop", "swapped (label 1)", "sentence-order prediction"), ("none", None, "no pair objective")],
)
def test_the_lead_says_what_label_1_means_for_the_pair_objective(objective, label, named, tmp_path):
    records = tmp_path / "records"
    assert (
        run_cli(
            "create",
            "--input",
            SAMPLE_TEXT,
            "--vocab",
            VOCAB,
            "--output",
            records,
            "--pair-objective",
            objective,
            "--runner",
            "DirectRunner",
        )
        == 0
    )
    assert run_cli("stats", records) == 0
    page = (records / "report.html").read_text(encoding="utf-8")
    lead = page[page.index('<section id="built">') : page.index('<section id="plots">')]
    assert f"TFRecord files with masks fixed in the records and {named}" in lead
    headers = re.findall(r"<th[^>]*>(.*?)</th>", lead)
    labels = [h for h in headers if "(label 1)" in h]
    assert labels == ([label] if label else [])
    assert ("Expected: swapped 50%" in lead) == (objective == "sop")


def test_the_segment_spike_is_captioned_where_the_histograms_have_it(card):
    """Pairs too long for L - 3 tokens are truncated level (the reference's truncate_seq_pair): the tallest bar of
    each segment's histogram, and the caption under the plot names it."""
    page = html.unescape((card / "report.html").read_text(encoding="utf-8"))
    seq_configs = json.loads((card / "stats.json").read_text())["records"]["records"]["seq_configs"]
    for s in seq_configs.values():
        budget = s["max_seq_length"] - 3
        a, b = (np.asarray(s["all"][f"segment_{x}_tokens_hist"]) for x in ("a", "b"))
        assert (a.argmax(), b.argmax()) == ((budget + 1) // 2, budget // 2)
        assert f"The spike at A {(budget + 1) // 2} / B {budget // 2} is the pairs too long for the {budget} " in page


def test_vocab_coverage_counts_the_ids_of_the_text_in_the_table_and_the_plot_alike(card):
    """Random replacement puts ids into input_ids that the text never uses: they are not coverage."""
    vocab = len((card / "vocab" / "vocab.txt").read_text(encoding="utf-8").splitlines())
    page = (card / "report.html").read_text(encoding="utf-8")
    for s in json.loads((card / "stats.json").read_text())["records"]["records"]["seq_configs"].values():
        summary = s["all"]
        assert summary["vocab_coverage"] == summary["vocab_ids_seen"] / vocab < 1
        assert f'<td class="n">{summary["vocab_coverage"]:.1%}</td>' in page


def test_the_masked_positions_plot_shows_the_bars_beside_the_tallest(card):
    """Most instances draw the same number of predictions; on a linear axis every other bar would be a sliver."""
    for png in sorted((card / "report_files").glob("*masked.png")):
        pixels = np.asarray(Image.open(png).convert("RGB")).astype(int)
        heights = (np.abs(pixels - (0x70, 0xAD, 0x47)).sum(axis=2) < 12).sum(axis=0)  # bar pixels per column
        tallest = heights.max()
        assert ((heights > tallest / 4) & (heights < tallest * 0.9)).sum() > 20, png.name


def test_the_inputs_table_names_every_skip_alike():
    from bertcorpus.pipeline.stats.html import _inputs_html

    counts = {
        "job": "extract-wiki",
        "read": 10,
        "kept": 6,
        "skipped": {"duplicate_id": 1, "redirect": 2, "disambiguation": 1},
        "errors": 0,
        "errors_by_reason": {},
    }
    parser = Tables()
    parser.feed(_inputs_html({"wiki": counts}))
    labels = [row[0][0] for row in parser.tables[0]]
    assert labels == ["read", "kept", "skipped: disambiguation", "skipped: duplicate_id", "skipped: redirect"]
