#!/usr/bin/env python3
"""Turns bench/load.sh's raw rows into the table of medians and ratios.

results.tsv: scenario proxy requests duration_us p50_us p99_us cpu_us socket_errors
             proxy_core_busy_pct load_core_busy_pct
memory.tsv:  idle proxy rss_before_kib rss_after_kib idle_conns, or
             stream proxy down_bytes down_ns up_status up_bytes up_ns peak_rss_kib
In smoke mode it also fails (exit 1) when a run had socket errors or a
stream did not move every byte.
"""

import os
import statistics
import sys
from collections import defaultdict


# Every scenario, in the order the tables show them.
SCENARIOS = ["pass", "mixed", "mixed-logged", "robots", "https-mixed", "https-resume", "tls-handshake", "h2-pass"]

NO_LATENCY = {"h2-pass", "tls-handshake"}


def main() -> int:
    results, memory, stream_mib, smoke = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    ok = True
    runs = defaultdict(list)
    for line in open(results):
        name, proxy, req, dur, p50, p99, cpu, errors, busy_proxy, busy_load = line.rstrip("\n").split("\t")
        req, dur, p50, p99, cpu, errors = map(int, (req, dur, p50, p99, cpu, errors))
        runs[(name, proxy)].append(
            {
                "rps": req / (dur / 1e6),
                # h2load and s_time give no percentiles (written 0).
                "p50": p50 / 1000 if name not in NO_LATENCY else None,
                "p99": p99 / 1000 if name not in NO_LATENCY else None,
                "cpu": cpu / req if req and proxy != "origin" else None,
                "errors": errors,
                # How busy each core was: a run is bound by the proxy only
                # when the proxy's core is near 100 %.
                "busy_proxy": int(busy_proxy),
                "busy_load": int(busy_load),
            }
        )
        if smoke and errors:
            print(f"smoke {name}/{proxy}: {errors} socket errors")
            ok = False

    def med(name, proxy, key):
        vals = [r[key] for r in runs.get((name, proxy), []) if r[key] is not None]
        return statistics.median(vals) if vals else None

    def ratio(a, b):
        return f"{a / b:.2f}" if a is not None and b else "-"

    def fmt(v, spec):
        return format(v, spec) if v is not None else "-"

    n_rounds = max((len(v) for v in runs.values()), default=0)
    print(f"\n## Throughput (medians of {n_rounds} runs each)\n")
    print("| scenario | proxy | req/s | p50 ms | p99 ms | proxy CPU µs/req | busy: proxy core, load core |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name in SCENARIOS:
        for proxy in [
            "origin",
            "crawlgate-baseline",
            "crawlgate",
            "crawlgate-native",
            "crawlgate-hyper",
            "crawlgate-protect",
            "crawlgate-verify",
            "crawlgate-report",
            "crawlgate-noreport",
            "nginx-lean",
            "nginx",
        ]:
            if (name, proxy) not in runs:
                continue
            print(
                f"| {name} | {proxy} | {fmt(med(name, proxy, 'rps'), ',.0f')} | "
                f"{fmt(med(name, proxy, 'p50'), '.2f')} | {fmt(med(name, proxy, 'p99'), '.2f')} | "
                f"{fmt(med(name, proxy, 'cpu'), '.1f')} | "
                f"{med(name, proxy, 'busy_proxy'):.0f} %, {med(name, proxy, 'busy_load'):.0f} % |"
            )
    peers = {
        "nginx-lean": "nginx-lean (25-token map, the headline)",
        "nginx": "nginx (crawlgate's 748 tokens)",
    }
    for peer, label in peers.items():
        if not any(p == peer for _, p in runs):
            continue
        print(f"\nAgainst {label}:\n")
        print(f"| scenario | CPU/req crawlgate ÷ {peer} | req/s crawlgate ÷ {peer} | p99 crawlgate ÷ {peer} |")
        print("| --- | ---: | ---: | ---: |")
        for name in [n for n in SCENARIOS if (n, "crawlgate") in runs and (n, peer) in runs]:
            print(
                f"| {name} | {ratio(med(name, 'crawlgate', 'cpu'), med(name, peer, 'cpu'))} | "
                f"{ratio(med(name, 'crawlgate', 'rps'), med(name, peer, 'rps'))} | "
                f"{ratio(med(name, 'crawlgate', 'p99'), med(name, peer, 'p99'))} |"
            )

    base_config = os.environ.get("BASELINE_CONFIG")
    if base_config and any(p == "crawlgate-baseline" for _, p in runs):
        # Two builds of the same configuration side by side.
        mine = "crawlgate-native" if "native" in base_config else "crawlgate"
        print(f"\n{mine} (CRAWLGATE_BIN) against crawlgate-baseline (BASELINE_BIN, {base_config}), side by side:\n")
        print("| scenario | CPU/req ratio | req/s ratio | p99 ratio |")
        print("| --- | ---: | ---: | ---: |")
        for name in [n for n in SCENARIOS if (n, mine) in runs or (n, "crawlgate") in runs]:
            # Over TLS crawlgate-native serves as crawlgate does: the
            # TLS rows compare crawlgate.
            who = mine if (name, mine) in runs else "crawlgate"
            print(
                f"| {name} | {ratio(med(name, who, 'cpu'), med(name, 'crawlgate-baseline', 'cpu'))} | "
                f"{ratio(med(name, who, 'rps'), med(name, 'crawlgate-baseline', 'rps'))} | "
                f"{ratio(med(name, who, 'p99'), med(name, 'crawlgate-baseline', 'p99'))} |"
            )
    elif any(p == "crawlgate-baseline" for _, p in runs):
        print("\nThe cost of observation, against crawlgate-baseline (BASELINE_BIN) side by side:\n")
        print("| crawlgate | against crawlgate-baseline | CPU/req ratio | req/s ratio | p99 ratio |")
        print("| --- | --- | ---: | ---: | ---: |")
        for (mine, base, label) in [
            ("mixed", "mixed", "metrics on, log off | log off"),
            ("mixed-logged", "mixed", "metrics, admin scraped 1/s, combined log to a file | log off"),
            ("mixed-logged", "mixed-logged", "metrics, admin, combined log to a file | its own log to a file"),
        ]:
            print(
                f"| {label} | {ratio(med(mine, 'crawlgate', 'cpu'), med(base, 'crawlgate-baseline', 'cpu'))} | "
                f"{ratio(med(mine, 'crawlgate', 'rps'), med(base, 'crawlgate-baseline', 'rps'))} | "
                f"{ratio(med(mine, 'crawlgate', 'p99'), med(base, 'crawlgate-baseline', 'p99'))} |"
            )

    def on_off(proxy, title):
        """A configuration against crawlgate with it off, side by side."""
        if not any(p == proxy for _, p in runs):
            return
        print(f"\n{title} on ({proxy}) against off (crawlgate), side by side:\n")
        print("| scenario | CPU/req on ÷ off | req/s on ÷ off | p99 on ÷ off |")
        print("| --- | ---: | ---: | ---: |")
        for name in SCENARIOS:
            if (name, proxy) not in runs:
                continue
            print(
                f"| {name} | {ratio(med(name, proxy, 'cpu'), med(name, 'crawlgate', 'cpu'))} | "
                f"{ratio(med(name, proxy, 'rps'), med(name, 'crawlgate', 'rps'))} | "
                f"{ratio(med(name, proxy, 'p99'), med(name, 'crawlgate', 'p99'))} |"
            )

    on_off("crawlgate-hyper", "hyper's HTTP/1.1 layer (proxy.http1 = hyper)")
    on_off("crawlgate-native", "crawlgate's own HTTP/1.1 layer (proxy.http1 = native)")
    if any(p == "crawlgate-native" for _, p in runs) and any(p == "nginx-lean" for _, p in runs):
        print("\ncrawlgate-native against nginx-lean:\n")
        print("| scenario | CPU/req native ÷ nginx-lean | req/s native ÷ nginx-lean | p99 native ÷ nginx-lean |")
        print("| --- | ---: | ---: | ---: |")
        for name in [n for n in SCENARIOS if (n, "crawlgate-native") in runs and (n, "nginx-lean") in runs]:
            print(
                f"| {name} | {ratio(med(name, 'crawlgate-native', 'cpu'), med(name, 'nginx-lean', 'cpu'))} | "
                f"{ratio(med(name, 'crawlgate-native', 'rps'), med(name, 'nginx-lean', 'rps'))} | "
                f"{ratio(med(name, 'crawlgate-native', 'p99'), med(name, 'nginx-lean', 'p99'))} |"
            )
    on_off("crawlgate-protect", "Shedding and the robots cache")
    on_off("crawlgate-verify", "Crawler verification")

    def spread(vals):
        """Half of max − min over the rounds, as a share of their median."""
        return f"±{50 * (max(vals) - min(vals)) / statistics.median(vals):.1f} %" if vals else "-"

    if any(p == "crawlgate-report" for _, p in runs):
        on_name, off_name = "crawlgate-report", "crawlgate-noreport"
        print(f"\nThe live report on ({on_name}) against off ({off_name}), side by side;")
        print("spread: half of max − min over the rounds, as a share of their median;")
        print("each round: CPU µs/req in run order, and on ÷ off round by round\n")
        print("| scenario | report | req/s | spread | p99 ms | spread | CPU µs/req | spread | CPU each round |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for name in ["mixed", "pass", "mixed-logged"]:
            on, off = runs.get((name, on_name), []), runs.get((name, off_name), [])
            if not on or not off:
                continue
            for label, proxy, rows in [("on", on_name, on), ("off", off_name, off)]:
                cpu = [r["cpu"] for r in rows if r["cpu"] is not None]
                print(
                    f"| {name} | {label} | {fmt(med(name, proxy, 'rps'), ',.0f')} | "
                    f"{spread([r['rps'] for r in rows])} | "
                    f"{fmt(med(name, proxy, 'p99'), '.2f')} | {spread([r['p99'] for r in rows])} | "
                    f"{fmt(med(name, proxy, 'cpu'), '.2f')} | {spread(cpu)} | "
                    f"{' '.join(f'{c:.2f}' for c in cpu)} |"
                )
            each = [a["cpu"] / b["cpu"] for a, b in zip(on, off) if a["cpu"] and b["cpu"]]
            cells = [ratio(med(name, on_name, key), med(name, off_name, key)) for key in ("rps", "p99", "cpu")]
            print(
                f"| {name} | on ÷ off | {cells[0]} | | {cells[1]} | | {cells[2]} | | "
                f"{' '.join(f'{r:.3f}' for r in each)} |"
            )

    print("\n## Memory and streaming\n")
    want = stream_mib * 1024 * 1024
    idle, streams = {}, defaultdict(list)
    for line in open(memory):
        f = line.rstrip("\n").split("\t")
        if f[0] == "idle":
            before, after, n = map(int, f[2:])
            idle[f[1]] = ((after - before) / n if n else 0, n)
        else:
            down, down_ns, up_status, up_bytes, up_ns, peak = map(int, f[2:])
            streams[f[1]].append(
                (down / 1048576 / (down_ns / 1e9), up_bytes / 1048576 / (up_ns / 1e9), peak / 1024)
            )
            if down != want or up_status != 200 or up_bytes != want:
                print(f"stream {f[1]}: down {down} B, up {up_status} {up_bytes} B, want {want} B each way")
                ok = False
    print(f"| proxy | KiB per idle keep-alive connection | streamed down MiB/s | streamed up MiB/s | peak RSS MiB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for proxy in ["crawlgate-baseline", "crawlgate", "crawlgate-native", "crawlgate-hyper", "nginx-lean"]:
        if proxy not in idle and proxy not in streams:
            continue
        per_conn, n = idle.get(proxy, (0, 0))
        rows = streams.get(proxy, [])
        down = statistics.median(r[0] for r in rows) if rows else 0
        up = statistics.median(r[1] for r in rows) if rows else 0
        peak = max((r[2] for r in rows), default=0)
        print(f"| {proxy} | {per_conn:.1f} ({n} connections) | {down:,.0f} | {up:,.0f} | {peak:.1f} |")
    if "crawlgate-tls" in idle:
        figures = ", ".join(
            f"{proxy} {idle[proxy + '-tls'][0]:.1f} KiB ({idle[proxy + '-tls'][1]} connections)"
            for proxy in ["crawlgate-baseline", "crawlgate", "crawlgate-native", "crawlgate-hyper", "nginx-lean"]
            if proxy + "-tls" in idle
        )
        print(f"\nPer idle keep-alive connection over TLS (one request each): {figures}")
    if "crawlgate" in streams and "nginx-lean" in streams:
        cg, ng = streams["crawlgate"], streams["nginx-lean"]
        print(
            f"\nStreaming, medians of {len(cg)} runs each: down crawlgate ÷ nginx-lean "
            f"{statistics.median(r[0] for r in cg) / statistics.median(r[0] for r in ng):.2f}, "
            f"up {statistics.median(r[1] for r in cg) / statistics.median(r[1] for r in ng):.2f} "
            f"(target ≥ 0.90); every run: {', '.join(f'{r[0]:,.0f}/{r[1]:,.0f}' for r in cg)} (crawlgate) "
            f"vs {', '.join(f'{r[0]:,.0f}/{r[1]:,.0f}' for r in ng)} (nginx-lean) MiB/s down/up"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
