#!/usr/bin/env python3
"""The origin of bench/load.sh's streaming runs, on 127.0.0.1:PORT.

GET /big?bytes=N streams N bytes; POST or PUT /upload reads the whole body
(Content-Length) before it answers `ok <bytes>`. Reading the whole body first
matters: an origin that answers early (nginx's `return 200` does) lets a
proxy stop forwarding the upload and discard the rest itself, which
measures nothing.
"""

import socketserver
import sys
from http.server import BaseHTTPRequestHandler

CHUNK = bytes(1024 * 1024)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        n = int(self.path.partition("bytes=")[2] or 0)
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        while n > 0:
            part = CHUNK if n >= len(CHUNK) else CHUNK[:n]
            self.wfile.write(part)
            n -= len(part)

    def do_POST(self):
        left = int(self.headers.get("Content-Length", 0))
        got = 0
        buf = bytearray(1024 * 1024)
        view = memoryview(buf)
        while left > 0:
            n = self.rfile.readinto(view[: min(left, len(buf))])
            if not n:
                break
            got += n
            left -= n
        body = f"ok {got}\n".encode()
        self.send_response(200 if left == 0 else 400)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_PUT = do_POST


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    with Server(("127.0.0.1", int(sys.argv[1])), Handler) as server:
        server.serve_forever()
