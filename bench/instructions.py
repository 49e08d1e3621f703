#!/usr/bin/env python3
"""Instructions per request of crawlgate, counted by valgrind (callgrind),
for two configs side by side: repeatable on a shared, noisy machine where
wall-clock load figures move by 10 % between runs.

    python3 bench/instructions.py CONFIG_A CONFIG_B [--requests N]

Each config is run twice under callgrind (one worker thread): once with N
requests of the mixed traffic of bench/mix.lua (the same heads, in the same
proportions) and once with 2N; the difference of the two totals divided by
N is the cost of one request with start-up and shutdown cancelled out. The
origin is a keep-alive Python server on loopback (not measured); the
client sends requests one at a time on one keep-alive connection.

Needs valgrind and a release build (target/release/crawlgate, or
CRAWLGATE_BIN).
"""

import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CRAWLGATE_BIN", os.path.join(ROOT, "target/release/crawlgate"))

COOKIE = ("PHPSESSID=q3k9v1b6m2s8d0f4h7j5l2n9p1; _ga=GA1.1.1849302755.1733050000; "
          "cookie_consent=accepted; lang=en")
CHROME = [
    ("User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"),
    ("Accept-Language", "en-US,en;q=0.9,de;q=0.8"),
    ("Accept-Encoding", "gzip, deflate, br, zstd"),
    ("sec-ch-ua", '"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"'),
    ("sec-ch-ua-mobile", "?0"),
    ("sec-ch-ua-platform", '"Windows"'),
    ("Sec-Fetch-Site", "same-origin"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-Dest", "document"),
]
FIREFOX = [
    ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "en-US,en;q=0.5"),
    ("Accept-Encoding", "gzip, deflate, br, zstd"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
]
CRAWLERS = [
    [("User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"),
     ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
     ("Accept-Encoding", "gzip, deflate, br"), ("From", "googlebot(at)googlebot.com")],
    [("User-Agent", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/131.0.0.0 Safari/537.36"),
     ("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate")],
    [("User-Agent", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"),
     ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
     ("Accept-Encoding", "gzip, br")],
]


def head(path, headers, host="example.com", referer=None):
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}"] + [f"{k}: {v}" for k, v in headers]
    if referer:
        lines += [f"Referer: https://example.com{referer}", f"Cookie: {COOKIE}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def mix():
    """bench/mix.lua's mixed mode: 14 human views, 3 robot views, a robot
    action, a www address, robots.txt."""
    reqs = []
    for i in range(1, 15):
        reqs.append(head(f"/article/{i}?ref=home", CHROME if i % 2 else FIREFOX, referer=f"/article/{i + 1}"))
    for i in range(3):
        reqs.append(head(f"/article/{i + 1}", CRAWLERS[i]))
    reqs.append(head("/article/1?do=vote", CRAWLERS[0]))
    reqs.append(head("/article/2", FIREFOX, host="www.example.com", referer="/"))
    reqs.append(head("/robots.txt", CRAWLERS[1]))
    return reqs


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b"<html><body>" + b"x" * 2000 + b"</body></html>"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_response(sock, buf):
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    headers, rest = buf.split(b"\r\n\r\n", 1)
    m = re.search(rb"content-length: *(\d+)", headers, re.I)
    length = int(m.group(1)) if m else 0
    while len(rest) < length:
        rest += sock.recv(65536)
    return rest[length:]


def one_worker(config):
    """A copy of `config` beside it (relative paths keep their meaning)
    with one worker thread."""
    text = open(config).read()
    text = text.replace("[proxy]\n", "[proxy]\nworkers = 1\n", 1)
    fd, path = tempfile.mkstemp(prefix=".instructions.", suffix=".toml", dir=os.path.dirname(os.path.abspath(config)))
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def run(config, origin_port, n):
    port = free_port()
    out = tempfile.mktemp(prefix="callgrind.", dir="/tmp")
    config = one_worker(config)
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", BIN,
         "--config", config, "--listen", f"127.0.0.1:{port}",
         "--upstream", f"http://127.0.0.1:{origin_port}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")})
    deadline = time.time() + 120
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit(f"crawlgate did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.2)
    reqs = mix()
    buf = b""
    for i in range(n):
        sock.sendall(reqs[i % len(reqs)])
        buf = read_response(sock, buf)
    sock.close()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    os.unlink(config)
    total = None
    with open(out) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                total = int(line.split()[1])
    os.unlink(out)
    return total


def main():
    args = sys.argv[1:]
    n = 2000
    if "--requests" in args:
        i = args.index("--requests")
        n = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    origin_port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", origin_port), Origin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    per = {}
    for config in args:
        small = run(config, origin_port, n)
        large = run(config, origin_port, 2 * n)
        per[config] = (large - small) / n
        print(f"{config}: {small:,} instructions for {n} requests, {large:,} for {2 * n}: "
              f"{per[config]:,.0f} per request")
    a, b = args
    print(f"ratio {b} / {a}: {per[b] / per[a]:.4f}")


if __name__ == "__main__":
    main()
