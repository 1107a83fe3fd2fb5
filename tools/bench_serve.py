#!/usr/bin/python3
"""attend serve's throughput and latency (issue 28): the same lines sent as single-sentence
POST /translate requests by 1, 4 and 16 concurrent clients (keep-alive connections), against
`attend translate` on the same lines in one process. Prints a Markdown section and, with
--md BENCHMARKS.md, writes it there in place of its previous run.

    tools/bench_serve.py [--attend build/attend] [-m models/de-en.gguf] [-t 2] [--lines 300]
                         [--clients 1,4,16] [--rounds 3] [--md BENCHMARKS.md]

The lines: Multi30k German training captions (tools/data_paths.py finds the corpora)."""
import argparse
import gzip
import http.client
import json
import os
import platform
import queue
import statistics
import subprocess
import threading
import time

import data_paths

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HEADING = "## Serving (issues 28, 35)"


def read_lines(n):
    with gzip.open(data_paths.corpus("multi30k/train.de.gz"), "rt", encoding="utf-8") as f:
        out = [line.rstrip("\n") for _, line in zip(range(n + 9000), f)]
    return out[9000:9000 + n]


def cli_lines_per_second(attend, model, threads, lines):
    """attend translate on every line at once, the model's load time (an empty input) taken off."""
    def timed(text):
        t0 = time.perf_counter()
        out = subprocess.run([attend, "translate", "-m", model, "-t", str(threads)], input=text,
                             capture_output=True, text=True, check=True).stdout
        return time.perf_counter() - t0, out
    load, _ = timed("")
    total, out = timed("\n".join(lines) + "\n")
    return len(lines) / (total - load), out.split("\n")[:-1], total, load


class Server:
    def __init__(self, attend, model, threads):
        self.log = open(os.devnull, "w")
        self.proc = subprocess.Popen([attend, "serve", "-m", model, "--port", "0", "-t", str(threads),
                                      "--no-access-log"], stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        self.port = int(line.split("127.0.0.1:")[1].split("/")[0])

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def run_clients(port, lines, clients):
    """Every line once, clients at a time; (lines/s, latencies in ms, translations)."""
    todo = queue.Queue()
    for i, line in enumerate(lines):
        todo.put((i, line))
    got, lat = [None] * len(lines), []
    lock = threading.Lock()

    def client():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while True:
            try:
                i, line = todo.get_nowait()
            except queue.Empty:
                break
            t0 = time.perf_counter()
            c.request("POST", "/translate", body=json.dumps({"q": line}), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            body = json.loads(r.read())
            ms = (time.perf_counter() - t0) * 1000
            assert r.status == 200, body
            got[i] = body["translatedText"]
            with lock:
                lat.append(ms)
        c.close()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(lines) / (time.perf_counter() - t0), lat, got


HEY_SENTENCE = "Ein Mann mit einem orangefarbenen Hut starrt auf etwas."


def run_hey(port, clients, seconds):
    """hey (Debian's load generator) posting one sentence for `seconds` from `clients` workers:
    (requests/s, p50 ms, p99 ms, {status: count})."""
    body = json.dumps({"q": HEY_SENTENCE})
    out = subprocess.run(["hey", "-z", f"{seconds}s", "-c", str(clients), "-m", "POST", "-T", "application/json",
                          "-d", body, f"http://127.0.0.1:{port}/translate"],
                         capture_output=True, text=True, check=True).stdout
    rate = float(out.split("Requests/sec:")[1].split()[0])
    pct = {line.split("%")[0].strip(): float(line.split(" in ")[1].split()[0]) * 1000
           for line in out.split("Latency distribution:")[1].split("\n\n")[0].strip().splitlines()}
    codes = {}
    for line in out.split("Status code distribution:")[1].strip().splitlines():
        if line.strip().startswith("["):
            codes[int(line.split("]")[0].strip("[ "))] = int(line.split("]")[1].split()[0])
    return rate, pct["50"], pct["99"], codes


def hey_section(a, results):
    """The hey table: each client count's medians over the rounds."""
    md = ["", f"With `hey` (Go, one process; Debian's package), the sentence \"{HEY_SENTENCE}\" posted for "
          f"{a.hey} s by each number of workers, {a.rounds} interleaved rounds, medians "
          f"(`tools/bench_serve.py --hey {a.hey}`):", "",
          "| workers | requests/s | vs 1 worker | p50 latency | p99 latency | status codes |", "|---|---|---|---|---|---|"]
    one = statistics.median(r[0] for r in results[min(results)])
    for c in sorted(results):
        rs = results[c]
        codes = {}
        for r in rs:
            for k, v in r[3].items():
                codes[k] = codes.get(k, 0) + v
        rate = statistics.median(r[0] for r in rs)
        md.append(f"| {c} | {rate:.1f} | {rate / one:.2f}x | {statistics.median(r[1] for r in rs):.0f} ms | "
                  f"{statistics.median(r[2] for r in rs):.0f} ms | "
                  f"{', '.join(f'{k}: {v}' for k, v in sorted(codes.items()))} |")
    return "\n".join(md) + "\n"


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def machine(attend):
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    isa = subprocess.run([attend, "isa"], capture_output=True, text=True).stdout.split("\n")[0]
    return f"{cpu}, {os.cpu_count()} logical CPUs, Linux {platform.release()}; `attend isa`: {isa}; " \
           f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


def report(a, cli_rates, rates, lats, cli_median, identical):
    """The section: each round's lines/s (the machine may be shared: compare within a round),
    the ratios' medians over the rounds, the latencies over all rounds."""
    counts = sorted(rates)
    md = [HEADING, "",
          f"Measured {time.strftime('%Y-%m-%d %H:%M')} UTC by `tools/bench_serve.py -m {a.model} -t {a.threads} "
          f"--lines {a.lines} --clients {a.clients} --rounds {a.rounds}` on {machine(a.attend)}. The same "
          f"{a.lines} Multi30k German captions, each one POST /translate request (keep-alive connections), from "
          f"{', '.join(map(str, counts))} concurrent clients; the server's default search (the model's 4 beams), "
          f"batching across requests (`--gather-ms 5`, `--max-batch-tokens 2048`); against `attend translate "
          f"-t {a.threads}` with all lines on standard input (its model loading, {cli_median[2]:.2f} s, taken off). "
          f"Each round runs every configuration once, one after the other; the ratios are taken within a round "
          f"and their medians reported, since other processes may share the machine. Every answer "
          f"{'equals' if identical else 'DIFFERS FROM'} `attend translate`'s line.", "",
          "| round | `attend translate` | " + " | ".join(f"{c} client{'s' if c > 1 else ''}" for c in counts) + " |",
          "|---" * (len(counts) + 2) + "|"]
    for k, cli in enumerate(cli_rates):
        md.append(f"| {k + 1} | {cli:.1f} lines/s | " + " | ".join(f"{rates[c][k]:.1f}" for c in counts) + " |")
    md += ["", "| clients | vs 1 client (median) | vs `attend translate` (median) | p50 latency | p99 latency |",
           "|---|---|---|---|---|"]
    one = rates[counts[0]]
    ratio = {c: (statistics.median(r / o for r, o in zip(rates[c], one)),
                 statistics.median(r / x for r, x in zip(rates[c], cli_rates))) for c in counts}
    for c in counts:
        md.append(f"| {c} | {ratio[c][0]:.2f}x | {100 * ratio[c][1]:.0f}% | {statistics.median(lats[c]):.0f} ms | "
                  f"{percentile(lats[c], 99):.0f} ms |")
    if 16 in ratio:
        up, share = ratio[16]
        md += ["", f"Targets: 16 clients ≥ 2x one client: {up:.2f}x ({'met' if up >= 2 else 'not met'}); "
               f"≥ 80% of `attend translate`'s lines/s: {100 * share:.0f}% ({'met' if share >= 0.8 else 'not met'})."]
    return "\n".join(md) + "\n"


def write_md(path, section):
    """Replace the section (from its heading to the next "## ") in path, or append it."""
    text = open(path).read() if os.path.exists(path) else ""
    lines, out, skip, done = text.split("\n"), [], False, False
    for line in lines:
        if line.startswith("## "):
            skip = line.strip() == HEADING
            if skip and not done:
                out += section.rstrip("\n").split("\n") + [""]
                done = True
        if not skip:
            out.append(line)
    text = "\n".join(out)
    if not done:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attend", default=os.path.join(REPO, "build", "attend"))
    ap.add_argument("-m", "--model", default="models/de-en.gguf")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--lines", type=int, default=300)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--rounds", type=int, default=3, help="each configuration this often, interleaved; medians")
    ap.add_argument("--hey", type=int, default=0, metavar="SECONDS",
                    help="also run hey (Debian's load generator) for SECONDS per client count and round")
    ap.add_argument("--md", help="write the section into this Markdown file")
    a = ap.parse_args()
    lines = read_lines(a.lines)
    counts = [int(c) for c in a.clients.split(",")]
    cli_runs, rates, lats, identical = [], {c: [] for c in counts}, {c: [] for c in counts}, True
    hey = {c: [] for c in counts}
    server = Server(a.attend, a.model, a.threads)
    try:
        run_clients(server.port, lines[:20], 4)  # warm-up
        for round_ in range(a.rounds):  # interleaved: a busy spell hits every configuration alike
            cli_rate, want, cli_total, cli_load = cli_lines_per_second(a.attend, a.model, a.threads, lines)
            cli_runs.append((cli_rate, cli_total, cli_load))
            print(f"round {round_ + 1}: attend translate {cli_rate:.1f} lines/s", flush=True)
            for clients in counts:
                rate, lat, got = run_clients(server.port, lines, clients)
                identical &= got == want
                rates[clients].append(rate)
                lats[clients] += lat
                print(f"round {round_ + 1}: {clients} clients {rate:.1f} lines/s", flush=True)
                if a.hey:
                    hey[clients].append(run_hey(server.port, clients, a.hey))
                    print(f"round {round_ + 1}: hey {clients} workers {hey[clients][-1]}", flush=True)
    finally:
        server.stop()
    section = report(a, [r[0] for r in cli_runs], rates, lats, sorted(cli_runs)[len(cli_runs) // 2], identical)
    if a.hey:
        section += hey_section(a, hey)
    print(section)
    if a.md:
        write_md(a.md, section)
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
