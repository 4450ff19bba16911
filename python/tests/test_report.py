"""The HTML report, looked at in a real headless browser (Debian's chromium,
driven by Playwright): for a tabular cache, an image cache with labels, a
frames cache and a segments cache, the page loads with no console error and
no request beyond itself and its inline pictures; the sample grid shows the
images asked for, each decoded, with the label of the row it shows; every
histogram's bars add up to the rows it counts; video windows animate; the
segments quality table has a row per video, and a source frame is shown
beside its decoded frame only when its directory is trusted. A screenshot of
each page is taken (into $SHARDSET_REPORT_SCREENSHOTS when set, as the
docs' pictures are made)."""

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shardset
from shardset import ClassLabel, Features, Value

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden")
SOURCES = os.path.join(GOLDEN, "sources")
CHROMIUM = "/usr/bin/chromium"
NAMES = ["red", "green", "blue"]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:  # the tests' environment pins it
        raise AssertionError("playwright is missing: run ./dev setup") from e
    assert os.path.exists(CHROMIUM), "chromium is missing: run ./dev setup (apt-get install chromium)"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def load(browser, html, name):
    """The page at `html`, with its console errors and requests."""
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    url = Path(html).resolve().as_uri()
    page.goto(url, wait_until="load")
    assert errors == [], errors
    outside = [u for u in requests if u != url and not u.startswith("data:")]
    assert outside == [], f"the report asked for {outside}"
    undecoded = page.evaluate(
        "Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).length")
    assert undecoded == 0
    shots = Path(os.environ.get("SHARDSET_REPORT_SCREENSHOTS", Path(html).parent))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report-{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    return page


def histograms(page):
    """(column, rows it counts, sum of its bars) of every chart."""
    return page.evaluate("""Array.from(document.querySelectorAll('.histogram')).map(h => [
        h.dataset.column, Number(h.dataset.rows),
        Array.from(h.querySelectorAll('rect.bar')).reduce((s, r) => s + Number(r.dataset.count), 0)])""")


def test_a_tabular_cache(browser, tmp_path):
    n = 500
    rows = [{"x": i, "f": i * 0.25 - 30, "s": None if i % 7 == 0 else "w" * (i % 13),
             "ok": i % 3 == 0, "label": i % 3} for i in range(n)]
    f = Features({"x": Value("int64"), "f": Value("float32"), "s": Value("string"),
                  "ok": Value("bool"), "label": ClassLabel(names=NAMES)})
    shardset.write_cache(rows, f, tmp_path / "c", format="lance")
    got = shardset.report(tmp_path / "c", tmp_path / "r.html")
    assert got["rows_read"] == n and got["images"] == 0
    page = load(browser, tmp_path / "r.html", "tabular")
    charts = {c: (r, s) for c, r, s in histograms(page)}
    nulls = sum(1 for r in rows if r["s"] is None)
    assert charts == {"x": (n, n), "f": (n, n), "s": (n - nulls, n - nulls), "ok": (n, n),
                      "label": (n, n)}
    # The class balance, bar by bar, in class order.
    counts = page.evaluate("""Array.from(document.querySelectorAll(
        '.histogram[data-column=label] rect.bar')).map(r => Number(r.dataset.count))""")
    assert counts == [sum(1 for r in rows if r["label"] == k) for k in range(3)]
    table = page.inner_text("table.columns")
    assert re.search(rf"\bs\s+Value\('string'\).*\b{nulls}\b", table), table
    assert "lance-rows" in page.inner_text("table.pairs")


def test_an_image_cache_with_labels_and_a_sample(browser, tmp_path):
    rng = np.random.default_rng(3)
    rows = []
    for i in range(60):
        k = i % 3
        a = rng.integers(0, 60, (48 + i, 64, 3), dtype=np.uint8)
        a[..., k] = 220
        p = tmp_path / f"{i}.png"
        Image.fromarray(a).save(p)
        rows.append({"image": p.read_bytes(), "label": k})
    f = Features({"image": shardset.Image(), "label": ClassLabel(names=NAMES)})
    shardset.write_cache(rows, f, tmp_path / "c")
    ds = shardset.open_cache(tmp_path / "c")
    got = shardset.report(tmp_path / "c", tmp_path / "r.html", images=20, seed=5,
                          sample_rows=40)
    assert got["images"] == 20 and got["rows_read"] == 40
    page = load(browser, tmp_path / "r.html", "images")
    figs = page.evaluate("""Array.from(document.querySelectorAll('figure.sample')).map(f =>
        [Number(f.dataset.row), f.querySelector('figcaption').innerText])""")
    assert len(figs) == 20 and len({r for r, _ in figs}) == 20
    for row, caption in figs:
        assert caption == NAMES[ds[row]["label"]], (row, caption)
    # Each thumbnail shows its row's image: the channel its label names dominates.
    means = page.evaluate("""Array.from(document.querySelectorAll('figure.sample img')).map(i => {
        const c = document.createElement('canvas'); c.width = i.naturalWidth; c.height = i.naturalHeight;
        const g = c.getContext('2d'); g.drawImage(i, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data, m = [0, 0, 0];
        for (let k = 0; k < d.length; k += 4) { m[0] += d[k]; m[1] += d[k + 1]; m[2] += d[k + 2]; }
        return m; })""")
    assert [int(np.argmax(m)) for m in means] == [ds[row]["label"] for row, _ in figs]
    charts = histograms(page)
    assert charts and all(rows_ == total == 40 for _, rows_, total in charts), charts
    assert "a seeded sample of 40 of 60 rows" in page.inner_text("body")
    # Seeded: the same seed draws the same rows, another seed others.
    shardset.report(tmp_path / "c", tmp_path / "again.html", images=20, seed=5, sample_rows=40)
    shardset.report(tmp_path / "c", tmp_path / "other.html", images=20, seed=6, sample_rows=40)
    rows_of = lambda p: re.findall(r'figure class="sample" data-row="(\d+)"', p.read_text())  # noqa: E731
    assert rows_of(tmp_path / "again.html") == rows_of(tmp_path / "r.html")
    assert rows_of(tmp_path / "other.html") != rows_of(tmp_path / "r.html")


def _videos(tmp_path, storage, **extra):
    vids = tmp_path / "videos"
    vids.mkdir(exist_ok=True)
    for n in ("clip_a.mp4", "clip_b.mp4"):
        shutil.copy(os.path.join(SOURCES, n), vids / n)
    feats = Features({"video": shardset.Video(storage=storage)})
    shardset.write_cache([("a", {"video": str(vids / "clip_a.mp4")}),
                          ("b", {"video": str(vids / "clip_b.mp4")})], feats,
                         tmp_path / storage, format="video-frames", **extra)
    return tmp_path / storage, vids


def test_a_frames_cache(browser, tmp_path):
    cache, _ = _videos(tmp_path, "frames")
    got = shardset.report(cache, tmp_path / "r.html")
    assert got["windows"] == 4
    page = load(browser, tmp_path / "r.html", "frames")
    frames = page.evaluate("""Array.from(document.querySelectorAll('figure.window')).map(f =>
        [Number(f.dataset.frames), getComputedStyle(f.querySelector('.clip')).animationName])""")
    assert len(frames) == 4 and all(t == 12 and a.startswith("clip") for t, a in frames), frames
    assert histograms(page) == [["frames per video", 2, 2]]


def test_a_segments_cache_shows_its_quality_and_trusted_sources(browser, tmp_path):
    cache, vids = _videos(tmp_path, "segments",
                          segments={"codec": "h264", "frames_per_segment": 8})
    shardset.report(cache, tmp_path / "plain.html")
    page = load(browser, tmp_path / "plain.html", "segments-untrusted")
    assert page.locator("table.quality tr").count() == 3  # a header and two videos
    assert page.locator(".pair figure").count() == 1
    assert "the source is not shown" in page.inner_text("body")
    shardset.report(cache, tmp_path / "r.html", trusted_roots=[vids])
    page = load(browser, tmp_path / "r.html", "segments")
    assert page.locator(".pair figure").count() == 2
    note = page.inner_text("body")
    psnr = float(re.search(r"PSNR ([\d.]+) dB, SSIM", note).group(1))
    assert 25 < psnr <= 100


def test_bad_options_and_a_missing_cache_are_typed_errors(tmp_path):
    with pytest.raises(shardset.BadInputError, match="sample_rows 0 is out of range"):
        shardset.report(GOLDEN + "/arrow_multi_shard", tmp_path / "r.html", sample_rows=0)
    with pytest.raises(shardset.CacheNotFoundError, match="nothing"):
        shardset.report(tmp_path / "nothing", tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists() and list(tmp_path.iterdir()) == []
