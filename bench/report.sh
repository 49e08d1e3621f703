#!/usr/bin/env bash
# `crawlgate report` against GoAccess on the same generated access log
# (bench/README.md, "The crawl report against GoAccess").
#
#   bench/report.sh [SIZE]          # SIZE of the main log, default 1G
#
# Generates a combined-format log of SIZE once (bench/report_log.py, seed
# 1), and one of SMALL (256M) for the memory comparison, into a scratch
# folder, or reuses $REPORT_LOG (and $REPORT_LOG_SMALL) when they exist;
# builds crawlgate in release (CARGO_TARGET_DIR respected) unless
# CRAWLGATE_BIN is set; then runs ROUNDS (3) alternated rounds of
#
#   goaccess LOG --log-format=COMBINED --no-progress --no-parsing-spinner -o OUT.html
#   crawlgate report --format html --out OUT.html --ranges DIR --robots FILE LOG
#
# on the main log, each under /usr/bin/time (wall, user, sys seconds, peak
# RSS), each round starting with the other tool, the first SMALL_ROUNDS (1)
# of them also on the small log (peak RSS varies by under 1 % between
# runs; GoAccess takes half a minute there); and crawlgate once with
# --format json, whose request count is checked against the log's lines.
# About 8 minutes with the default sizes on a quiet 2-core machine
# (GoAccess takes ~100 s of CPU per GiB, crawlgate ~7), 12 or more on a
# busy one.
# Prints markdown tables of medians and crawlgate ÷ goaccess ratios.
#
# Nothing is pinned by default (both tools see both cores); PIN="taskset
# -c 1" pins both the same way. GoAccess runs as Debian ships it (its
# /etc/goaccess/goaccess.conf read, in-memory storage); the two flags
# only keep it from drawing progress on a terminal.
set -euo pipefail

BENCH=report.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIZE=${1:-1G}
SMALL=${SMALL:-256M}
ROUNDS=${ROUNDS:-3}
SMALL_ROUNDS=${SMALL_ROUNDS:-1}
PIN=${PIN:-}
TIME=/usr/bin/time

for tool in goaccess python3; do
    command -v "$tool" >/dev/null || { echo "$BENCH: $tool is missing (apt-get install goaccess python3)" >&2; exit 2; }
done
[[ -x $TIME ]] || { echo "$BENCH: $TIME is missing (apt-get install time)" >&2; exit 2; }

RUN=$(mktemp -d /tmp/report-bench.XXXXXX)
trap 'rm -rf "$RUN"' EXIT

if [[ -z ${CRAWLGATE_BIN:-} ]]; then
    (cd "$ROOT" && cargo build --release --quiet)
    CRAWLGATE_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/crawlgate
fi
[[ -x $CRAWLGATE_BIN ]] || { echo "$BENCH: no binary at $CRAWLGATE_BIN" >&2; exit 2; }

# log_file VAR SIZE: the path of a log of SIZE, generated unless VAR names
# a file that exists.
log_file() {
    local path=${!1:-}
    if [[ -n $path && -s $path ]]; then
        echo "$path"
        return
    fi
    [[ -n $path ]] || path=$RUN/access-$2.log
    python3 "$ROOT/bench/report_log.py" --size "$2" --seed 1 --out "$path" >&2
    echo "$path"
}
LOG=$(log_file REPORT_LOG "$SIZE")
LOG_SMALL=$(log_file REPORT_LOG_SMALL "$SMALL")
python3 "$ROOT/bench/report_log.py" --lines 1 --out /dev/null --ranges-out "$RUN/ranges" 2>/dev/null
cat > "$RUN/robots.txt" <<'EOF'
User-agent: *
Disallow: /?do=
Disallow: /*?do=
Disallow: /*&do=
Disallow: /*_fid=
Disallow: /*sessionid=
Disallow: /index.php?title=*&action=
Disallow: /shop/list.php?*sort=

User-agent: GPTBot
User-agent: CCBot
User-agent: Bytespider
Disallow: /

Sitemap: https://www.example.org/sitemap.xml
EOF

# measure TOOL LABEL LOG: one run, its figures appended to results.tsv.
measure() {
    local tool=$1 label=$2 log=$3 out=$RUN/out
    local -a cmd
    case $tool in
        goaccess)
            cmd=(goaccess "$log" --log-format=COMBINED --no-progress --no-parsing-spinner -o "$out.html") ;;
        crawlgate)
            cmd=("$CRAWLGATE_BIN" report --format html --out "$out.html" --ranges "$RUN/ranges"
                --robots "$RUN/robots.txt" "$log") ;;
        crawlgate-json)
            cmd=("$CRAWLGATE_BIN" report --format json --out "$out.json" --ranges "$RUN/ranges"
                --robots "$RUN/robots.txt" "$log") ;;
    esac
    rm -f "$out.html" "$out.json"
    # shellcheck disable=SC2086 # PIN is a command and its arguments
    if ! $PIN "$TIME" -f '%e %U %S %M' -o "$RUN/time" "${cmd[@]}" </dev/null >"$RUN/stdout" 2>"$RUN/stderr"; then
        echo "$BENCH: $tool failed on $log:" >&2
        cat "$RUN/stderr" >&2
        exit 1
    fi
    [[ -s $out.html || -s $out.json ]] || { echo "$BENCH: $tool wrote no report" >&2; exit 1; }
    printf '%s\t%s\t%s\n' "$tool" "$label" "$(tail -1 "$RUN/time" | tr ' ' '\t')" >> "$RUN/results.tsv"
    echo "$BENCH: $tool $label $(tail -1 "$RUN/time")" >&2
}

lines_big=$(wc -l < "$LOG")
lines_small=$(wc -l < "$LOG_SMALL")
echo "$BENCH: $LOG: $lines_big lines, $(stat -c %s "$LOG") bytes; $LOG_SMALL: $lines_small lines" >&2

for round in $(seq "$ROUNDS"); do
    if ((round % 2)); then order=(goaccess crawlgate); else order=(crawlgate goaccess); fi
    for tool in "${order[@]}"; do measure "$tool" big "$LOG"; done
    if ((round <= SMALL_ROUNDS)); then
        for tool in "${order[@]}"; do measure "$tool" small "$LOG_SMALL"; done
    fi
done
measure crawlgate-json big "$LOG"
json_requests=$(python3 - "$RUN/out.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
skipped = sum(doc["input"]["skipped"].values())
if skipped:
    sys.exit(f"crawlgate report left {skipped} lines unread: {doc['input']['skipped']}")
print(doc["total"]["requests"])
EOF
)

# The tables: medians per tool and log, ratios, memory by log size.
python3 - "$RUN/results.tsv" "$lines_big" "$(stat -c %s "$LOG")" "$lines_small" \
    "$(stat -c %s "$LOG_SMALL")" "$json_requests" "${PIN:-not pinned}" "$ROUNDS" <<'EOF'
import statistics, sys
from collections import defaultdict

path, lines_big, bytes_big, lines_small, bytes_small, json_requests, pin, rounds = sys.argv[1:]
lines = {"big": int(lines_big), "small": int(lines_small)}
size = {"big": int(bytes_big), "small": int(bytes_small)}
runs = defaultdict(list)
for row in open(path):
    tool, label, wall, user, system, rss = row.split()
    runs[(tool, label)].append((float(wall), float(user), float(system), int(rss)))


def med(tool, label, i):
    return statistics.median(r[i] for r in runs[(tool, label)])


def mib(n):
    return n / (1 << 20)


names = {"goaccess": "goaccess (html)", "crawlgate": "crawlgate report (html)",
         "crawlgate-json": "crawlgate report (json)"}
print(f"\n## crawlgate report against GoAccess (medians of {rounds} alternated runs; {pin})\n")
print(f"Logs: {lines['big']:,} lines, {mib(size['big']):,.0f} MiB; "
      f"{lines['small']:,} lines, {mib(size['small']):,.0f} MiB. "
      f"crawlgate's JSON counted {int(json_requests):,} requests.\n")
print("| tool | log | runs | wall s | user s | sys s | peak RSS MiB | lines/s | MiB/s | every run's wall s |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for label in ("big", "small"):
    for tool in ("goaccess", "crawlgate", "crawlgate-json"):
        if (tool, label) not in runs:
            continue
        wall = med(tool, label, 0)
        print(f"| {names[tool]} | {mib(size[label]):,.0f} MiB | {len(runs[(tool, label)])} | {wall:.2f} | "
              f"{med(tool, label, 1):.2f} | {med(tool, label, 2):.2f} | {med(tool, label, 3) / 1024:.1f} | "
              f"{lines[label] / wall:,.0f} | {mib(size[label]) / wall:,.1f} | "
              f"{' / '.join(f'{r[0]:.2f}' for r in runs[(tool, label)])} |")

labels = ("big", "small")
print("\n| crawlgate ÷ goaccess | " + " | ".join(f"{mib(size[l]):,.0f} MiB log" for l in labels) + " |")
print("| --- | ---: | ---: |")


def ratio(f):
    return " | ".join(f"{f('crawlgate', l) / f('goaccess', l):.3f}" for l in labels)


print(f"| wall time | {ratio(lambda t, l: med(t, l, 0))} |")
print(f"| CPU time (user + sys) | {ratio(lambda t, l: med(t, l, 1) + med(t, l, 2))} |")
print(f"| lines/s | {ratio(lambda t, l: lines[l] / med(t, l, 0))} |")
print(f"| peak RSS | {ratio(lambda t, l: med(t, l, 3))} |")

print(f"\n| peak RSS, MiB | {mib(size['small']):,.0f} MiB log | {mib(size['big']):,.0f} MiB log "
      "| growth | big ÷ small |")
print("| --- | ---: | ---: | ---: | ---: |")
for tool in ("goaccess", "crawlgate"):
    small, big = med(tool, "small", 3) / 1024, med(tool, "big", 3) / 1024
    print(f"| {names[tool]} | {small:.1f} | {big:.1f} | {big - small:+.1f} | {big / small:.2f} |")
EOF
