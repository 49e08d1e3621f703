#!/usr/bin/env python3
"""A faulty origin for bench/faults.sh, on 127.0.0.1:PORT only.

    fault_origin.py PORT [STALL_SECONDS] [SEED]

Every request head is answered by one draw from a seeded generator:

    70 %  a normal answer: a 2 KiB page (7 in 8) or a 64 KiB page (1 in 8),
          keep-alive
    10 %  cut: Content-Length 2048 or 65536, half the body, then close
    10 %  reset: nothing sent, then close with SO_LINGER 0 (an RST)
     8 %  broken status line ("HTTP/1.1 2x0 OK", "HTTP/1.1", "ICY 200 OK",
          a bare "200"), then close
     1 %  stall before the head: STALL_SECONDS (default 1.5) of silence, then
          close without a word
     1 %  stall in the body: a head and half the body, STALL_SECONDS of
          silence, then close

The stalls are longer than the proxies' timeouts in bench/faults.sh (1 s),
and bounded: every connection ends. Stalls are rare because each holds one
of the load's 32 connections for the whole stall.

GET /__faults (sent straight to the origin, not through a proxy) answers
the counts of each kind so far, as JSON.
"""

import asyncio
import json
import random
import socket
import struct
import sys

PAGE = b"x" * 2048
BIG = b"y" * 65536
BROKEN = [
    b"HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1\r\n\r\n",
    b"ICY 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"200\r\n\r\n",
]
KINDS = ["ok", "ok-64k", "cut", "reset", "broken", "stall-head", "stall-body"]
counts = dict.fromkeys(KINDS, 0)


def draw(rng):
    """The kind of the next answer."""
    p = rng.random()
    if p < 0.70:
        return "ok-64k" if rng.random() < 0.125 else "ok"
    for kind, upto in (("cut", 0.80), ("reset", 0.90), ("broken", 0.98), ("stall-head", 0.99)):
        if p < upto:
            return kind
    return "stall-body"


def head(length):
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
        + str(length).encode()
        + b"\r\n\r\n"
    )


def reset(writer):
    """Close with an RST rather than a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


async def serve(reader, writer, rng, stall):
    try:
        while True:
            try:
                request = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            length = 0
            for line in request.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    try:
                        length = int(value.strip())
                    except ValueError:
                        return
            if length:
                await reader.readexactly(length)
            if request.startswith(b"GET /__faults "):
                body = json.dumps(counts).encode()
                writer.write(head(len(body)) + body)
                await writer.drain()
                continue
            kind = draw(rng)
            counts[kind] += 1
            body = BIG if kind == "ok-64k" or (kind in ("cut", "stall-body") and rng.random() < 0.5) else PAGE
            if kind in ("ok", "ok-64k"):
                writer.write(head(len(body)) + body)
                await writer.drain()
                continue
            if kind == "reset":
                reset(writer)
                return
            if kind == "broken":
                writer.write(rng.choice(BROKEN))
                await writer.drain()
                return
            if kind in ("cut", "stall-body"):
                writer.write(head(len(body)) + body[: len(body) // 2])
                await writer.drain()
            if kind.startswith("stall"):
                await asyncio.sleep(stall)
            return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        if not writer.transport.is_closing():
            writer.close()


async def main():
    port = int(sys.argv[1])
    stall = float(sys.argv[2]) if len(sys.argv) > 2 else 1.5
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    server = await asyncio.start_server(
        lambda r, w: serve(r, w, rng, stall), "127.0.0.1", port, backlog=4096, reuse_address=True
    )
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
