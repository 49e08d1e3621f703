#!/usr/bin/env python3
"""`crawlgate sitemap build` on millions of generated entries: entries per
second and peak memory (bench/README.md, "Sitemaps").

The input is written once to a file (so that generating it is not timed):
ascending ids with one in ten deleted, a MySQL DATETIME lastmod (one in
twenty empty), and a product address of realistic length; with
--languages 2 each entry has a second, English address (hreflang
alternates). Each scenario runs RUNS times; the median wall time and the
largest peak RSS (getrusage of the child) are reported.

    cargo build --release
    python3 bench/sitemap.py [--entries 10000000] [--runs 3]
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "crawlgate")
WORDS = ["red", "leather", "boots", "classic", "garden", "chair", "oak",
         "table", "linen", "shirt", "summer", "dress", "steel", "kettle"]


def generate(path, entries, languages):
    """Writes `entries` lines to `path` (ids up to entries * 10 / 9)."""
    with open(path, "w", buffering=1 << 20) as out:
        written, item = 0, 0
        while written < entries:
            item += 1
            if item % 10 == 0:
                continue  # a deleted item
            words = "-".join(WORDS[(item * k) % len(WORDS)] for k in (1, 3, 7))
            lastmod = "" if item % 20 == 0 else \
                f"2024-{item % 12 + 1:02d}-{item % 28 + 1:02d} {item % 24:02d}:{item % 60:02d}:00"
            line = f"{item}\t{lastmod}\t/produkt/{words}-{item}"
            if languages == 2:
                line += f"\t/en/product/{words}-{item}"
            out.write(line + "\n")
            written += 1


def run(args):
    """Runs one command; returns (seconds, peak RSS in KiB of that child)."""
    # ru_maxrss of RUSAGE_CHILDREN is the largest of all children so far,
    # so each run is measured in a child process of its own.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        start = time.monotonic()
        proc = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        elapsed = time.monotonic() - start
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        os.write(w, f"{proc.returncode} {elapsed} {rss}\n{proc.stderr.decode()}".encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.waitpid(pid, 0)
    head, _, stderr = data.decode().partition("\n")
    code, elapsed, rss = head.split()
    if code != "0":
        sys.exit(f"{' '.join(args)} failed: {stderr}")
    return float(elapsed), int(rss)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} is missing: cargo build --release")
    work = tempfile.mkdtemp(prefix="crawlgate-sitemap-bench-")
    try:
        print(f"entries: {opts.entries:,}; runs: {opts.runs}; median wall time, largest peak RSS")
        print("| scenario | files | seconds | entries/s | peak RSS |")
        print("| --- | --- | --- | --- | --- |")
        for languages in (1, 2):
            data = os.path.join(work, f"entries-{languages}.tsv")
            generate(data, opts.entries, languages)
            out = os.path.join(work, "out")
            for dry in (False, True):
                times, peak = [], 0
                for _ in range(opts.runs):
                    shutil.rmtree(out, ignore_errors=True)
                    os.mkdir(out)
                    args = [BIN, "sitemap", "build", "--dir", out, "--input", data,
                            "--base-url", "https://shop.example.com/", "--quiet"]
                    if languages == 2:
                        args += ["--languages", "cs,en"]
                    if dry:
                        args.append("--dry-run")
                    elapsed, rss = run(args)
                    times.append(elapsed)
                    peak = max(peak, rss)
                files = len(os.listdir(out))
                median = statistics.median(times)
                name = f"{'cs,en' if languages == 2 else 'one language'}{', --dry-run' if dry else ''}"
                print(f"| {name} | {files} | {median:.2f} | {opts.entries / median:,.0f} "
                      f"| {peak / 1024:.1f} MiB |", flush=True)
            os.remove(data)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
