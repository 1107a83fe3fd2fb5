#!/usr/bin/python3
"""attend explore: the page works in a real browser. Headless Chromium, driven through
chromedriver's WebDriver protocol (plain HTTP, so no Python package is needed), opens the
page from disk with networking disabled, keys and clicks through kinds, layers and heads,
and reads back what the page shows: every matrix cell must equal the .npz dump's number for
the same sentence (to the page's 3 decimals). No console errors, no network request,
hostile text is shown as text and never run, too-long lines are refused, and a 40-piece
sentence on a 6-layer, 8-head model stays under 2 MB. A screenshot is written to
build/explore-screenshot.png for people to look at. Run: /usr/bin/python3 tests/test_explore.py"""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

KEYS = {"right": "\ue014", "left": "\ue012", "up": "\ue013", "down": "\ue015"}
SOURCE = "Ein Mann mit einem roten Hut fährt mit dem Fahrrad durch die alte Stadt am Fluss."
TARGET = "A man in a red hat rides his bike through the old town by the river."


def make_model(d):
    return T.random_gguf(d, seed=5, d_model=64, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                         decoder_attention_heads=8, encoder_ffn_dim=64, decoder_ffn_dim=64, max_length=40)


# ---------------------------------------------------------------------------------------
# a minimal WebDriver client

class Browser:
    def __init__(self, d, loopback=False):
        """loopback: let the page reach servers on 127.0.0.1 (attend serve's live page);
        everything else stays unreachable."""
        self.driver = shutil.which("chromedriver")
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if (not self.driver or not chromium) and os.geteuid() == 0:
            subprocess.run(["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"],
                           capture_output=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            self.driver = shutil.which("chromedriver")
            chromium = shutil.which("chromium")
        assert self.driver and chromium, ("chromium and chromedriver are needed: run `make deps` "
                                          "(as root) or `sudo apt-get install -y chromium chromium-driver`")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.proc = subprocess.Popen([self.driver, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                if self.call("GET", "/status")["ready"]:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", f"--user-data-dir={os.path.join(d, 'profile')}",
                # no network: every host resolves to nothing and every request goes to a dead proxy
                "--host-resolver-rules=MAP * ~NOTFOUND" + (", EXCLUDE 127.0.0.1" if loopback else ""),
                "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=" + ("127.0.0.1" if loopback else "<-loopback>")]
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {"binary": chromium, "args": args}}}}
        self.sid = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())["value"]

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.sid}{path}", body)

    def open(self, path):
        url = path if path.startswith("http://") else "file://" + os.path.abspath(path)
        self.s("POST", "/url", {"url": url})

    def type(self, css, text):
        el = self.s("POST", "/element", {"using": "css selector", "value": css})
        self.s("POST", f"/element/{list(el.values())[0]}/value", {"text": text})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def keys(self, *names):
        text = "".join(KEYS.get(k, k) for k in names)
        acts = []
        for ch in text:
            acts += [{"type": "keyDown", "value": ch}, {"type": "keyUp", "value": ch}]
        self.s("POST", "/actions", {"actions": [{"type": "key", "id": "kb", "actions": acts}]})

    def click(self, css):
        el = self.s("POST", "/element", {"using": "css selector", "value": css})
        self.s("POST", f"/element/{list(el.values())[0]}/click", {})

    def console(self):
        return self.s("POST", "/se/log", {"type": "browser"})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.s("GET", "/screenshot")))

    def close(self):
        try:
            self.s("DELETE", "")
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=30)


SHOWN = """
const cells = [...document.querySelectorAll('#matrix td.c')];
return {title: document.getElementById('mx-title').textContent,
        rows: document.querySelectorAll('#matrix tbody tr').length,
        cells: cells.map(td => [+td.dataset.r, +td.dataset.c, +td.dataset.v]),
        links: [...document.querySelectorAll('#al line')].map(l => l.dataset.link),
        logprob: [...document.querySelectorAll('#lp tr')].slice(1, -1).map(r => +r.children[1].textContent),
        grid: document.querySelectorAll('#grid figure').length,
        hv_lines: document.querySelectorAll('#hv line').length,
        sentence: document.getElementById('sentences').textContent};
"""


def matrix_of(shown):
    rows = shown["rows"]
    cols = len(shown["cells"]) // max(rows, 1)
    m = np.zeros((rows, cols))
    for r, c, v in shown["cells"]:
        m[r, c] = v
    return m


def same(shown, want, what):
    got = matrix_of(shown)
    assert got.shape == want.shape, f"{what}: page shows {got.shape}, dump has {want.shape}"
    err = float(np.abs(got - want).max())
    assert err <= 1.1e-3, f"{what}: page differs from the .npz by {err}"


def browser_matches_dump(gguf, d, b):
    page, npz = os.path.join(d, "p.html"), os.path.join(d, "p.npz")
    T.run_attend(["explore", "-m", gguf, SOURCE, "--target", TARGET, "-o", page])
    T.run_attend(["align", "-m", gguf, SOURCE, "--target", TARGET, "--dump-attention", npz])
    z = np.load(npz)
    b.open(page)
    shown = b.js(SHOWN)
    # the page opens on cross-attention, last layer, head 0
    assert "cross layer 5" in shown["title"] and "head 0" in shown["title"], shown["title"]
    same(shown, z["s0/cross/l5"][0], "cross 5:0")
    assert shown["grid"] == 48, shown["grid"]
    assert shown["hv_lines"] > 0
    assert np.allclose(shown["logprob"], z["s0/logprob"], atol=6e-4), "log-probs differ"
    b.keys("right", "right")                       # head 2
    same(b.js(SHOWN), z["s0/cross/l5"][2], "cross 5:2 (keys)")
    b.keys("up", "up")                             # layer 3
    same(b.js(SHOWN), z["s0/cross/l3"][2], "cross 3:2 (keys)")
    b.keys("a")                                    # heads averaged
    same(b.js(SHOWN), z["s0/cross/l3"].mean(0), "cross 3:avg")
    b.keys("2", "down")                            # encoder self-attention, layer 4
    s = b.js(SHOWN)
    assert "enc layer 4" in s["title"], s["title"]
    same(s, z["s0/enc_self/l4"].mean(0), "enc 4:avg")
    b.keys("right")                                # from the average to head 0
    same(b.js(SHOWN), z["s0/enc_self/l4"][0], "enc 4:0")
    b.keys("3")                                    # decoder self-attention
    b.click('#grid figure[data-layer="1"][data-head="7"]')
    s = b.js(SHOWN)
    assert "dec layer 1" in s["title"] and "head 7" in s["title"], s["title"]
    same(s, z["s0/dec_self/l1"][7], "dec 1:7 (grid click)")
    # the alignment view draws attend align's links for its first preset (the model's own view)
    al = T.run_attend(["align", "-m", gguf, SOURCE, "--target", TARGET, "--format", "json"]).stdout
    want = sorted(f"{i}-{j}" for i, j in json.loads(al)["links"])
    assert sorted(s["links"]) == want, (s["links"], want)
    os.makedirs(os.path.join(T.REPO, "build"), exist_ok=True)
    b.keys("1")
    b.js("window.scrollTo(0, 0)")
    b.screenshot(os.path.join(T.REPO, "build", "explore-screenshot.png"))
    errors = [e for e in b.console() if e.get("level") == "SEVERE"]
    assert not errors, f"console errors: {errors}"
    loaded = b.js("return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded == [], f"the page loaded resources: {loaded}"


def several_sentences(gguf, d, b):
    page, npz = os.path.join(d, "s.html"), os.path.join(d, "s.npz")
    lines = "Ich habe Hunger.\nWo ist der Bahnhof?\n\n"
    T.run_attend(["explore", "-m", gguf, "--greedy", "-o", page], input_text=lines)
    T.run_attend(["translate", "-m", gguf, "--greedy", "--dump-attention", npz], input_text=lines)
    z = np.load(npz)
    b.open(page)
    assert b.js("return document.getElementById('sent').options.length") == 3
    b.keys("s")
    s = b.js(SHOWN)
    assert "Wo ist der Bahnhof?" in s["sentence"], s["sentence"]
    assert str(z["s1/text"][0]) in s["sentence"]
    same(s, z["s1/cross/l5"][0], "sentence 2, cross 5:0")
    b.keys("s")                          # the empty line is listed, not translated
    s = b.js(SHOWN)
    assert "s2/text" not in z and "not translated" in s["sentence"] and not s["cells"], s
    assert not [e for e in b.console() if e.get("level") == "SEVERE"]


def hostile_text_is_text(gguf, d, b):
    page = os.path.join(d, "h.html")
    src = ('</script><script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> '
           '<!-- & \u2028 "quote" \\ \xff')
    T.run_attend(["explore", "-m", gguf, "-o", page, "--", src])
    html = open(page, encoding="utf-8", errors="replace").read()
    assert html.count("</script>") == 2, "a token closed a script element"
    b.open(page)
    assert b.js("return window.pwned === undefined") is True, "hostile text ran"
    shown = b.js(SHOWN)["sentence"]
    assert "<script>window.pwned = 1</script>" in shown and 'onerror="window.pwned = 2"' in shown, shown
    assert b.js("return document.querySelectorAll('img').length") == 0
    assert not [e for e in b.console() if e.get("level") == "SEVERE"]


def refusals(gguf, d):
    long_line = " ".join(["Bahnhof"] * 400)
    p = T.run_attend(["explore", "-m", gguf, "-o", os.path.join(d, "x.html"), long_line], check=False)
    assert p.returncode == 2 and "too long for the page" in p.stderr, (p.returncode, p.stderr)
    assert not os.path.exists(os.path.join(d, "x.html")), "a refused page was left behind"
    p = T.run_attend(["explore", "-m", gguf, "--target", "x"], input_text="a\n", check=False)
    assert p.returncode == 2 and "--target" in p.stderr, p.stderr
    p = T.run_attend(["explore", "-m", gguf, "--preset", "9:0", "x", "-o", os.path.join(d, "y.html")], check=False)
    assert p.returncode == 2 and "preset" in p.stderr, p.stderr
    p = T.run_attend(["explore", "--help"])
    assert "usage: attend explore" in p.stdout


def page_size(gguf, d):
    page = os.path.join(d, "big.html")
    words = ("Der alte Mann mit dem grünen Hut und die junge Frau mit dem roten Fahrrad fahren heute "
             "langsam durch die Stadt").split()
    T.run_attend(["explore", "-m", gguf, " ".join(words), "--target", " ".join(words[::-1]), "-o", page])
    html = open(page, encoding="utf-8").read()
    data = json.loads(html.split('id="attend-data">')[1].split("</script>")[0])
    s = data["sentences"][0]
    assert len(s["src"]) >= 40 and len(s["tgt"]) >= 40, (len(s["src"]), len(s["tgt"]))
    size = os.path.getsize(page)
    print(f"   {len(s['src'])} source and {len(s['tgt'])} target pieces, 6x8 heads: {size / 1e6:.2f} MB")
    assert size < 2e6, f"page of {size} bytes"


def main():
    run = T.Runner()
    d = T.tempdir()
    gguf = make_model(d)
    run.check("too-long lines, bad options and --help", refusals, gguf, d)
    run.check("a 40-piece sentence on 6x8 heads stays under 2 MB", page_size, gguf, d)
    b = None
    try:
        b = Browser(d)
    except Exception as e:  # noqa: BLE001 (reported as the failing checks below)
        run.check("browser starts", lambda: (_ for _ in ()).throw(e))
    if b:
        run.check("browser: keys and clicks show the dump's numbers", browser_matches_dump, gguf, d, b)
        run.check("browser: several sentences from standard input", several_sentences, gguf, d, b)
        run.check("browser: hostile text is shown, never run", hostile_text_is_text, gguf, d, b)
        b.close()
    shutil.rmtree(d, ignore_errors=True)
    run.finish()


if __name__ == "__main__":
    main()
