"""attend serve for the tests: a real server process on 127.0.0.1 on a port it picks itself
(--port 0, read back from its first line on stderr), and a small http.client helper.
$ATTEND_BIN runs another build (the sanitizer stages use it)."""
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import testlib as T

ATTEND = os.environ.get("ATTEND_BIN", T.ATTEND)
TINY = os.path.join(T.REPO, "tests", "data", "tiny-v1.gguf")
SHIPPED = os.path.join(T.REPO, "models", "de-en.gguf")


class Server:
    """attend serve -m model *args; stop() sends a signal and returns the exit status."""

    def __init__(self, model, *args, start_timeout=60):
        self.log_file = tempfile.NamedTemporaryFile(prefix="attend-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([ATTEND, "serve", "-m", model, "--port", "0", *args],
                                     stdout=subprocess.DEVNULL, stderr=self.log_file)
        self.port = None
        until = time.time() + start_timeout
        while time.time() < until and self.port is None:
            assert self.proc.poll() is None, f"attend serve exited {self.proc.returncode}: {self.log()}"
            for line in self.log().splitlines():
                if " on http://127.0.0.1:" in line:
                    self.port = int(line.split("127.0.0.1:")[1].split("/")[0])
            time.sleep(0.05)
        assert self.port, f"attend serve did not start: {self.log()}"

    def log(self):
        with open(self.log_file.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def connect(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, conn=None, headers=None):
        """(status, headers, parsed JSON or text). body: an object (sent as JSON) or bytes."""
        own = conn is None
        c = conn or self.connect()
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        c.request(method, path, body=data, headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        r = c.getresponse()
        raw = r.read()
        if own:
            c.close()
        text = raw.decode("utf-8")
        kind = r.getheader("Content-Type") or ""
        return r.status, dict(r.getheaders()), json.loads(text) if kind.startswith("application/json") else text

    def post(self, path, body, conn=None):
        return self.request("POST", path, body, conn)

    def get(self, path, conn=None):
        return self.request("GET", path, None, conn)

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith("VmRSS")).split()[1])

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def close(self):
        self.stop()
        os.unlink(self.log_file.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.unlink(self.log_file.name)


def raw_socket(port, timeout=30):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


def translate_cli(model, lines, *opts):
    """attend translate's output lines for lines (the reference the server must equal)."""
    out = subprocess.run([T.ATTEND, "translate", "-m", model, *opts], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return out.split("\n")[:-1]


def alive(server):
    status, _, body = server.get("/health")
    assert status == 200 and body["status"] == "ok", (status, body)


def sig_name(sig):
    return signal.Signals(sig).name
