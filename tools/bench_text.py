#!/usr/bin/python3
"""Real text in: how attend translates paragraphs (several sentences a line) with sentence
splitting (the default) against --split none, and against the same sentences one per line.

The news held-out slice (tools/train.py's, never trained on) is grouped three consecutive
sentences a line; each configuration translates it with the shipped model in interleaved
rounds. Prints, per configuration: seconds (median of the rounds), sentences per second, the
words of the output, and BLEU against the references (joined three a line for paragraphs, so
every configuration is scored on the same text). Optionally --html FILE: --document on an
HTML page, time split into the model's and the rest (parse, alignment, tags).

    /usr/bin/python3 tools/bench_text.py [--model models/de-en.gguf] [--n 300] [--rounds 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bleu  # noqa: E402
import data_paths as D  # noqa: E402
import evaluate  # noqa: E402

REPO = os.path.dirname(HERE)


def run(attend, model, lines, threads, extra):
    t = time.perf_counter()
    out = evaluate.translate(attend, model, lines, threads, extra)
    return time.perf_counter() - t, out


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attend", default=os.path.join(REPO, "build", "attend"))
    p.add_argument("--model", default=os.path.join(REPO, "models", "de-en.gguf"))
    p.add_argument("--n", type=int, default=300, help="news sentences (a multiple of 3)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--html", action="store_true", help="also time --document on a page built from the slice")
    a = p.parse_args()
    news = evaluate.load_sets(D.data_dir(), 1234, 1000)["news"][: a.n - a.n % 3]
    src, ref = [s for s, _ in news], [t for _, t in news]
    para = [" ".join(src[i:i + 3]) for i in range(0, len(src), 3)]
    para_ref = [" ".join(ref[i:i + 3]) for i in range(0, len(ref), 3)]
    configs = {
        "one sentence a line": (src, []),
        "three a line, split (default)": (para, []),
        "three a line, --split none": (para, ["--split", "none"]),
    }
    times = {k: [] for k in configs}
    outs = {}
    for r in range(a.rounds):
        for name, (lines, extra) in configs.items():
            t, out = run(a.attend, a.model, lines, a.threads, extra)
            times[name].append(t)
            outs[name] = out
            print(f"round {r + 1}: {name}: {t:.1f} s", file=sys.stderr, flush=True)
    one = outs["one sentence a line"]
    joined = [" ".join(one[i:i + 3]) for i in range(0, len(one), 3)]
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs; {a.threads} threads; "
          f"{len(src)} news held-out sentences; {a.rounds} interleaved rounds\n")
    print("| input | seconds (median) | sentences/s | output words | BLEU (3 a line) |")
    print("|---|---|---|---|---|")
    base = None
    for name, (lines, _) in configs.items():
        med = statistics.median(times[name])
        out = outs[name] if name != "one sentence a line" else joined
        score = bleu.corpus_bleu(out, para_ref)[0]
        words = sum(len(x.split()) for x in out)
        base = base or len(src) / med
        print(f"| {name} | {med:.1f} | {len(src) / med:.2f} ({len(src) / med / base:.0%}) | {words} | {score:.1f} |")
    same = sum(x == y for x, y in zip(outs["three a line, split (default)"], joined))
    print(f"\nparagraph lines equal to their sentences one per line, joined: {same} of {len(para)}")
    if a.html:
        bench_html(a, para)


def make_page(para):
    """An HTML page of the paragraphs: a heading and a list every few, the first word of
    every other sentence bold, a link in every third paragraph."""
    import html as H
    body = []
    for i, p in enumerate(para):
        words = H.escape(p).split(" ")
        if i % 2 == 0 and len(words) > 3:
            words[1] = f"<b>{words[1]}</b>"
        if i % 3 == 0 and len(words) > 6:
            words[5] = f'<a href="/n/{i}">{words[5]}</a>'
        tag = "li" if i % 7 == 6 else "p"
        if i % 10 == 0:
            body.append(f"<h2>{H.escape(' '.join(p.split()[:6]))}</h2>")
        body.append(f"<{tag}>{' '.join(words)}</{tag}>")
    return ("<!DOCTYPE html>\n<html lang=\"de\"><head><meta charset=\"utf-8\"><title>Nachrichten</title>"
            "<style>p { margin: 0 }</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")


def bench_html(a, para):
    """--document on a page of the paragraphs against the same paragraphs as plain lines:
    the difference is what markup costs (parsing, attention for the tagged segments, the
    alignment, writing)."""
    import tempfile
    page = make_page(para)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "page.html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        doc, plain = [], []
        for _ in range(a.rounds):
            t = time.perf_counter()
            p = subprocess.run([a.attend, "translate", "-m", a.model, "-t", str(a.threads), "--document", path],
                               capture_output=True, text=True)
            doc.append(time.perf_counter() - t)
            if p.returncode != 0:
                raise SystemExit(p.stderr)
            plain.append(run(a.attend, a.model, para, a.threads, [])[0])
    md, mp = statistics.median(doc), statistics.median(plain)
    print(f"\n--document on a {len(page.encode()) / 1024:.0f} KiB page of the same {len(para)} paragraphs "
          f"({page.count('<b>')} <b>, {page.count('<a ')} <a>, {page.count('<h2>')} <h2>): {md:.1f} s; "
          f"the paragraphs as plain lines: {mp:.1f} s; outside the plain translation: {md - mp:.1f} s "
          f"({(md - mp) / md:.0%})")


if __name__ == "__main__":
    main()
