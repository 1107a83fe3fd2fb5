#!/usr/bin/python3
"""BENCHMARKS.md holds what is true now in at most 250 lines (issue 37): older sections live
in docs/benchmarks.md. Also: every hand-written section tools/bench.py keeps on regeneration
(KEPT_HEADINGS) is in BENCHMARKS.md, and every link from BENCHMARKS.md to a section of
docs/benchmarks.md (or of itself) names a heading that exists, so moving sections breaks no
link. Run: /usr/bin/python3 tests/test_docs_size.py"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

sys.path.insert(0, T.TOOLS)
import bench  # noqa: E402

MAX_LINES = 250
BENCH = os.path.join(T.REPO, "BENCHMARKS.md")
DOCS = os.path.join(T.REPO, "docs", "benchmarks.md")


def anchors(path):
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation but - and _
    dropped, spaces as hyphens."""
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#+ (.*)", line)
            if m:
                out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def short_enough():
    with open(BENCH, encoding="utf-8") as f:
        n = sum(1 for _ in f)
    assert n <= MAX_LINES, f"BENCHMARKS.md has {n} lines (at most {MAX_LINES}): move older sections to docs/benchmarks.md"


def kept_sections_present():
    with open(BENCH, encoding="utf-8") as f:
        headings = {l.strip() for l in f if l.startswith("## ")}
    missing = [h for h in bench.KEPT_HEADINGS if h not in headings]
    assert not missing, f"tools/bench.py keeps {missing}, which BENCHMARKS.md lacks"
    assert bench.NLLB_HEADING in headings, "BENCHMARKS.md lacks the NLLB pointer"


def links_resolve():
    own, docs = anchors(BENCH), anchors(DOCS)
    with open(BENCH, encoding="utf-8") as f:
        text = f.read()
    links = re.findall(r"\]\((docs/benchmarks\.md)?#([^)]+)\)", text)
    assert links, "no section links found"
    for target, anchor in links:
        assert anchor in (docs if target else own), f"BENCHMARKS.md links to {target}#{anchor}, no such heading"


def main():
    r = T.Runner()
    r.check(f"BENCHMARKS.md has at most {MAX_LINES} lines", short_enough)
    r.check("tools/bench.py's kept sections and the NLLB pointer are in BENCHMARKS.md", kept_sections_present)
    r.check("BENCHMARKS.md's section links resolve", links_resolve)
    r.finish()


if __name__ == "__main__":
    main()
