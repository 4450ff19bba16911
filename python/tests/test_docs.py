"""The documentation checked as part of the tests.

1. Links: every relative link in README.md, ARCHITECTURE.md and
   docs/**/*.md (outside code blocks) names a file or folder that exists,
   and a `#anchor` into a markdown file names one of its headings (GitHub's
   slugs: lower case, punctuation dropped, spaces to hyphens).

2. Examples: every fenced code block tagged `python` in docs/guide/*.md
   runs. A page's blocks run in order in one namespace (doctest-style), in
   a fresh temporary directory that is the working directory and holds:

   - `cache`: an Arrow cache of 100 rows, `x` int32 (the row number),
     `label` a ClassLabel of ["cat", "dog"] (`x % 2`), `image` 8x8 RGB;
   - `videos/a.mp4` (24 frames) and `videos/b.mp4` (15 frames), 64x48;
   - `frames`: a lance-video-frames cache of those two videos.

   A block that cannot run here (it needs a Ray cluster or a real bucket)
   is tagged `python no-run` instead: it is shown as Python and not run.
   Keep those few.
"""

import os
import re
import shutil

import numpy as np
import pytest

import shardset
from shardset import ClassLabel, Features, Image, Value, Video

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, "docs", "guide")
SOURCES = os.path.join(ROOT, "tests", "golden", "sources")

FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def markdown_files():
    out = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "ARCHITECTURE.md")]
    for d, _, files in os.walk(os.path.join(ROOT, "docs")):
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".md")]
    return sorted(out)


def split_blocks(text):
    """(prose lines with their numbers, [(info, first line number, code)])."""
    prose, blocks = [], []
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = (m.group(2), m.group(3).strip(), n + 1, [])
            else:
                prose.append((n, line))
        elif m and m.group(2).startswith(fence[0][0]) and len(m.group(2)) >= len(fence[0]) \
                and not m.group(3).strip():
            blocks.append((fence[1], fence[2], "\n".join(fence[3])))
            fence = None
        else:
            fence[3].append(line)
    assert fence is None, f"a code block opened on line {fence[2] - 1} is never closed"
    return prose, blocks


def slug(heading):
    s = re.sub(r"<[^>]+>", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    prose, _ = split_blocks(open(path, encoding="utf-8").read())
    seen, out = {}, set()
    for _, line in prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            k = seen.get(s, 0)
            out.add(s if k == 0 else f"{s}-{k}")
            seen[s] = k + 1
    return out


def broken_links(path):
    prose, _ = split_blocks(open(path, encoding="utf-8").read())
    bad = []
    for n, line in prose:
        # Inline code is not a link.
        line = re.sub(r"`[^`]*`", "", line)
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            where = f"{os.path.relpath(path, ROOT)}:{n}: {target}"
            if not os.path.exists(dest):
                bad.append(f"{where}: no such file")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad.append(f"{where}: no heading with anchor #{anchor}")
    return bad


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(path):
    bad = broken_links(path)
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading\n")
    page.write_text("[ok](there.md#a-heading) [gone](missing.md) [bad](there.md#nope)\n"
                    "```\n[in code](missing-too.md)\n```\n")
    bad = broken_links(str(page))
    assert len(bad) == 2 and "missing.md" in bad[0] and "#nope" in bad[1]


def guide_pages():
    return sorted(os.path.join(GUIDE, f) for f in os.listdir(GUIDE) if f.endswith(".md"))


def python_blocks(path):
    _, blocks = split_blocks(open(path, encoding="utf-8").read())
    return [(line, code) for info, line, code in blocks if info == "python"]


def test_blocks_that_do_not_run_are_few():
    skipped = []
    for p in guide_pages():
        _, blocks = split_blocks(open(p, encoding="utf-8").read())
        skipped += [(p, line) for info, line, _ in blocks if info == "python no-run"]
        assert all(i in ("python", "python no-run") for i, _, _ in blocks
                   if i.startswith("python")), f"{p}: tag a Python block `python` or `python no-run`"
    assert len(skipped) <= 3, f"Python blocks that never run: {skipped}"


@pytest.fixture
def docs_dir(tmp_path, monkeypatch):
    """The working directory the guides' examples expect (see the top)."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (100, 8, 8, 3), dtype=np.uint8)
    shardset.write_cache(
        ({"x": i, "label": i % 2, "image": images[i]} for i in range(100)),
        Features({"x": Value("int32"), "label": ClassLabel(names=["cat", "dog"]),
                  "image": Image()}),
        tmp_path / "cache", shard_size=4096, batch_size=16)
    (tmp_path / "videos").mkdir()
    shutil.copy(os.path.join(SOURCES, "clip_a.mp4"), tmp_path / "videos" / "a.mp4")
    shutil.copy(os.path.join(SOURCES, "clip_b.mp4"), tmp_path / "videos" / "b.mp4")
    shardset.write_cache(
        [("a", {"video": str(tmp_path / "videos" / "a.mp4"), "label": 0}),
         ("b", {"video": str(tmp_path / "videos" / "b.mp4"), "label": 1})],
        Features({"video": Video(storage="frames"), "label": Value("int64")}),
        tmp_path / "frames", format="video-frames", threads=2)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_blocks(path, blocks):
    ns = {"__name__": "__docs__"}
    for line, code in blocks:
        name = f"{os.path.relpath(path, ROOT)}, block at line {line}"
        exec(compile(code, name, "exec"), ns)


@pytest.mark.parametrize("path", [p for p in guide_pages() if python_blocks(p)],
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_guide_examples_run(path, docs_dir):
    run_blocks(path, python_blocks(path))


def test_a_failing_example_fails(docs_dir, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nds = shardset.open_cache('cache')\n```\n"
                    "```python no-run\nraise SystemExit('never run')\n```\n"
                    "```python\nassert len(ds) == 99\n```\n")
    blocks = python_blocks(str(page))
    assert len(blocks) == 2
    with pytest.raises(AssertionError):
        run_blocks(str(page), [(blocks[0][0], "import shardset\n" + blocks[0][1]), blocks[1]])
