#!/usr/bin/python3
"""attend serve's speech endpoints, POST /v1/audio/transcriptions and /v1/audio/translations
(OpenAI's API), on a random Whisper checkpoint (tests/test_whisper.py's Case) served beside
the text model tests/data/tiny-v1.gguf: espeak-ng speech uploaded as WAV and FLAC in every
response_format gives what attend transcribe gives for the same file (json: its text and
segments; srt, vtt and verbose_json: its own --output, byte for byte); both endpoints; every
error in OpenAI's shape with its status; the limits (audio length, upload size, a stalled
upload, the queue, keys); the HTTP thread never waits on a transcription; the text endpoints
refuse the speech model; the npm client openai (installed by make test into build/npm)
transcribing and translating against the server.
Run: /usr/bin/python3 tests/test_serve_audio.py"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import soundfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402
import test_whisper as W  # noqa: E402

NPM = os.path.join(T.REPO, "build", "npm")
NPM_VERSION = "6.49.0"
TRANSCRIBE = "/v1/audio/transcriptions"
TRANSLATE = "/v1/audio/translations"
# what the server does with temperature 0 (or none), as OpenAI's API: openai-whisper's fallback
OPENAI_FALLBACK = ("--temperature", "0,0.2,0.4,0.6,0.8,1", "--compression-ratio-threshold", "2.4",
                   "--logprob-threshold", "-1", "--no-speech-threshold", "0.6")


# --------------------------------------------------------------------------------------
# Fixtures

class Audio:
    """The model and the clips: German speech as WAV and FLAC (the same samples), a 13 s clip
    (three times an English one) and a 63 s one."""

    def __init__(self, work):
        self.case = W.Case(work, "mini-multilingual", "mini", False, "bin",
                           dict(decoder_layers=3, decoder_attention_heads=2))
        self.model = os.path.basename(self.case.gguf)[:-len(".gguf")]
        self.wav = os.path.join(work, "speech.wav")
        subprocess.run(["espeak-ng", "-v", "de", "-w", self.wav, "Ich habe Hunger. Wo ist der Bahnhof?"],
                       check=True)
        x, rate = soundfile.read(self.wav, dtype="int16")
        self.flac = os.path.join(work, "speech.flac")
        soundfile.write(self.flac, x, rate)
        en = os.path.join(work, "english.wav")
        subprocess.run(["espeak-ng", "-v", "en", "-w", en, "The quick brown fox jumps over the lazy dog."], check=True)
        y, rate = soundfile.read(en, dtype="int16")
        self.mid = os.path.join(work, "mid.wav")
        soundfile.write(self.mid, np.concatenate([y] * 5)[: 13 * rate], rate)
        self.long = os.path.join(work, "long.wav")
        soundfile.write(self.long, np.concatenate([y] * 30)[: 63 * rate], rate)
        self.cli_cache = {}

    def cli(self, path, *args, output="json"):
        """attend transcribe's answer (timestamps on, and OpenAI's temperature fallback unless
        args set a temperature, as the server decodes): parsed JSON, or the text of srt, vtt."""
        key = (path, args, output)
        if key not in self.cli_cache:
            fallback = () if "--temperature" in args else OPENAI_FALLBACK
            fallback += () if "--task" in args else ("--task", "transcribe")  # the server's for /transcriptions
            p = T.run_attend(["transcribe", "-m", self.case.gguf, "-t", "2", "--timestamps", "--output", output,
                              *fallback, *args, path])
            self.cli_cache[key] = json.loads(p.stdout) if "json" in output else p.stdout
        return self.cli_cache[key]


def multipart(fields, files=()):
    """A multipart/form-data body: fields (name, value) pairs, files (name, filename, bytes)."""
    boundary = "attendtest" + uuid.uuid4().hex
    out = []
    for name, value in fields:
        out.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, filename, data in files:
        out.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                   f'Content-Type: application/octet-stream\r\n\r\n'.encode() + data + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


class Client:
    """Speech requests to one server, counted (the access log must have a line for each)."""

    def __init__(self, server):
        self.server, self.sent = server, 0

    def post(self, path, path_or_bytes, fields=(), headers=None, filename=None):
        """(status, headers, JSON or text) of an upload; path_or_bytes None: no file part."""
        files = ()
        if path_or_bytes is not None:
            data = path_or_bytes if isinstance(path_or_bytes, bytes) else open(path_or_bytes, "rb").read()
            name = filename or (os.path.basename(path_or_bytes) if isinstance(path_or_bytes, str) else "clip.wav")
            files = (("file", name, data),)
        body, kind = multipart(list(fields), files)
        self.sent += 1
        return self.server.request("POST", path, body, headers=dict({"Content-Type": kind}, **(headers or {})))


def openai_error(answer, status, got_status, param=None, code=None, words=None):
    """An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""
    assert got_status == status, (got_status, answer)
    assert isinstance(answer, dict) and list(answer) == ["error"], answer
    e = answer["error"]
    assert set(e) == {"message", "type", "param", "code"} and e["message"], e
    want_type = "server_error" if status >= 500 else "requests" if status == 429 else "invalid_request_error"
    assert e["type"] == want_type and e["param"] == param and e["code"] == code, e
    assert words is None or words in e["message"], e


# --------------------------------------------------------------------------------------
# Checks

def check_formats(audio, client):
    """Every response_format, WAV and FLAC: json and text are the CLI's text, the segments of
    verbose_json the CLI's segments, srt, vtt and verbose_json the CLI's --output itself."""
    ref = audio.cli(audio.wav)
    assert ref["text"] and ref["segments"], ref
    assert audio.cli(audio.flac)["segments"] == ref["segments"], "WAV and FLAC of one clip differ"
    for path in (audio.wav, audio.flac):
        status, headers, body = client.post(TRANSCRIBE, path, [("model", audio.model)])
        assert status == 200 and headers["Content-Type"].startswith("application/json"), (status, headers)
        assert body == {"text": ref["text"]}, (body, ref["text"])
        status, headers, body = client.post(TRANSCRIBE, path, [("response_format", "text")])
        assert status == 200 and headers["Content-Type"].startswith("text/plain"), (status, headers)
        assert body == ref["text"] + "\n", (body, ref["text"])
        status, _, body = client.post(TRANSCRIBE, path, [("response_format", "verbose_json")])
        assert status == 200 and body == audio.cli(path, output="verbose_json"), body
        assert body["task"] == "transcribe" and body["text"] == ref["text"] and "words" not in body, body
        assert abs(body["duration"] - soundfile.info(path).duration) < 0.001, body["duration"]
        for got, want in zip(body["segments"], ref["segments"], strict=True):
            assert {k: got[k] for k in ("start", "end", "text", "tokens")} == \
                {k: want[k] for k in ("start", "end", "text", "tokens")}, (got, want)
            assert abs(got["avg_logprob"] - want["avg_logprob"]) < 1e-5 and got["temperature"] == want["temperature"]
            assert got["compression_ratio"] > 0 and abs(got["no_speech_prob"] - want["no_speech_prob"]) < 1e-6, got
        assert [s["id"] for s in body["segments"]] == list(range(len(ref["segments"]))), body
        for fmt in ("srt", "vtt"):
            status, headers, body = client.post(TRANSCRIBE, path, [("response_format", fmt)])
            assert status == 200 and body == audio.cli(path, output=fmt), (fmt, body)
            assert headers["Content-Type"].startswith("text/vtt" if fmt == "vtt" else "text/plain"), headers
            check_cues(body, ref["segments"], fmt)


def check_cues(text, segments, fmt):
    """The cues of srt or vtt: one per segment, its times and its stripped text."""
    blocks = text.split("\n\n")
    assert blocks[-1] == "", blocks[-1:]
    blocks = blocks[1:-1] if fmt == "vtt" else blocks[:-1]
    assert fmt == "srt" or text.startswith("WEBVTT\n\n"), text[:20]
    assert len(blocks) == len(segments), (len(blocks), len(segments))
    sep = "," if fmt == "srt" else "."
    for k, (block, seg) in enumerate(zip(blocks, segments)):
        lines = block.split("\n")
        if fmt == "srt":
            assert lines.pop(0) == str(k + 1), block
        times = " --> ".join(
            f"{int(t // 3600):02d}:{int(t // 60 % 60):02d}:{int(t % 60):02d}{sep}{round(t * 1000) % 1000:03d}"
            for t in (seg["start"], seg["end"]))
        assert lines[0] == times, (lines[0], times)
        assert "\n".join(lines[1:]) == seg["text"].strip().replace("-->", "->"), (lines, seg["text"])


def check_language_and_task(audio, client):
    """language (a code or Whisper's name) and the translations endpoint, against the CLI's
    --language and --task translate; timestamp_granularities[] word: the CLI's
    --word-timestamps words."""
    ref = audio.cli(audio.wav, "--language", "de")
    for lang in ("de", "German"):
        status, _, body = client.post(TRANSCRIBE, audio.wav, [("language", lang), ("response_format", "verbose_json")])
        assert status == 200 and body["language"] == "german", (lang, status, body)
        assert [s["tokens"] for s in body["segments"]] == [s["tokens"] for s in ref["segments"]], lang
    ref = audio.cli(audio.flac, "--task", "translate")
    status, _, body = client.post(TRANSLATE, audio.flac, [("model", audio.model + ".gguf")])
    assert status == 200 and body == {"text": ref["text"]}, (body, ref["text"])
    status, _, body = client.post(TRANSLATE, audio.flac, [("response_format", "verbose_json")])
    assert status == 200 and body == audio.cli(audio.flac, "--task", "translate", output="verbose_json"), body
    assert body["task"] == "translate", body
    fields = [("response_format", "verbose_json"), ("timestamp_granularities[]", "word"),
              ("timestamp_granularities[]", "segment")]
    status, _, body = client.post(TRANSCRIBE, audio.wav, fields)
    want = audio.cli(audio.wav, "--word-timestamps", output="verbose_json")  # the CLI's words, each time
    assert status == 200 and body == want and body["words"] and len(body["segments"]) >= 1, (body, want)
    assert all(set(w) == {"word", "start", "end"} and w["start"] <= w["end"] for w in body["words"]), body["words"]
    status, _, body = client.post(TRANSCRIBE, audio.wav, [("response_format", "verbose_json"),
                                                          ("timestamp_granularities", "word")])
    assert status == 200 and body == want, body
    status, _, body = client.post(TRANSCRIBE, audio.wav, [("model", "whisper-1"), ("temperature", "0"),
                                                          ("prompt", "Bahnhof"), ("stream", "false")])
    assert status == 200 and body == {"text": audio.cli(audio.wav)["text"]}, body
    status, _, body = client.post(TRANSCRIBE, audio.wav, [("temperature", "0.4"), ("response_format", "verbose_json")])
    assert status == 200 and body == audio.cli(audio.wav, "--temperature", "0.4", output="verbose_json"), body
    assert {s["temperature"] for s in body["segments"]} == {0.4}, body["segments"]


def check_errors(audio, client, server):
    """Each mistake a client can make: OpenAI's error shape and status."""
    wav = audio.wav
    cases = [
        (TRANSCRIBE, None, [("model", audio.model)], 400, "file", None, "missing file"),
        (TRANSCRIBE, b"", [], 400, "file", None, "empty"),
        (TRANSCRIBE, b"not audio at all, only text\n" * 20, [], 400, "file", "invalid_audio", "audio"),
        (TRANSCRIBE, open(wav, "rb").read()[:30], [], 400, "file", "invalid_audio", "audio"),
        (TRANSCRIBE, wav, [("model", "tiny-v1")], 400, "model", "model_not_supported", "text model"),
        (TRANSCRIBE, wav, [("model", "whisper-9")], 404, "model", "model_not_found", "mini-multilingual"),
        (TRANSCRIBE, wav, [("language", "xx")], 400, "language", "unsupported_language", "xx"),
        (TRANSCRIBE, wav, [("response_format", "docx")], 400, "response_format", None, "docx"),
        (TRANSCRIBE, wav, [("temperature", "1.5")], 400, "temperature", None, "from 0 to 1"),
        (TRANSCRIBE, wav, [("temperature", "hot")], 400, "temperature", None, "from 0 to 1"),
        (TRANSCRIBE, wav, [("timestamp_granularities[]", "word")], 400, "timestamp_granularities", None,
         "verbose_json"),
        (TRANSCRIBE, wav, [("timestamp_granularities[]", "line"), ("response_format", "verbose_json")], 400,
         "timestamp_granularities", None, "segment or word"),
        (TRANSCRIBE, wav, [("stream", "true")], 400, "stream", None, "not supported"),
        (TRANSLATE, wav, [("model", "tiny-v1.gguf")], 400, "model", "model_not_supported", "text model"),
    ]
    for path, data, fields, status, param, code, words in cases:
        got, headers, body = client.post(path, data, fields)
        assert headers["Content-Type"].startswith("application/json"), headers
        openai_error(body, status, got, param, code, words)
    client.sent += 1  # a JSON body; the GET after it is no POST line
    got, _, body = server.request("POST", TRANSCRIBE, b'{"file": "x.wav"}')
    openai_error(body, 400, got, words="multipart/form-data")
    got, headers, body = server.request("GET", TRANSCRIBE)
    openai_error(body, 405, got)
    assert headers["Allow"] == "POST", headers


def check_text_refused(audio, server):
    """The text endpoints never send text to the speech model; /languages lists only what
    the text model translates."""
    status, _, body = server.post("/v1/translate", {"q": "Hallo", "model": audio.model})
    assert status == 400 and "speech model" in body["error"] and TRANSCRIBE in body["error"], (status, body)
    status, _, body = server.post("/translate", {"q": "Hallo", "source": "en", "target": "de"})
    assert status == 200 and body["translatedText"], (status, body)
    status, _, body = server.get("/languages")
    assert status == 200 and body == [], body
    status, _, body = server.get("/v1/model")
    assert [m["speech"] for m in body["models"]] == [True, False], body["models"]
    with S.Server(audio.case.gguf, "-t", "1") as alone:
        for path, req in (("/translate", {"q": "Hallo"}), ("/v1/translate", {"q": "Hallo"}),
                          ("/detect", {"q": "Hallo"}), ("/translate_file", None)):
            status, _, body = alone.post(path, req if req else b"")
            assert status == 400 and "speech model" in body["error"], (path, status, body)
        status, headers, body = alone.get("/")
        assert status == 200 and TRANSCRIBE in body, body
        assert alone.stop() == 0


def check_english_only(audio, work):
    """An English-only model (*.en): English transcribed, with or without language en; any
    other language and translations refused."""
    en = W.Case(work, "mini.en", "mini", True, "safetensors", {})
    with S.Server(en.gguf, "-t", "2") as server:
        client = Client(server)
        ref = T.run_attend(["transcribe", "-m", en.gguf, "-t", "2", "--timestamps", "--output", "json", audio.flac])
        for lang in ((), (("language", "en"),), (("language", "English"),)):
            status, _, body = client.post(TRANSCRIBE, audio.flac, lang)
            assert status == 200 and body == {"text": json.loads(ref.stdout)["text"]}, (lang, body)
        status, _, body = client.post(TRANSCRIBE, audio.flac, [("language", "de")])
        openai_error(body, 400, status, "language", "unsupported_language", "English-only")
        status, _, body = client.post(TRANSLATE, audio.flac)
        openai_error(body, 400, status, "model", "model_not_supported", "English-only")
        assert server.stop() == 0


def check_not_blocking(audio, client, server):
    """With --max-audio-queue 1: a long transcription runs, a second waits, a third gets 503
    with Retry-After at once; meanwhile the HTTP thread answers /health and a translation
    without waiting; both long ones answered as the CLI answers."""
    results = {}

    def long_request(k):
        results[k] = client.post(TRANSCRIBE, audio.long)

    first = threading.Thread(target=long_request, args=(0,))
    first.start()
    until = time.time() + 30
    while server.get("/health")[2]["pending"] < 1 and time.time() < until:
        time.sleep(0.02)
    second = threading.Thread(target=long_request, args=(1,))
    second.start()
    while server.get("/health")[2]["pending"] < 2 and time.time() < until:
        time.sleep(0.02)
    t0 = time.time()
    status, headers, body = client.post(TRANSCRIBE, audio.wav)
    openai_error(body, 503, status, words="--max-audio-queue")
    assert headers["Retry-After"] == "1", headers
    status, _, body = server.post("/translate", {"q": "Hallo Welt"})
    assert status == 200 and body["translatedText"], body
    took = time.time() - t0
    assert took < 2 and 0 not in results, f"the HTTP side waited {took:.1f} s"
    first.join(120), second.join(120)
    want = {"text": audio.cli(audio.long)["text"]}
    assert results[0][0] == 200 and results[0][2] == want, results[0]
    assert results[1][0] == 200 and results[1][2] == want, results[1]


def check_limits(audio):
    """--max-audio-seconds (400 audio_too_long), --max-audio-body (413 from the head, OpenAI's
    shape), a stalled upload closed after --timeout while others are served, --api-keys read
    from Authorization: Bearer (401 without)."""
    tmp = T.tempdir()
    keys = os.path.join(tmp, "keys")
    with open(keys, "w") as f:
        f.write("sesame\n")
    try:
        with S.Server(audio.case.gguf, "-t", "1", "--max-audio-seconds", "10", "--max-audio-body", "1000000",
                      "--timeout", "2", "--api-keys", keys) as server:
            client = Client(server)
            bearer = {"Authorization": "Bearer sesame"}
            status, _, body = client.post(TRANSCRIBE, audio.wav)
            openai_error(body, 401, status, code="invalid_api_key")
            status, _, body = client.post(TRANSCRIBE, audio.wav, headers={"Authorization": "Bearer open"})
            openai_error(body, 401, status, code="invalid_api_key")
            status, _, body = client.post(TRANSCRIBE, audio.wav, headers=bearer)
            assert status == 200 and body == {"text": audio.cli(audio.wav)["text"]}, body
            status, _, body = client.post(TRANSCRIBE, audio.mid, [("api_key", "sesame")])
            openai_error(body, 400, status, "file", "audio_too_long", "--max-audio-seconds")
            check_oversized(server, os.path.getsize(audio.long))
            check_stalled(server)
            assert server.stop() == 0
    finally:
        shutil.rmtree(tmp)


def check_oversized(server, size):
    s = S.raw_socket(server.port)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
              b"Content-Length: %d\r\n\r\n" % (TRANSCRIBE.encode(), size))
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        chunk = s.recv(65536)
        if not chunk:
            break
        answer += chunk
    s.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    openai_error(json.loads(body), 413, 413, "file", None, "--max-audio-body")


def check_stalled(server):
    """An upload that stops halfway is closed after --timeout (2 s); /health is answered
    meanwhile."""
    s = S.raw_socket(server.port, timeout=10)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
              b"Content-Length: 500000\r\n\r\n" % TRANSCRIBE.encode() + b"x" * 1000)
    t0 = time.time()
    S.alive(server)
    assert s.recv(65536) == b"", "a stalled upload was answered"
    took = time.time() - t0
    s.close()
    assert 1 < took < 6, f"closed after {took:.1f} s"


def check_access_log(client, server):
    """One access-log line per speech request."""
    lines = [line for line in server.log().splitlines() if '"POST /v1/audio/' in line]
    assert len(lines) == client.sent, (len(lines), client.sent, lines[-3:])
    assert any('"POST /v1/audio/transcriptions" 200 ' in line for line in lines), lines[:3]


def check_npm_client(audio, server):
    """The npm package openai, as its README shows for speech, against the server."""
    package = os.path.join(NPM, "node_modules", "openai", "package.json")
    assert os.path.exists(package), (
        f"the npm client is not installed in {NPM}: make test installs it with "
        f"`npm install --prefix build/npm openai@{NPM_VERSION}` (no network, or no npm?)")
    with open(package) as f:
        assert json.load(f)["version"] == NPM_VERSION
    node = shutil.which("node")
    assert node, "node is not installed (Node 20 runs tests/openai_client.js)"
    out = subprocess.run([node, os.path.join(T.REPO, "tests", "openai_client.js"),
                          f"http://127.0.0.1:{server.port}/v1", audio.model, audio.wav, audio.flac],
                         capture_output=True, text=True, timeout=90,
                         env=dict(os.environ, NODE_PATH=os.path.join(NPM, "node_modules")))
    assert out.returncode == 0, out
    got = json.loads(out.stdout)
    assert got["text"] == audio.cli(audio.wav)["text"], (got["text"], audio.cli(audio.wav)["text"])
    assert got["srt"] == audio.cli(audio.flac, output="srt"), got["srt"]
    want = audio.cli(audio.wav, "--language", "de", "--word-timestamps", output="verbose_json")
    assert got["verbose"] == want and want["words"], (got["verbose"], want)
    assert got["translation"] == audio.cli(audio.flac, "--task", "translate")["text"], got["translation"]
    assert got["refused"] == {"status": 400, "code": "model_not_supported", "param": "model",
                              "type": "invalid_request_error"}, got["refused"]


def check_sigterm(audio):
    """SIGTERM while a transcription runs: it is finished and answered, then the server exits 0."""
    with S.Server(audio.case.gguf, "-t", "2") as server:
        client = Client(server)
        result = {}
        t = threading.Thread(target=lambda: result.update(r=client.post(TRANSCRIBE, audio.long)))
        t.start()
        until = time.time() + 30
        while server.get("/health")[2]["pending"] < 1 and time.time() < until:
            time.sleep(0.02)
        assert server.stop(signal.SIGTERM) == 0
        t.join(60)
        assert result["r"][0] == 200 and result["r"][2] == {"text": audio.cli(audio.long)["text"]}, result
        assert "finishing the requests in flight" in server.log()


def main():
    r = T.Runner()
    work = T.tempdir()
    try:
        audio = Audio(work)
        with S.Server(audio.case.gguf, "-m", S.TINY, "-t", "2", "--max-audio-queue", "1") as server:
            client = Client(server)
            r.check("every response_format, WAV and FLAC, equals attend transcribe", check_formats, audio, client)
            r.check("language by code or name, /v1/audio/translations, word granularity", check_language_and_task,
                    audio, client)
            r.check("errors: OpenAI's shape and status for each mistake", check_errors, audio, client, server)
            r.check("text endpoints refuse the speech model; a speech-only server", check_text_refused, audio, server)
            r.check("transcription off the HTTP thread; a full queue answers 503", check_not_blocking, audio, client,
                    server)
            r.check("the npm client openai transcribes and translates", check_npm_client, audio, server)
            client.sent += 5  # the npm client's requests
            r.check("one access-log line per speech request", check_access_log, client, server)
            assert server.stop() == 0
        r.check("limits: audio length, upload size, a stalled upload, keys", check_limits, audio)
        r.check("an English-only model: no other language, no translation", check_english_only, audio, work)
        r.check("SIGTERM finishes the transcription in flight", check_sigterm, audio)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
