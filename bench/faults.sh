#!/usr/bin/env bash
# Memory under upstream faults: crawlgate and nginx-lean, each in turn in
# front of a faulty origin (bench/fault_origin.py: cut bodies, resets,
# broken status lines, stalls longer than the proxies' timeouts on 30 % of
# its answers), each under CONNS connections of wrk load with real request
# heads (bench/mix.lua, mixed) and a SIGHUP every HUP_EVERY seconds, for
# DURATION seconds. RSS is sampled every SAMPLE_EVERY seconds. On 127.0.0.1
# only; every process is stopped on exit. See bench/README.md §8.
#
#   bench/faults.sh            180 s per proxy after a 10 s warm-up
#   bench/faults.sh --smoke    a few seconds per proxy; checks that both
#                              stay up, serve, and met every kind of fault
#
# Environment: DURATION (s, 180), WARMUP (s, 10), CONNS (32), HUP_EVERY (5),
# SAMPLE_EVERY (5), ROUNDS (1; more alternate the proxies again),
# PROXIES (default "crawlgate nginx-lean"; also crawlgate-arena1 and
# crawlgate-arena2, the same binary under MALLOC_ARENA_MAX=1 or 2,
# crawlgate-mmap128k, under glibc's mmap threshold fixed at 128 KiB,
# crawlgate+VAR=VALUE, under any one variable,
# crawlgate-admin, with the admin listener (and so the live report) on and
# /metrics scraped every second, crawlgate-native and crawlgate-hyper, on
# crawlgate's own HTTP/1.1 layer (the default) or hyper's, named in the
# config (proxy.http1), crawlgate-mimalloc (MIMALLOC_BIN, a build
# with --features mimalloc) and crawlgate-baseline (BASELINE_BIN)),
# CRAWLGATE_BIN (default: build target/release/crawlgate), WRAP (a command
# crawlgate runs under, e.g. "valgrind --tool=massif --massif-out-file=F";
# its timeouts are then for a slower process), OUT (a folder to keep the
# logs, wrk's outputs and the results in), MALLOC_STATS (1: at the
# start and the end, glibc's malloc_stats() called in crawlgate through gdb:
# the bytes in use, against the bytes malloc holds from the system; not for
# crawlgate-mimalloc), PROXY_CPU / LOAD_CPU (0 / 1).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

SMOKE=0
[[ ${1:-} == --smoke ]] && SMOKE=1
if ((SMOKE)); then
    DURATION=${DURATION:-6} WARMUP=${WARMUP:-2} HUP_EVERY=${HUP_EVERY:-2} SAMPLE_EVERY=${SAMPLE_EVERY:-2}
fi
DURATION=${DURATION:-180}
WARMUP=${WARMUP:-10}
CONNS=${CONNS:-32}
HUP_EVERY=${HUP_EVERY:-5}
SAMPLE_EVERY=${SAMPLE_EVERY:-5}
ROUNDS=${ROUNDS:-1}
read -r -a PROXIES <<< "${PROXIES:-crawlgate nginx-lean}"
read -r -a WRAP <<< "${WRAP:-}"
# The stall is longer than both proxies' timeouts (1 s, set below).
STALL=1.5
BENCH=bench/faults.sh
# shellcheck source=bench/common.sh
source bench/common.sh
need_tools nginx wrk python3 curl taskset
NGINX=$(command -v nginx)
crawlgate_bin
scratch crawlgate-faults
port_base 4
ORIGIN_PORT=$BASE PEER_PORT=$((BASE + 1)) CG_PORT=$((BASE + 2)) ADMIN_PORT=$((BASE + 3))

taskset -c "$LOAD_CPU" python3 bench/fault_origin.py "$ORIGIN_PORT" "$STALL" 1 &
PIDS+=($!)
wait_port "$ORIGIN_PORT"

# crawlgate's bench config with 1 s timeouts: for the head, and for a
# pause in the body.
sed -e '/^\[proxy\]/a response_timeout = "1s"' \
    -e '/^\[limits\]/a upstream_body_idle_timeout = "1s"' \
    bench/crawlgate.toml > "$RUN/crawlgate.toml"
# The same with the HTTP/1.1 layer named: crawlgate's own (the default,
# for builds from before it was) and hyper's.
sed -e '/^\[proxy\]/a http1 = "native"' "$RUN/crawlgate.toml" > "$RUN/crawlgate-native.toml"
sed -e '/^\[proxy\]/a http1 = "hyper"' "$RUN/crawlgate.toml" > "$RUN/crawlgate-hyper.toml"
# nginx-lean with the same timeouts (its defaults are 60 s).
sed -e "s|@LISTEN@|127.0.0.1:$PEER_PORT|; s|@ORIGIN@|127.0.0.1:$ORIGIN_PORT|; s|@RUN@|$RUN|; s|@ACCESS_LOG@|off|" \
    -e 's|^\( *\)proxy_pass http://origin;|&\n\1proxy_connect_timeout 1s;\n\1proxy_read_timeout 1s;|' \
    bench/peers/nginx-lean.conf > "$RUN/peer.conf"

# start_proxy NAME: starts it on its port; sets PID, PORT.
start_proxy() {
    local bin=$CRAWLGATE_BIN env=() admin=() wrap=("${WRAP[@]}") config=$RUN/crawlgate.toml
    case $1 in
        nginx-lean)
            taskset -c "$PROXY_CPU" "$NGINX" -c "$RUN/peer.conf" -p "$RUN" 2> "$RUN/$1.log" &
            PID=$! PORT=$PEER_PORT
            PIDS+=("$PID")
            wait_port "$PORT"
            return
            ;;
        crawlgate) ;;
        crawlgate-arena1) env=(MALLOC_ARENA_MAX=1) ;;
        crawlgate-arena2) env=(MALLOC_ARENA_MAX=2) ;;
        # A fixed mmap threshold: glibc no longer raises it (and the trim
        # threshold with it) after a large block is freed.
        crawlgate-mmap128k) env=(GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072) ;;
        crawlgate+*=*) env=("${1#crawlgate+}") ;;
        crawlgate-admin) admin=(--admin-listen "127.0.0.1:$ADMIN_PORT") ;;
        crawlgate-native) config=$RUN/crawlgate-native.toml ;;
        crawlgate-hyper) config=$RUN/crawlgate-hyper.toml ;;
        crawlgate-mimalloc) bin=${MIMALLOC_BIN:?crawlgate-mimalloc needs MIMALLOC_BIN} ;;
        crawlgate-baseline) bin=${BASELINE_BIN:?crawlgate-baseline needs BASELINE_BIN} ;;
        *) echo "$BENCH: unknown proxy $1" >&2; exit 2 ;;
    esac
    env "${env[@]}" RUST_LOG=warn taskset -c "$PROXY_CPU" "${wrap[@]}" "$bin" --config "$config" \
        --listen "127.0.0.1:$CG_PORT" --upstream "http://127.0.0.1:$ORIGIN_PORT" "${admin[@]}" \
        2> "$RUN/$1.log" &
    PID=$! PORT=$CG_PORT
    PIDS+=("$PID")
    # Under valgrind start-up takes longer than wait_port's 10 s.
    ((${#wrap[@]})) && sleep 20
    wait_port "$PORT"
    if ((${#admin[@]})); then
        wait_port "$ADMIN_PORT"
        (while sleep 1; do curl -s -o /dev/null "http://127.0.0.1:$ADMIN_PORT/metrics" || true; done) &
        PIDS+=($!)
        SCRAPER=$!
    fi
}

# All processes of a proxy now: the process and its children (nginx's
# workers, old ones still draining after a reload included).
family() { echo "$1" $(pgrep -P "$1" || true); }

rss_kib() { # VmRSS summed over the processes given (0 for one gone)
    local total=0 pid v
    for pid in "$@"; do
        v=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

anon_kib() { # RssAnon summed over the processes given
    local total=0 pid v
    for pid in "$@"; do
        v=$(awk '$1 == "RssAnon:" { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

pss_kib() { # Pss summed over the processes given: shared pages counted once
    local total=0 pid v
    for pid in "$@"; do
        v=$(awk '$1 == "Pss:" { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null || true)
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

fds() { # open descriptors summed over the processes given
    local total=0 pid n
    for pid in "$@"; do
        n=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l || true)
        total=$((total + n))
    done
    echo "$total"
}

# malloc_stats NAME PID: glibc's malloc_stats() of the process, printed on
# its standard error (the log), when MALLOC_STATS=1 and it runs on glibc.
malloc_stats() {
    [[ ${MALLOC_STATS:-0} == 1 && $1 == crawlgate* && $1 != crawlgate-mimalloc ]] || return 0
    timeout 60 gdb -p "$2" -batch -ex 'call (void)malloc_stats()' > /dev/null 2>&1 || true
}

# held NAME: "in use / held" MiB of the first and last malloc_stats() in
# the log ("- / -" without).
held() {
    awk 'BEGIN { n = 0 }
         /^Total \(incl. mmap\):/ { t = 1; next }
         t && /^system bytes/ { sys[n] = $4 }
         t && /^in use bytes/ { use[n++] = $5; t = 0 }
         END { if (n) printf "%.1f / %.1f → %.1f / %.1f", use[0] / 1048576, sys[0] / 1048576,
                             use[n - 1] / 1048576, sys[n - 1] / 1048576; else printf "-" }' "$RUN/$1.log"
}

counts() { curl -s --max-time 5 "http://127.0.0.1:$ORIGIN_PORT/__faults"; }

RESULTS=$RUN/results.tsv
: > "$RESULTS"

# run NAME: one fault run of one proxy, one TSV row.
run() {
    local name=$1 scraper
    SCRAPER=
    start_proxy "$name"
    scraper=$SCRAPER
    local before_counts
    before_counts=$(counts)
    taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"$((WARMUP + DURATION + 5))s" --timeout 5s \
        -s bench/mix-count.lua "http://127.0.0.1:$PORT" -- mixed > "$RUN/wrk-$name.out" 2>&1 &
    local wrk=$!
    PIDS+=("$wrk")
    (while sleep "$HUP_EVERY"; do kill -HUP "$PID" 2>/dev/null || exit 0; done) &
    local hup=$!
    PIDS+=("$hup")
    sleep "$WARMUP"
    # shellcheck disable=SC2046
    local start fd_start at60=- peak series=() t=0 rss anon_start
    start=$(rss_kib $(family "$PID"))
    # shellcheck disable=SC2046
    anon_start=$(anon_kib $(family "$PID"))
    # shellcheck disable=SC2046
    fd_start=$(fds $(family "$PID"))
    peak=$start
    series+=("$start")
    malloc_stats "$name" "$PID"
    while ((t < DURATION)); do
        sleep "$SAMPLE_EVERY"
        t=$((t + SAMPLE_EVERY))
        # shellcheck disable=SC2046
        rss=$(rss_kib $(family "$PID"))
        series+=("$rss")
        ((rss > peak)) && peak=$rss
        ((t == 60)) && at60=$rss
    done
    local end=$rss fd_end anon_end pss_end
    # shellcheck disable=SC2046
    anon_end=$(anon_kib $(family "$PID"))
    # shellcheck disable=SC2046
    pss_end=$(pss_kib $(family "$PID"))
    # shellcheck disable=SC2046
    fd_end=$(fds $(family "$PID"))
    malloc_stats "$name" "$PID"
    wait "$wrk" || true
    kill "$hup" 2>/dev/null || true
    [[ -n $scraper ]] && kill "$scraper" 2>/dev/null || true
    # Idle: the load gone, the pools' idle connections still held.
    sleep 3
    local idle fd_idle alive=no code
    # shellcheck disable=SC2046
    idle=$(rss_kib $(family "$PID"))
    # shellcheck disable=SC2046
    fd_idle=$(fds $(family "$PID"))
    # Alive: the process is there and still answers (robots.txt is
    # crawlgate's own; nginx-lean's is a fixed return).
    for _ in 1 2 3 4 5; do
        code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -H 'Host: example.com' \
            "http://127.0.0.1:$PORT/robots.txt" || true)
        [[ $code == 200 ]] && break
    done
    kill -0 "$PID" 2>/dev/null && [[ $code == 200 ]] && alive=yes
    local panics
    panics=$(grep -c 'panicked' "$RUN/$name.log" || true)
    kill "$PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PID" 2>/dev/null || true
    local statuses
    statuses=$(awk '/^STATUS/ { printf "%s%s:%s", sep, $2, $3; sep = " " }' "$RUN/wrk-$name.out")
    local requests errors
    requests=$(sed -nE 's/.*RESULT requests=([0-9]+).*/\1/p' "$RUN/wrk-$name.out")
    errors=$(sed -nE 's/.*socket_errors=([0-9]+).*/\1/p' "$RUN/wrk-$name.out")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$name" "${requests:-0}" "${errors:-0}" "$statuses" "$start" "$at60" "$end" "$peak" "$idle" \
        "$fd_start" "$fd_end" "$fd_idle" "$alive" "$panics" "${series[*]}" "$before_counts" "$(counts)" "$(held "$name")" "$anon_start" "$anon_end" "$pss_end" >> "$RESULTS"
}

echo "# $("$CRAWLGATE_BIN" --version | head -1) vs $("$NGINX" -v 2>&1 | sed 's/.*: //'), $(nproc) CPUs, proxy on CPU $PROXY_CPU, wrk + origin on CPU $LOAD_CPU"
echo "# ${DURATION}s of faults per proxy after ${WARMUP}s of warm-up, ${CONNS} connections, SIGHUP every ${HUP_EVERY}s, RSS every ${SAMPLE_EVERY}s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
    n=${#PROXIES[@]}
    for i in $(seq 0 $((n - 1))); do run "${PROXIES[$(((i + round - 1) % n))]}"; done
done

# OUT: a folder to keep the logs (malloc_stats() per arena), wrk's output
# and the results in.
if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    cp "$RUN"/*.log "$RUN"/wrk-*.out "$RESULTS" "$OUT"/
fi

python3 - "$RESULTS" "$DURATION" "$SMOKE" <<'PY'
import json, sys

path, duration, smoke = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
mib = lambda kib: "-" if kib == "-" else f"{int(kib) / 1024:.1f}"
print()
print("| proxy | requests | socket errors | statuses | RSS start MiB | at 60 s | end | peak | idle after | end − start | anonymous start → end | PSS end | fds start / end / idle | alive | panics |")
print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |")
ok = True
series, checks = [], []
for line in open(path):
    (name, requests, errors, statuses, start, at60, end, peak, idle,
     fd_start, fd_end, fd_idle, alive, panics, rss, before, after, held, anon_start, anon_end, pss_end) = line.rstrip("\n").split("\t")
    grow = (int(end) - int(start)) / 1024
    print(f"| {name} | {int(requests):,} | {int(errors):,} | {statuses} | {mib(start)} | {mib(at60)} | "
          f"{mib(end)} | {mib(peak)} | {mib(idle)} | {grow:+.1f} | {mib(anon_start)} → {mib(anon_end)} | {mib(pss_end)} | {fd_start} / {fd_end} / {fd_idle} | {alive} | {panics} |")
    series.append((name + " RSS MiB, sampled", " ".join(mib(v) for v in rss.split())))
    if held != "-":
        series.append((name + " malloc in use / held MiB, start → end", held))
    try:
        b, a = json.loads(before), json.loads(after)
        mix = {k: a[k] - b.get(k, 0) for k in a}
    except ValueError:
        mix = {}
    series.append((name + " origin answers", " ".join(f"{k}:{v}" for k, v in mix.items())))
    if smoke:
        met = all(mix.get(k, 0) > 0 for k in ("ok", "cut", "reset", "broken"))
        fine = alive == "yes" and panics == "0" and met and " 200:" in " " + statuses
        checks.append(f"smoke {name}: alive {alive}, panics {panics}, faults met {met}: {'ok' if fine else 'WRONG'}")
        ok = ok and fine
print()
for name, values in series:
    print(f"# {name}: {values}")
for check in checks:
    print(check)
sys.exit(0 if ok else 1)
PY
