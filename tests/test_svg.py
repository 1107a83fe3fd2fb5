#!/usr/bin/python3
"""attend align --svg: the file is well-formed XML with the token labels, and it renders in a
real browser: headless Chromium takes a screenshot that is not blank (it shows the heatmap's
viridis colours). Fails if Chromium is absent and cannot be installed with apt-get. Run: /usr/bin/python3 tests/test_svg.py"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

SVG_NS = "{http://www.w3.org/2000/svg}"


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    if os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        return shutil.which("chromium")
    return None


def read_png(path):
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) to rows of pixels."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return rows


def make_model(d):
    return T.random_gguf(d, seed=3, d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=2,
                         decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_length=12)


def svg_valid(gguf, d):
    svg = os.path.join(d, "a.svg")
    src = "Wo ist der Bahnhof? <&> \"Größe\""
    T.run_attend(["align", "-m", gguf, src, "--target", "Where is the station?", "--svg", svg])
    root = ET.parse(svg).getroot()  # well-formed, labels escaped
    assert root.tag == SVG_NS + "svg"
    texts = ["".join(t.itertext()) for t in root.iter(SVG_NS + "text")]
    assert "\u2581ist" in texts and "\u2581der" in texts, texts[:12]
    assert any("Größe" in t for t in texts) and any("<&>" in t for t in texts)
    rects = [r for r in root.iter(SVG_NS + "rect") if r.get("fill", "").startswith("#")]
    assert len(rects) > 20
    svg2 = os.path.join(d, "heads.svg")
    T.run_attend(["align", "-m", gguf, "Ich habe Hunger.", "--all-heads", "--words", "--svg", svg2])
    titles = ["".join(t.itertext()) for t in ET.parse(svg2).getroot().iter(SVG_NS + "text")]
    assert all(f"1:{h}" in titles for h in range(4)), titles[:10]
    return svg


def renders_in_chromium(svg, d):
    chromium = find_chromium()
    # make deps installs it; a browser test that cannot find a browser has not passed
    assert chromium, ("chromium is not installed and could not be installed: "
                      "run `make deps` (as root) or `sudo apt-get install -y chromium`")
    png = os.path.join(d, "shot.png")
    prof = tempfile.mkdtemp(prefix="chromium-")
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={prof}", "--hide-scrollbars", "--window-size=900,700",
           f"--screenshot={png}", "file://" + os.path.abspath(svg)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    shutil.rmtree(prof, ignore_errors=True)
    assert os.path.exists(png), f"no screenshot: {p.stderr[-2000:]}"
    rows = read_png(png)
    pixels = [px for row in rows[::2] for px in row[::2]]
    colours = set(pixels)
    non_white = sum(1 for px in pixels if px != (255, 255, 255))
    # viridis cells: dark purple to yellow; a blank page is one colour
    purple = sum(1 for (r, g, b) in pixels if b > r + 20 and b > g)
    assert len(colours) > 20, f"screenshot has only {len(colours)} colours"
    assert non_white > 0.05 * len(pixels), f"screenshot almost blank ({non_white} of {len(pixels)})"
    assert purple > 100, "no heatmap colours in the screenshot"
    print(f"   screenshot {len(rows[0])}x{len(rows)}: {len(colours)} colours, "
          f"{100 * non_white / len(pixels):.0f}% non-white")


def main():
    run = T.Runner()
    d = T.tempdir()
    gguf = make_model(d)
    svg = []
    run.check("svg is well-formed with labels", lambda: svg.append(svg_valid(gguf, d)))
    run.check("svg renders in headless chromium", lambda: renders_in_chromium(svg[0], d))
    shutil.rmtree(d, ignore_errors=True)
    run.finish()


if __name__ == "__main__":
    main()
