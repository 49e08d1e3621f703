#!/usr/bin/env python3
"""What splice(2) would save a proxy relaying a large body on plain TCP
(issue 29, item 8), before building it into crawlgate: the CPU a relay
process spends moving SIZE MiB from one loopback socket to another,
read(2)/write(2) through a 128 KiB user-space buffer (crawlgate's reads
grow to that size on a large body) against splice(2) through a pipe of
the same size, alternated.

    taskset -c 0 python3 bench/splice_relay.py [SIZE_MIB] [ROUNDS]

The relay runs in this process (pin it: the source and sink it starts
are pinned to CPU 1 when there are two CPUs). Per round and method it
prints the relay's user and system CPU per GiB and the rate; at the end
the medians and the splice ÷ copy ratio. Loopback only, bounded in size.
"""

import os
import resource
import socket
import statistics
import sys
import time

CHUNK = 128 * 1024


def source(port, size):
    """A child that connects and writes `size` bytes of zeros."""
    pid = os.fork()
    if pid:
        return pid
    if os.cpu_count() and os.cpu_count() > 1:
        os.sched_setaffinity(0, {1})
    s = socket.create_connection(("127.0.0.1", port))
    block = bytes(1024 * 1024)
    left = size
    while left:
        n = s.send(block[: min(len(block), left)])
        left -= n
    s.close()
    os._exit(0)


def sink(port):
    """A child that accepts one connection and reads it to its end."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen(1)
    pid = os.fork()
    if pid:
        listener.close()
        return pid
    if os.cpu_count() and os.cpu_count() > 1:
        os.sched_setaffinity(0, {1})
    conn, _ = listener.accept()
    buf = bytearray(1024 * 1024)
    while conn.recv_into(buf):
        pass
    os._exit(0)


def relay_copy(src, dst):
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while True:
        n = src.recv_into(buf)
        if n == 0:
            return
        dst.sendall(view[:n])


def relay_splice(src, dst):
    r, w = os.pipe()
    try:
        # A pipe as large as the copy's buffer.
        import fcntl

        fcntl.fcntl(w, 1031, CHUNK)  # F_SETPIPE_SZ
        while True:
            n = os.splice(src.fileno(), w, CHUNK)
            if n == 0:
                return
            while n:
                n -= os.splice(r, dst.fileno(), n)
    finally:
        os.close(r)
        os.close(w)


def one(method, size, base_port):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", base_port))
    listener.listen(1)
    sink_pid = sink(base_port + 1)
    time.sleep(0.1)
    dst = socket.create_connection(("127.0.0.1", base_port + 1))
    src_pid = source(base_port, size)
    src, _ = listener.accept()
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    (relay_copy if method == "copy" else relay_splice)(src, dst)
    dst.shutdown(socket.SHUT_WR)
    after, elapsed = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - start
    for pid in (src_pid, sink_pid):
        os.waitpid(pid, 0)
    for s in (src, dst, listener):
        s.close()
    gib = size / 2**30
    user = (after.ru_utime - before.ru_utime) / gib
    system = (after.ru_stime - before.ru_stime) / gib
    return user, system, size / 2**20 / elapsed


def main():
    size_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    size = size_mib * 2**20
    port = 18000 + os.getpid() % 1000 * 4
    results = {"copy": [], "splice": []}
    for r in range(rounds):
        order = ["copy", "splice"] if r % 2 == 0 else ["splice", "copy"]
        for method in order:
            user, system, rate = one(method, size, port)
            port += 2
            results[method].append((user, system, rate))
            print(f"round {r + 1} {method:6}: user {user:.3f} s/GiB, system {system:.3f} s/GiB, {rate:,.0f} MiB/s")
    med = {m: [statistics.median(x[i] for x in v) for i in range(3)] for m, v in results.items()}
    for m, (u, s, rate) in med.items():
        print(f"median {m:6}: user {u:.3f} s/GiB, system {s:.3f} s/GiB, total {u + s:.3f} s/GiB, {rate:,.0f} MiB/s")
    (cu, cs, crate), (su, ss, srate) = med["copy"], med["splice"]
    print(f"splice ÷ copy: CPU per GiB {(su + ss) / (cu + cs):.2f}, MiB/s {srate / crate:.2f}")


if __name__ == "__main__":
    main()
