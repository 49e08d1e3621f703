#!/usr/bin/env python3
"""Opens N keep-alive connections to HOST:PORT, sends one GET on each,
reads the response, then holds them all open until stdin closes. With a
fourth argument `tls`, the connections are TLS (certificate not verified:
the benchmark's own test certificate).

Prints `READY n` once every connection has its response, so the caller can
measure the proxy's memory with N idle keep-alive connections.
"""

import asyncio
import ssl
import sys


def client_tls():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def one(host: str, port: int, tls):
    if tls is None:
        reader, writer = await asyncio.open_connection(host, port)
    else:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=tls, server_hostname="example.com"
        )
    writer.write(
        b"GET /article/1 HTTP/1.1\r\nHost: example.com\r\n"
        b"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0\r\n\r\n"
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    return writer


async def main():
    host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    tls = client_tls() if sys.argv[4:] == ["tls"] else None
    writers = []
    # In batches, so the listen backlog is never the limit.
    for start in range(0, n, 500):
        batch = [one(host, port, tls) for _ in range(start, min(n, start + 500))]
        writers += await asyncio.gather(*batch)
    print(f"READY {len(writers)}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for w in writers:
        w.close()


asyncio.run(main())
