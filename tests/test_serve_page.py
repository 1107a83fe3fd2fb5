#!/usr/bin/python3
"""attend serve's live page (GET /): headless Chromium (test_explore.py's WebDriver client,
reaching only 127.0.0.1) opens the page, types a sentence, and gets attend translate's
translation and the explore views (the matrix of the last layer's cross-attention, one row
per target piece, the /v1/translate numbers); a forced translation; hostile text shown as
text; no console errors. A screenshot goes to build/serve-screenshot.png (docs/serve.png is
one). Run: /usr/bin/python3 tests/test_serve_page.py"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402
import test_explore as E  # noqa: E402

SOURCE = "Ein Mann fährt mit dem Fahrrad durch die Stadt."
SHOWN = E.SHOWN.replace("return {", "return {live: !document.getElementById('live').hidden, "
                        "status: document.getElementById('live-status').textContent, "
                        "controls: !document.getElementById('controls').hidden, "
                        "count: document.querySelectorAll('#sent option').length, ")


def wait_for(b, pred, what, seconds=60):
    until = time.time() + seconds
    while time.time() < until:
        shown = b.js(SHOWN)
        if pred(shown):
            return shown
        time.sleep(0.2)
    raise AssertionError(f"{what}: the page shows {shown}")


def submit(b, source, target=""):
    b.js("document.getElementById('live-source').value = ''; document.getElementById('live-target').value = ''")
    b.type("#live-source", source)
    if target:
        b.type("#live-target", target)
    b.click("#live-go")


def live_page(server, b):
    b.open(f"http://127.0.0.1:{server.port}/")
    shown = b.js(SHOWN)
    assert shown["live"] and not shown["controls"], shown  # the form, no sentence yet
    submit(b, SOURCE)
    shown = wait_for(b, lambda s: s["count"] == 1 and s["rows"] > 0, "the first translation")
    want = S.translate_cli(S.SHIPPED, [SOURCE])[0]
    assert want in shown["sentence"] and shown["controls"], (want, shown["sentence"])
    status, _, body = server.post("/v1/translate", {"q": SOURCE, "attention": True})
    ex = body["translations"][0]["explore"]
    # the page opens on cross-attention, last layer, head 0: the numbers /v1 answered
    L, H, R, C = 5, 5, len(ex["tgt"]), len(ex["src"])
    assert "cross layer 4" in shown["title"] and "head 0" in shown["title"], shown["title"]
    assert shown["rows"] == R and len(shown["cells"]) == R * C, (shown["rows"], R, C)
    for r, c, v in shown["cells"]:
        assert abs(v - ex["cross"][((4 * H + 0) * R + r) * C + c] / 1000) < 1e-9, (r, c, v)
    assert L == 5 and shown["logprob"] == [round(x, 3) for x in ex["logprob"]] or len(shown["logprob"]) == R
    # a forced translation, then hostile text: shown as text, never run
    submit(b, "Wo ist der Bahnhof?", "Where is the train station?")
    shown = wait_for(b, lambda s: s["count"] == 2, "the forced translation")
    assert "Where is the train station?" in shown["sentence"] and "target" in shown["sentence"], shown["sentence"]
    submit(b, "<img src=x onerror=window.hacked=1> & </script>")
    shown = wait_for(b, lambda s: s["count"] == 3, "the hostile sentence")
    assert "<img src=x" in shown["sentence"] and not b.js("return window.hacked === 1"), shown["sentence"]
    submit(b, "   ")
    shown = wait_for(b, lambda s: "type a sentence" in s["status"], "a blank sentence refused")
    assert shown["count"] == 3
    b.js("document.getElementById('sent').value = '0'; document.getElementById('sent').dispatchEvent(new Event('change'))")
    b.js("document.getElementById('live-status').textContent = ''; window.scrollTo(0, 0)")
    b.screenshot(os.path.join(T.REPO, "build", "serve-screenshot.png"))
    errors = [e for e in b.console() if e.get("level") == "SEVERE"]
    assert not errors, f"console errors: {errors}"


def main():
    run = T.Runner()
    d = T.tempdir()
    with S.Server(S.SHIPPED, "-t", "2") as server:
        b = None
        try:
            b = E.Browser(d, loopback=True)
        except Exception as e:  # noqa: BLE001 (reported as the failing check below)
            run.check("browser starts", lambda: (_ for _ in ()).throw(e))
        if b:
            run.check("live page: type, translate, the matrix view; forced; hostile text; no errors",
                      live_page, server, b)
            b.close()
    run.finish()


if __name__ == "__main__":
    main()
