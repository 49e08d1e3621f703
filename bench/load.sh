#!/usr/bin/env bash
# Side-by-side load benchmark: crawlgate against nginx doing the same job
# as an operator would configure it (bench/peers/nginx-lean.conf, a
# 25-token bot map: the headline peer) and, in full runs, against nginx
# matching crawlgate's own 748 tokens (bench/peers/nginx.conf), all in front
# of the same nginx origin, on 127.0.0.1 only, with real browser request
# heads (bench/mix.lua). See bench/README.md §5 for the method and results.
#
#   bench/load.sh            full run (about 10 minutes)
#   bench/load.sh --smoke    a few seconds per scenario; checks only that
#                            every scenario produced the expected status mix
#
# Environment: DURATION (s, default 10), ROUNDS (default 3: A B A B A B),
# ONLY (throughput | memory | tls: one part only), TLS (1: also the runs
# over TLS and HTTP/2; H2_CONNS 16, H2_STREAMS 8), FULL (0: no runs of the
# 748-token nginx),
# CONNS (wrk connections, 64), IDLE_CONNS (5000), STREAM_MIB (1024),
# CRAWLGATE_BIN (default: build target/release/crawlgate),
# BASELINE_BIN (an older crawlgate build, e.g. from before the metrics and
# the access-log writer, run as crawlgate-baseline beside the current one:
# the cost of observation, measured side by side), BASELINE_CONFIG (its
# config, default bench/crawlgate.toml; bench/crawlgate-native.toml to set
# two builds of the native layer side by side),
# PROTECT (1: also run crawlgate-protect, the same build with [shed] and
# [bot_cache] on (bench/crawlgate-protect.toml), and a robots-only scenario:
# what they cost when not triggered, and a cache hit against a forward),
# VERIFY (1: also run crawlgate-verify, the same build with crawler
# verification on, lists from bench/ranges/ (bench/crawlgate-verify.toml):
# what verification costs the mixed traffic, against crawlgate with it off),
# REPORT (1: instead of the usual proxies, only crawlgate-report and
# crawlgate-noreport, the same build both with an admin listener, the live
# crawl report on and off (bench/crawlgate-noreport.toml): what the report
# costs per request),
# HYPER (1: also run crawlgate-hyper, the same build with hyper's HTTP/1.1
# layer (bench/crawlgate-hyper.toml) instead of crawlgate's own, the
# default: the two layers side by side; NATIVE=1 adds crawlgate-native,
# with the layer set explicitly, for builds from before it was the default),
# UPSTREAM_TLS (1: the proxies reach the origin over TLS, verified against
# the throwaway certificate, kept alive: nginx-lean with proxy_ssl_verify,
# crawlgate with proxy.upstream_ca; meant with ONLY=throughput),
# PROXY_CPU / LOAD_CPU (cores for the proxy and for wrk + origin: 0 / 1).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

SMOKE=0
[[ ${1:-} == --smoke ]] && SMOKE=1
if ((SMOKE)); then
    DURATION=${DURATION:-2} ROUNDS=${ROUNDS:-1} IDLE_CONNS=${IDLE_CONNS:-200} STREAM_MIB=${STREAM_MIB:-16}
fi
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
IDLE_CONNS=${IDLE_CONNS:-5000}
STREAM_MIB=${STREAM_MIB:-1024}
BENCH=bench/load.sh
# shellcheck source=bench/common.sh
source bench/common.sh
need_tools nginx wrk python3 curl taskset
NGINX=$(command -v nginx)
crawlgate_bin
scratch crawlgate-bench
port_base 8
ORIGIN_PORT=$BASE PEER_PORT=$((BASE + 1)) CG_PORT=$((BASE + 2)) STREAM_PORT=$((BASE + 3))
PEER_TLS_PORT=$((BASE + 4)) CG_TLS_PORT=$((BASE + 5)) ORIGIN_TLS_PORT=$((BASE + 7))
RESULTS=$RUN/results.tsv
: > "$RESULTS"

# --- the origin: nginx, 1 worker, a 2 KB page and a large body ------------
# A throwaway certificate for example.com: the proxies' TLS ports, and the
# origin's with UPSTREAM_TLS=1.
if command -v openssl >/dev/null; then
    mkdir "$RUN/certs"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=example.com -addext subjectAltName=DNS:example.com \
        -addext basicConstraints=critical,CA:FALSE \
        -keyout "$RUN/certs/example.com.key" -out "$RUN/certs/example.com.crt" 2>/dev/null
fi
ORIGIN_TLS=
if [[ ${UPSTREAM_TLS:-0} == 1 ]]; then
    [[ -f $RUN/certs/example.com.crt ]] || { echo "$BENCH: UPSTREAM_TLS=1 needs openssl" >&2; exit 2; }
    ORIGIN_TLS="listen 127.0.0.1:$ORIGIN_TLS_PORT ssl reuseport backlog=4096; ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate $RUN/certs/example.com.crt; ssl_certificate_key $RUN/certs/example.com.key;"
fi
mkdir -p "$RUN/www"
head -c 2048 /dev/zero | tr '\0' 'x' > "$RUN/www/page.html"
truncate -s "${STREAM_MIB}M" "$RUN/upload.bin"
# Read it once: the first read of a sparse file fills the page cache with
# zero pages at a few hundred MiB/s, which would slow whichever proxy goes
# first.
cat "$RUN/upload.bin" > /dev/null
chmod -R a+rX "$RUN/www"
cat > "$RUN/origin.conf" <<CONF
worker_processes 1;
daemon off;
pid $RUN/origin.pid;
error_log $RUN/origin-error.log warn;
worker_rlimit_nofile 65536;
events { worker_connections 16384; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    client_max_body_size 0;
    sendfile on;
    server {
        listen 127.0.0.1:$ORIGIN_PORT reuseport backlog=4096;
        $ORIGIN_TLS
        root $RUN/www;
        location / { default_type text/html; try_files /page.html =404; }
    }
}
CONF
taskset -c "$LOAD_CPU" "$NGINX" -c "$RUN/origin.conf" -p "$RUN" &
PIDS+=($!)
wait_port "$ORIGIN_PORT"
# The streaming origin reads a whole upload before it answers.
taskset -c "$LOAD_CPU" python3 bench/stream_origin.py "$STREAM_PORT" &
PIDS+=($!)
wait_port "$STREAM_PORT"
# Where the proxies forward to: the nginx origin (over TLS with
# UPSTREAM_TLS=1), or the streaming one.
UPSTREAM_PORT=$ORIGIN_PORT UPSTREAM_SCHEME=http
if [[ -n $ORIGIN_TLS ]]; then
    UPSTREAM_PORT=$ORIGIN_TLS_PORT UPSTREAM_SCHEME=https
    wait_port "$ORIGIN_TLS_PORT"
fi

# --- the two proxies -------------------------------------------------------
# Both also listen with TLS (a throwaway self-signed certificate) for the
# idle-connection figure over TLS; without openssl that figure is skipped.
CG_TLS_ARGS=() PEER_TLS=
if [[ -f $RUN/certs/example.com.crt ]]; then
    CG_TLS_ARGS=(--tls-listen "127.0.0.1:$CG_TLS_PORT" --certs "$RUN/certs")
    # TLS 1.2 and 1.3, as an operator sets them (nginx 1.22's default
    # has no 1.3).
    PEER_TLS="listen 127.0.0.1:$PEER_TLS_PORT ssl http2; ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate $RUN/certs/example.com.crt; ssl_certificate_key $RUN/certs/example.com.key;"
else
    echo "# openssl is missing: no idle-connection figure over TLS"
fi

start_peer() { # access log: off | file; config (default bench/peers/nginx.conf)
    local log=off
    [[ $1 == file ]] && log=$RUN/peer-access.log
    # Over TLS to the origin: verified, the session resumed, kept alive.
    local upstream_tls=
    [[ $UPSTREAM_SCHEME == https ]] &&
        upstream_tls="proxy_ssl_server_name on; proxy_ssl_name example.com; proxy_ssl_verify on; proxy_ssl_trusted_certificate $RUN/certs/example.com.crt; proxy_ssl_session_reuse on;"
    sed -e "s|listen @LISTEN@ .*|& $PEER_TLS|" \
        -e "s|proxy_pass http://origin;|proxy_pass $UPSTREAM_SCHEME://origin; $upstream_tls|" \
        -e "s|@LISTEN@|127.0.0.1:$PEER_PORT|; s|@ORIGIN@|127.0.0.1:$UPSTREAM_PORT|; s|@RUN@|$RUN|; s|@ACCESS_LOG@|$log|" \
        "${2:-bench/peers/nginx.conf}" > "$RUN/peer.conf"
    taskset -c "$PROXY_CPU" "$NGINX" -c "$RUN/peer.conf" -p "$RUN" &
    PEER_PID=$!
    PIDS+=("$PEER_PID")
    wait_port "$PEER_PORT"
}

ADMIN_PORT=$((BASE + 6))
SCRAPER_PID=
start_crawlgate() { # access log: off | file; binary (default CRAWLGATE_BIN); config; admin
    local config=${3:-bench/crawlgate.toml} bin=${2:-$CRAWLGATE_BIN} admin=()
    if [[ $UPSTREAM_SCHEME == https ]]; then
        # Verified against the throwaway certificate, by its name.
        sed -e "/^\[proxy\]/a upstream_ca = \"$RUN/certs/example.com.crt\"\nupstream_sni = \"example.com\"" \
            -e "s|= \"ranges/|= \"$ROOT/bench/ranges/|" "$config" > "$RUN/crawlgate-upstream-tls.toml"
        config=$RUN/crawlgate-upstream-tls.toml
    fi
    # admin: the listener (scraped) with the access log off too, as the
    # live report needs one.
    [[ ${4:-} == admin ]] && admin=(--admin-listen "127.0.0.1:$ADMIN_PORT")
    if [[ $1 == file ]]; then
        # The copy lives in $RUN: paths relative to bench/ are made absolute.
        sed -e 's/^access = false/access = true/' -e "s|= \"ranges/|= \"$ROOT/bench/ranges/|" \
            "$config" > "$RUN/crawlgate-log.toml"
        config=$RUN/crawlgate-log.toml
        # Everything observation costs: the access log (combined, to a
        # file), the metrics, and the admin listener scraped every second
        # (Prometheus usually scrapes every 15 s). Not for the baseline,
        # which has none of it.
        [[ $bin == "$CRAWLGATE_BIN" ]] && admin=(--admin-listen "127.0.0.1:$ADMIN_PORT")
    fi
    RUST_LOG=info taskset -c "$PROXY_CPU" "$bin" --config "$config" \
        --listen "127.0.0.1:$CG_PORT" --upstream "$UPSTREAM_SCHEME://127.0.0.1:$UPSTREAM_PORT" "${CG_TLS_ARGS[@]}" \
        "${admin[@]}" 2> "$RUN/crawlgate-$1.log" &
    CG_PID=$!
    PIDS+=("$CG_PID")
    wait_port "$CG_PORT"
    if ((${#admin[@]})); then
        wait_port "$ADMIN_PORT"
        (while sleep 1; do curl -s -o /dev/null "http://127.0.0.1:$ADMIN_PORT/metrics" || true; done) &
        SCRAPER_PID=$!
        PIDS+=("$SCRAPER_PID")
    fi
}

stop_pid() {
    if [[ -n $SCRAPER_PID ]]; then
        kill "$SCRAPER_PID" 2>/dev/null || true
        SCRAPER_PID=
    fi
    kill "$1" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$1" 2>/dev/null || true
}

# start_proxy NAME LOG: starts crawlgate, nginx or nginx-lean; sets PID, PORT.
start_proxy() {
    case $1 in
        crawlgate) start_crawlgate "$2"; PID=$CG_PID; PORT=$CG_PORT ;;
        crawlgate-baseline) start_crawlgate "$2" "$BASELINE_BIN" "${BASELINE_CONFIG:-bench/crawlgate.toml}"; PID=$CG_PID; PORT=$CG_PORT ;;
        crawlgate-protect) start_crawlgate "$2" "$CRAWLGATE_BIN" bench/crawlgate-protect.toml; PID=$CG_PID; PORT=$CG_PORT ;;
        crawlgate-verify) start_crawlgate "$2" "$CRAWLGATE_BIN" bench/crawlgate-verify.toml; PID=$CG_PID; PORT=$CG_PORT ;;
        crawlgate-report) start_crawlgate "$2" "$CRAWLGATE_BIN" bench/crawlgate.toml admin; PID=$CG_PID; PORT=$CG_PORT ;;
        crawlgate-noreport) start_crawlgate "$2" "$CRAWLGATE_BIN" bench/crawlgate-noreport.toml admin; PID=$CG_PID; PORT=$CG_PORT ;;
        crawlgate-native) start_crawlgate "$2" "$CRAWLGATE_BIN" bench/crawlgate-native.toml; PID=$CG_PID; PORT=$CG_PORT ;;
        crawlgate-hyper) start_crawlgate "$2" "$CRAWLGATE_BIN" bench/crawlgate-hyper.toml; PID=$CG_PID; PORT=$CG_PORT ;;
        nginx) start_peer "$2"; PID=$PEER_PID; PORT=$PEER_PORT ;;
        nginx-lean) start_peer "$2" bench/peers/nginx-lean.conf; PID=$PEER_PID; PORT=$PEER_PORT ;;
    esac
}

# All processes of a proxy: the process and its children (nginx's worker).
proc_family() { echo "$1" $(pgrep -P "$1" || true); }

cpu_ticks() { # utime + stime of every process given
    local total=0 pid
    for pid in "$@"; do
        read -r -a f < "/proc/$pid/stat"
        total=$((total + f[13] + f[14]))
    done
    echo "$total"
}

rss_kib() { # VmRSS or VmHWM summed over processes: field pids...
    local field=$1 total=0 pid v
    shift
    for pid in "$@"; do
        v=$(awk -v k="$field:" '$1 == k { print $2 }' "/proc/$pid/status")
        total=$((total + v))
    done
    echo "$total"
}

TICK_US=$((1000000 / $(getconf CLK_TCK)))

# core_ticks: "busy total" of the proxy's core, then of the load core
# (/proc/stat: busy is all but idle and iowait), to tell which side a run
# was bound by: the proxy's core near 100 % means the proxy limited it.
core_ticks() {
    awk -v a="cpu$PROXY_CPU" -v b="cpu$LOAD_CPU" '$1 == a || $1 == b {
        t = 0; for (i = 2; i <= NF; i++) t += $i
        busy[$1] = t - $5 - $6; total[$1] = t
    } END { print busy[a], total[a], busy[b], total[b] }' /proc/stat
}

# busy_pct BEFORE AFTER: "proxy-core% load-core%" between two core_ticks.
busy_pct() {
    awk -v x="$1" -v y="$2" 'BEGIN {
        split(x, a, " "); split(y, b, " ")
        p = b[2] - a[2]; l = b[4] - a[4]
        printf "%d\t%d", p ? 100 * (b[1] - a[1]) / p : 0, l ? 100 * (b[3] - a[3]) / l : 0
    }'
}

# run_wrk NAME PROXY PORT MODE [PIDS…]: one measured run, one TSV row.
run_wrk() {
    local name=$1 proxy=$2 port=$3 mode=$4
    shift 4
    local script=bench/mix.lua
    ((SMOKE)) && script=bench/mix-count.lua
    # SCHEME=https: over TLS; CLOSE=close: a new connection per request.
    local url=${SCHEME:-http}://127.0.0.1:$port
    taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d1s -s bench/mix.lua "$url" -- "$mode" ${CLOSE:-} > /dev/null
    local before=0 after=0
    (($#)) && before=$(cpu_ticks "$@")
    local cores0 cores1
    cores0=$(core_ticks)
    taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$script" "$url" -- "$mode" ${CLOSE:-} > "$RUN/wrk.out"
    cores1=$(core_ticks)
    (($#)) && after=$(cpu_ticks "$@")
    local line
    line=$(grep '^RESULT' "$RUN/wrk.out")
    local requests duration p50 p99 errors
    requests=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<< "$line")
    duration=$(sed -E 's/.*duration_us=([0-9]+).*/\1/' <<< "$line")
    p50=$(sed -E 's/.*p50_us=([0-9]+).*/\1/' <<< "$line")
    p99=$(sed -E 's/.*p99_us=([0-9]+).*/\1/' <<< "$line")
    errors=$(sed -E 's/.*socket_errors=([0-9]+).*/\1/' <<< "$line")
    # wrk counts the answers that are not 2xx or 3xx: the mixed traffic
    # has 5 % of 403s, the rest none; more means a broken run (a proxy
    # answering 502), not a fast one.
    local failed allowed=0
    [[ $mode == mixed ]] && allowed=6
    failed=$(sed -nE 's/.*Non-2xx or 3xx responses: ([0-9]+).*/\1/p' "$RUN/wrk.out")
    if ((${failed:-0} * 100 > requests * allowed)); then
        echo "# $name/$proxy: $failed of $requests answers were not 2xx or 3xx: a broken run"
    fi
    local cpu_us=$(((after - before) * TICK_US))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$proxy" "$requests" "$duration" "$p50" "$p99" "$cpu_us" "$errors" \
        "$(busy_pct "$cores0" "$cores1")" >> "$RESULTS"
    if ((SMOKE)); then check_mix "$name" "$proxy" "$mode"; fi
}

# run_h2 NAME PROXY PORT [PIDS…]: one HTTP/2 run over TLS (h2load, ALPN
# h2, H2_CONNS connections of H2_STREAMS streams each), Firefox's head
# on one page, every request forwarded; h2load gives no percentiles, so
# p50 and p99 are written 0 (shown "-").
run_h2() {
    local name=$1 proxy=$2 port=$3
    shift 3
    local url="https://127.0.0.1:$port/article/1?ref=home"
    local head=(
        -H ":authority: example.com"
        -H "user-agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"
        -H "accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        -H "accept-language: en-US,en;q=0.5"
        -H "accept-encoding: gzip, deflate, br, zstd"
        -H "referer: https://example.com/"
        -H "cookie: PHPSESSID=q3k9v1b6m2s8d0f4h7j5l2n9p1; _ga=GA1.1.1849302755.1733050000; cookie_consent=accepted; lang=en"
        -H "upgrade-insecure-requests: 1"
        -H "sec-fetch-dest: document"
        -H "sec-fetch-mode: navigate"
        -H "sec-fetch-site: same-origin"
        -H "sec-fetch-user: ?1"
        -H "priority: u=0, i"
    )
    local load=(-c "${H2_CONNS:-16}" -m "${H2_STREAMS:-8}" "${head[@]}")
    taskset -c "$LOAD_CPU" "$H2LOAD" "${load[@]}" -D 1 "$url" > /dev/null
    local before=0 after=0
    (($#)) && before=$(cpu_ticks "$@")
    local cores0 cores1
    cores0=$(core_ticks)
    taskset -c "$LOAD_CPU" "$H2LOAD" "${load[@]}" -D "$DURATION" "$url" > "$RUN/h2.out"
    cores1=$(core_ticks)
    (($#)) && after=$(cpu_ticks "$@")
    local requests errors seconds
    requests=$(awk '$1 == "requests:" { print $8 }' "$RUN/h2.out")
    errors=$(awk '$1 == "requests:" { print $10 + $12 }' "$RUN/h2.out")
    seconds=$(sed -nE 's/^finished in ([0-9.]+)s,.*/\1/p' "$RUN/h2.out")
    if ! grep -qE '^status codes: [0-9]+ 2xx, 0 3xx, 0 4xx, 0 5xx' "$RUN/h2.out"; then
        echo "# $name/$proxy: not every answer was 2xx: $(grep '^status codes' "$RUN/h2.out")"
    fi
    local cpu_us=$(((after - before) * TICK_US))
    printf '%s\t%s\t%s\t%s\t0\t0\t%s\t%s\t%s\n' "$name" "$proxy" "${requests:-0}" \
        "$(awk -v s="${seconds:-0}" 'BEGIN { printf "%d", s * 1000000 }')" "$cpu_us" "${errors:-0}" \
        "$(busy_pct "$cores0" "$cores1")" >> "$RESULTS"
}

# run_handshakes NAME PROXY PORT [PIDS…]: full TLS 1.3 handshakes, one per
# connection and nothing sent on it (openssl s_time -new: no session
# resumed), for the CPU each costs the proxy; the rate is the client's.
run_handshakes() {
    local name=$1 proxy=$2 port=$3
    shift 3
    local before=0 after=0
    (($#)) && before=$(cpu_ticks "$@")
    local cores0 cores1
    cores0=$(core_ticks)
    taskset -c "$LOAD_CPU" openssl s_time -connect "127.0.0.1:$port" -new -tls1_3 \
        -time "$DURATION" > "$RUN/stime.out" 2>&1 || true
    cores1=$(core_ticks)
    (($#)) && after=$(cpu_ticks "$@")
    local count seconds
    count=$(sed -nE 's/^([0-9]+) connections in [0-9]+ real seconds.*/\1/p' "$RUN/stime.out")
    seconds=$(sed -nE 's/^[0-9]+ connections in ([0-9]+) real seconds.*/\1/p' "$RUN/stime.out")
    [[ -n $count ]] || echo "# $name/$proxy: s_time made no connection: $(tail -3 "$RUN/stime.out")"
    local cpu_us=$(((after - before) * TICK_US))
    printf '%s\t%s\t%s\t%s\t0\t0\t%s\t0\t%s\n' "$name" "$proxy" "${count:-0}" \
        "$((${seconds:-0} * 1000000))" "$cpu_us" "$(busy_pct "$cores0" "$cores1")" >> "$RESULTS"
}

# The status mix a scenario must produce (smoke mode).
check_mix() {
    local name=$1 proxy=$2 mode=$3 want
    if [[ $mode == pass || $mode == robots ]]; then want="200:100"; else want="200:90 301:5 403:5"; fi
    python3 - "$RUN/wrk.out" "$name/$proxy" "$want" <<'PY'
import sys
out, label, want = sys.argv[1], sys.argv[2], sys.argv[3]
counts = {}
for line in open(out):
    if line.startswith("STATUS"):
        _, status, n = line.split()
        counts[int(status)] = int(n)
total = sum(counts.values())
ok = total > 0
for item in want.split():
    status, pct = item.split(":")
    got = 100.0 * counts.get(int(status), 0) / total if total else 0
    if abs(got - int(pct)) > 1.0:
        ok = False
if set(counts) - {int(i.split(":")[0]) for i in want.split()}:
    ok = False
print(f"smoke {label}: {total} responses {dict(sorted(counts.items()))} want % {want}: {'ok' if ok else 'WRONG'}")
sys.exit(0 if ok else 1)
PY
}

echo "# crawlgate $("$CRAWLGATE_BIN" --version) vs $("$NGINX" -v 2>&1 | sed 's/.*: //'), $(nproc) CPUs, proxy on CPU $PROXY_CPU, wrk + origin on CPU $LOAD_CPU"
echo "# ${ROUNDS} rounds, ${DURATION}s per run, ${CONNS} connections, to the origin over $UPSTREAM_SCHEME"

# --- throughput scenarios, alternated ---------------------------------------
PROXIES=(crawlgate nginx-lean)
# nginx with crawlgate's own 748 tokens: a second row, not the headline.
((SMOKE)) || [[ ${FULL:-1} == 0 ]] || PROXIES+=(nginx)
[[ -n ${BASELINE_BIN:-} ]] && PROXIES=(crawlgate-baseline "${PROXIES[@]}")
[[ ${PROTECT:-0} == 1 ]] && PROXIES=(crawlgate-protect "${PROXIES[@]}")
[[ ${VERIFY:-0} == 1 ]] && PROXIES=(crawlgate-verify "${PROXIES[@]}")
[[ ${NATIVE:-0} == 1 ]] && PROXIES=(crawlgate-native "${PROXIES[@]}")
[[ ${HYPER:-0} == 1 ]] && PROXIES=(crawlgate-hyper "${PROXIES[@]}")
[[ ${REPORT:-0} == 1 ]] && PROXIES=(crawlgate-report crawlgate-noreport)
# ONLY=memory and ONLY=tls skip the throughput runs (ONLY=throughput the rest).
THROUGHPUT_ROUNDS=$ROUNDS
[[ ${ONLY:-} == memory || ${ONLY:-} == tls ]] && THROUGHPUT_ROUNDS=0
for round in $(seq "$THROUGHPUT_ROUNDS"); do
    run_wrk pass origin "$ORIGIN_PORT" pass
    # Each round starts with the next proxy, so that no proxy always runs
    # first (or right after the origin).
    n=${#PROXIES[@]}
    order=()
    for i in $(seq 0 $((n - 1))); do order+=("${PROXIES[$(((i + round - 1) % n))]}"); done
    for proxy in "${order[@]}"; do
        start_proxy "$proxy" off
        pids=$(proc_family "$PID")
        # shellcheck disable=SC2086
        run_wrk mixed "$proxy" "$PORT" mixed $pids
        # shellcheck disable=SC2086
        run_wrk pass "$proxy" "$PORT" pass $pids
        if [[ ${PROTECT:-0} == 1 ]]; then
            # shellcheck disable=SC2086
            run_wrk robots "$proxy" "$PORT" robots $pids
        fi
        stop_pid "$PID"
        start_proxy "$proxy" file
        pids=$(proc_family "$PID")
        # shellcheck disable=SC2086
        run_wrk mixed-logged "$proxy" "$PORT" mixed $pids
        stop_pid "$PID"
    done
done

# --- over TLS: HTTP/1.1 kept alive, a handshake per request, HTTP/2 ---------
# TLS=1 (or ONLY=tls): crawlgate's TLS port (HTTP/1.1 on the layer
# proxy.http1 names, HTTP/2 on hyper's) against nginx-lean's (TLS 1.3, the throwaway P-256
# certificate), and crawlgate-baseline's when BASELINE_BIN is set:
# https-mixed is the mixed traffic on kept-alive connections, https-resume
# the same with a new connection per request (wrk resumes the session:
# a returning visitor's handshake), tls-handshake full handshakes alone
# (openssl s_time), h2-pass HTTP/2 (h2load, when installed).
TLS_ROUNDS=0
if [[ ${TLS:-0} == 1 || ${ONLY:-} == tls ]]; then
    if ((${#CG_TLS_ARGS[@]})); then TLS_ROUNDS=$ROUNDS; fi
    ((TLS_ROUNDS)) || echo "# openssl is missing: no figures over TLS"
fi
H2LOAD=$(command -v h2load || true)
if ((TLS_ROUNDS)) && [[ -z $H2LOAD ]]; then
    echo "# h2load is missing (apt-get install nghttp2-client): no HTTP/2 figure"
fi
TLS_PROXIES=(crawlgate nginx-lean)
[[ -n ${BASELINE_BIN:-} ]] && TLS_PROXIES=(crawlgate-baseline "${TLS_PROXIES[@]}")
# crawlgate-native / crawlgate-hyper: the layer named whatever the default.
[[ ${NATIVE:-0} == 1 ]] && TLS_PROXIES=(crawlgate-native "${TLS_PROXIES[@]}")
[[ ${HYPER:-0} == 1 ]] && TLS_PROXIES=(crawlgate-hyper "${TLS_PROXIES[@]}")
for round in $(seq "$TLS_ROUNDS"); do
    n=${#TLS_PROXIES[@]}
    order=()
    for i in $(seq 0 $((n - 1))); do order+=("${TLS_PROXIES[$(((i + round - 1) % n))]}"); done
    for proxy in "${order[@]}"; do
        start_proxy "$proxy" off
        tls_port=$CG_TLS_PORT
        [[ $proxy == nginx* ]] && tls_port=$PEER_TLS_PORT
        pids=$(proc_family "$PID")
        # shellcheck disable=SC2086
        SCHEME=https run_wrk https-mixed "$proxy" "$tls_port" mixed $pids
        # shellcheck disable=SC2086
        SCHEME=https CLOSE=close run_wrk https-resume "$proxy" "$tls_port" mixed $pids
        # shellcheck disable=SC2086
        run_handshakes tls-handshake "$proxy" "$tls_port" $pids
        if [[ -n $H2LOAD ]]; then
            # shellcheck disable=SC2086
            run_h2 h2-pass "$proxy" "$tls_port" $pids
        fi
        stop_pid "$PID"
    done
done

# --- memory with idle keep-alive connections, and streaming -----------------
MEM=$RUN/memory.tsv
: > "$MEM"
MEM_PROXIES=(crawlgate nginx-lean)
[[ ${NATIVE:-0} == 1 ]] && MEM_PROXIES=(crawlgate-native "${MEM_PROXIES[@]}")
[[ ${HYPER:-0} == 1 ]] && MEM_PROXIES=(crawlgate-hyper "${MEM_PROXIES[@]}")
[[ -n ${BASELINE_BIN:-} ]] && MEM_PROXIES=(crawlgate-baseline "${MEM_PROXIES[@]}")
[[ ${ONLY:-} == throughput || ${ONLY:-} == tls ]] && MEM_PROXIES=()
IDLE_MODES=(plain)
((${#CG_TLS_ARGS[@]})) && IDLE_MODES+=(tls)
for mode in "${IDLE_MODES[@]}"; do
for proxy in "${MEM_PROXIES[@]}"; do
    # A fresh process per mode: memory freed by the plain connections
    # would otherwise be reused by the TLS ones.
    start_proxy "$proxy" off
    pid=$PID port=$PORT
    pids=$(proc_family "$pid")
    idle_port=$port name=$proxy
    if [[ $mode == tls ]]; then
        name=$proxy-tls
        idle_port=$CG_TLS_PORT
        [[ $proxy == nginx* ]] && idle_port=$PEER_TLS_PORT
    fi
    # Fill the upstream keep-alive pools first (a fixed cost of both
    # proxies, not a per-connection one), then take the baseline.
    taskset -c "$LOAD_CPU" wrk -t1 -c600 -d1s -s bench/mix.lua "http://127.0.0.1:$port" -- pass > /dev/null
    sleep 1
    # shellcheck disable=SC2086
    idle_before=$(rss_kib VmRSS $pids)
    coproc IDLE { python3 bench/idle_conns.py 127.0.0.1 "$idle_port" "$IDLE_CONNS" "$mode"; }
    read -r -t 120 ready n <&"${IDLE[0]}"
    [[ $ready == READY ]] || { echo "idle connections failed" >&2; exit 1; }
    sleep 1
    # shellcheck disable=SC2086
    idle_after=$(rss_kib VmRSS $pids)
    exec {IDLE[1]}>&-
    wait "$IDLE_PID" 2>/dev/null || true

    stop_pid "$pid"
    printf 'idle\t%s\t%s\t%s\t%s\n' "$name" "$idle_before" "$idle_after" "$n" >> "$MEM"
done
done

# Streaming, alternated like the throughput runs, each on a fresh process
# (so that its peak RSS is the streams') in front of the streaming origin.
STREAM_PROXIES=("${MEM_PROXIES[@]}")
((${#STREAM_PROXIES[@]})) || STREAM_ROUNDS=0
for round in $(seq "${STREAM_ROUNDS:-$ROUNDS}"); do
    for proxy in "${STREAM_PROXIES[@]}"; do
        saved=("$UPSTREAM_PORT" "$UPSTREAM_SCHEME")
        UPSTREAM_PORT=$STREAM_PORT UPSTREAM_SCHEME=http
        start_proxy "$proxy" off
        UPSTREAM_PORT=${saved[0]} UPSTREAM_SCHEME=${saved[1]}
        pid=$PID port=$PORT
        pids=$(proc_family "$pid")
        start=$(date +%s%N)
        got=$(curl -s --max-time 300 -o /dev/null -w '%{size_download}' -H 'Host: example.com' \
            "http://127.0.0.1:$port/big?bytes=$((STREAM_MIB * 1048576))")
        down_ns=$(($(date +%s%N) - start))
        start=$(date +%s%N)
        up=$(curl -s --max-time 300 -o /dev/null -w '%{http_code} %{size_upload}' -H 'Host: example.com' \
            -H 'Expect:' -X POST -T "$RUN/upload.bin" "http://127.0.0.1:$port/upload")
        up_ns=$(($(date +%s%N) - start))
        # shellcheck disable=SC2086
        peak=$(rss_kib VmHWM $pids)
        read -r up_code up_size <<< "$up"
        printf 'stream\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$proxy" "$got" "$down_ns" "$up_code" "$up_size" "$up_ns" "$peak" >> "$MEM"
        stop_pid "$pid"
    done
done

python3 bench/report.py "$RESULTS" "$MEM" "$STREAM_MIB" "$SMOKE"
