#!/usr/bin/env python3
"""A deterministic, realistic access log for `crawlgate report` and GoAccess
(bench/README.md, "The crawl report against GoAccess").

Writes nginx's `combined` format exactly:

    $remote_addr - $remote_user [$time_local] "$request" $status
    $body_bytes_sent "$http_referer" "$http_user_agent"

of a legacy PHP site (a wiki, a DokuWiki, a forum, a faceted shop, static
files) over seven days, with a day/night curve for people and a flatter
one for robots. About 60 % of the requests come from browsers (User-Agents
of current Chrome, Edge, Firefox, Safari, Samsung Internet and Opera on
Windows, macOS, Linux, Android and iOS, versions varied), the rest from
search, AI, SEO and preview robots, monitors, HTTP libraries and an empty
User-Agent, each with the User-Agent its operator documents. Googlebot and
bingbot come mostly from their published ranges (the prefixes of
tests/data/ranges/googlebot.json and of BING_PREFIXES below, documentation
ranges that stand for the real lists) and partly from elsewhere
(spoofers); `--ranges-out DIR` writes those lists for `crawlgate report
--ranges`. The same seed and size give the same bytes.

    python3 bench/report_log.py --size 1G --seed 1 --out access.log
    python3 bench/report_log.py --lines 1000 --seed 1 --out -
"""

import argparse
import ipaddress
import json
import math
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOGLE_LIST = os.path.join(ROOT, "tests", "data", "ranges", "googlebot.json")
# bingbot's published list has no saved copy in the tree; these stand for it.
BING_PREFIXES = ["198.51.100.0/26", "198.51.100.128/27", "2001:db8:b1e::/48"]
# Local time of the site: Monday 23 November 2026, 00:00, UTC+1.
START = 1795388400  # 2026-11-23T00:00:00+01:00
OFFSET = " +0100"
DAYS = 7
BATCH = 1 << 14

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
WORDS = [
    "Main", "Page", "History", "Railway", "Station", "Prague", "Brno", "River", "Castle",
    "Bridge", "Church", "School", "Museum", "Library", "Garden", "Forest", "Mountain",
    "Village", "Market", "Square", "Tower", "Mill", "Lake", "Valley", "Road", "Street",
    "Festival", "Football", "Club", "Theatre", "Opera", "Painter", "Poet", "Composer",
    "King", "Queen", "Battle", "War", "Treaty", "Election", "Party", "Council", "Mayor",
    "Beer", "Brewery", "Glass", "Porcelain", "Textile", "Factory", "Mine", "Coal", "Iron",
    "Tram", "Bus", "Airport", "Canal", "Harbour", "Island", "Cave", "Spring", "Spa",
]
DOKU_NS = ["start", "wiki:syntax", "howto:install", "howto:backup", "projects:tram",
           "projects:canal", "team:members", "docs:api", "docs:faq", "playground"]
DOKU_DO = ["edit", "revisions", "backlink", "recent", "index", "media", "diff", "export_raw"]
SHOP_SORT = ["price", "name", "date", "rating", "price_desc", "popularity"]
CSS = ["/css/main.css", "/css/print.css", "/css/wiki.css", "/css/forum.css", "/css/shop.css",
       "/js/jquery.min.js", "/js/site.js", "/js/wiki.js", "/favicon.ico", "/img/logo.png"]
SEARCH_REFS = ["https://www.google.com/", "https://www.google.cz/", "https://www.bing.com/",
               "https://duckduckgo.com/", "https://www.seznam.cz/", "https://search.yahoo.com/",
               "https://www.ecosia.org/", "android-app://com.google.android.gm/"]
SITE = "https://www.example.org"
SCAN = ["/wp-login.php", "/.env", "/xmlrpc.php", "/wp-admin/setup-config.php", "/.git/config",
        "/phpmyadmin/index.php", "/admin/config.php", "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php",
        "/server-status", "/backup.zip", "/config.php.bak", "/cgi-bin/luci"]


def parse_size(text):
    """'1G', '256M', '10k' (binary units, a trailing 'iB' or 'B' allowed) or
    a plain number of bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower()
    for tail in ("ib", "b"):
        if text.endswith(tail) and text[:-len(tail)][-1:] in units:
            text = text[:-len(tail)]
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


# === User-Agents ===

def browser_uas(rng):
    """(User-Agent, weight) of browsers, written from how each formats its
    User-Agent string; versions of the last year or so."""
    out = []
    chrome = range(118, 133)
    win = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko)"
    mac = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko)"
    lin = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)"
    andr = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko)"
    for v in chrome:
        w = 1 + (v - 117) ** 2  # newer versions far more common
        out.append((f"{win} Chrome/{v}.0.0.0 Safari/537.36", 9 * w))
        out.append((f"{mac} Chrome/{v}.0.0.0 Safari/537.36", 3 * w))
        out.append((f"{lin} Chrome/{v}.0.0.0 Safari/537.36", 1 * w))
        out.append((f"{andr} Chrome/{v}.0.0.0 Mobile Safari/537.36", 8 * w))
        edge = f"{v}.0.{2000 + 45 * (v - 110) + rng.randrange(40)}.{rng.randrange(20, 120)}"
        out.append((f"{win} Chrome/{v}.0.0.0 Safari/537.36 Edg/{edge}", 3 * w))
        out.append((f"{mac} Chrome/{v}.0.0.0 Safari/537.36 Edg/{edge}", 0.3 * w))
        out.append((f"{andr} Chrome/{v}.0.0.0 Mobile Safari/537.36 EdgA/{edge}", 0.3 * w))
        out.append((f"{win} Chrome/{v}.0.0.0 Safari/537.36 OPR/{v - 14}.0.0.0", 0.5 * w))
        crios = f"{v}.0.{6000 + 60 * (v - 110) + rng.randrange(50)}.{rng.randrange(30, 150)}"
        for ios in ("17_6", "18_1", "18_2"):
            out.append((f"Mozilla/5.0 (iPhone; CPU iPhone OS {ios} like Mac OS X) AppleWebKit/605.1.15 "
                        f"(KHTML, like Gecko) CriOS/{crios} Mobile/15E148 Safari/604.1", 0.4 * w))
    # Chrome on Android before the reduction, or WebViews: the device model.
    for model in ("SM-A536B", "SM-G991B", "Pixel 7", "Redmi Note 12", "moto g(30)", "CPH2451"):
        for v in (118, 124, 130):
            out.append((f"Mozilla/5.0 (Linux; Android 13; {model}) AppleWebKit/537.36 (KHTML, like Gecko) "
                        f"Chrome/{v}.0.6{v % 10}{v % 7}3.{rng.randrange(40, 200)} Mobile Safari/537.36", 20))
    for v in range(115, 134):
        w = 1 + (v - 114) ** 2
        out.append((f"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 3 * w))
        out.append((f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", w))
        out.append((f"Mozilla/5.0 (X11; Linux x86_64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", w))
        out.append((f"Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", w))
        out.append((f"Mozilla/5.0 (Android 14; Mobile; rv:{v}.0) Gecko/{v}.0 Firefox/{v}.0", 0.5 * w))
        out.append((f"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 "
                    f"(KHTML, like Gecko) FxiOS/{v}.0 Mobile/15E148 Safari/605.1.15", 0.2 * w))
    safari = [("16_7_10", "16.6"), ("17_4_1", "17.4.1"), ("17_5", "17.5"), ("17_6_1", "17.6"),
              ("18_0", "18.0"), ("18_0_1", "18.0.1"), ("18_1", "18.1"), ("18_1_1", "18.1.1"), ("18_2", "18.2")]
    for i, (ios, ver) in enumerate(safari):
        w = 40 + 40 * i
        out.append((f"Mozilla/5.0 (iPhone; CPU iPhone OS {ios} like Mac OS X) AppleWebKit/605.1.15 "
                    f"(KHTML, like Gecko) Version/{ver} Mobile/15E148 Safari/604.1", 6 * w))
        out.append((f"Mozilla/5.0 (iPad; CPU OS {ios} like Mac OS X) AppleWebKit/605.1.15 "
                    f"(KHTML, like Gecko) Version/{ver} Mobile/15E148 Safari/604.1", w))
        out.append((f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 "
                    f"(KHTML, like Gecko) Version/{ver} Safari/605.1.15", 2 * w))
    for model in ("SM-S921B", "SM-S918B", "SM-A546B", "SM-A146P", "SM-G990B", "SM-X710"):
        for sv, cv in (("24.0", 117), ("25.0", 121), ("26.0", 122), ("27.0", 125)):
            out.append((f"Mozilla/5.0 (Linux; Android 14; SAMSUNG {model}) AppleWebKit/537.36 "
                        f"(KHTML, like Gecko) SamsungBrowser/{sv} Chrome/{cv}.0.0.0 Mobile Safari/537.36", 30))
    return out


# name, share of all requests (before the day curve), User-Agents, address source, kind of paths
GOOGLE_CHROME = ["130.0.6723.116", "131.0.6778.69", "131.0.6778.85", "131.0.6778.108"]
ROBOTS = [
    ("googlebot", 8.0, [
        *(f"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) "
          f"Chrome/{c} Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
          for c in GOOGLE_CHROME),
        *(f"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; "
          f"+http://www.google.com/bot.html) Chrome/{c} Safari/537.36" for c in GOOGLE_CHROME[:2]),
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "Googlebot-Image/1.0",
     ], "google", "crawl"),
    ("bingbot", 4.0, [
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; "
        "+http://www.bing.com/bingbot.htm) Chrome/131.0.0.0 Safari/537.36",
        "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/131.0.0.0 Mobile Safari/537.36 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
        "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
     ], "bing", "crawl"),
    ("applebot", 1.0, [
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
     ], "random", "crawl"),
    ("yandex", 1.5, ["Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
                     "Mozilla/5.0 (compatible; YandexImages/3.0; +http://yandex.com/bots)"], "random", "crawl"),
    ("baidu", 1.0, ["Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)"],
     "random", "crawl"),
    ("duckduckbot", 0.4, ["DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)"], "random", "crawl"),
    ("seznam", 0.6, ["Mozilla/5.0 (compatible; SeznamBot/4.0; +https://o-seznam.cz/napoveda/vyhledavani/en/seznambot-crawler/)"],
     "random", "crawl"),
    ("gptbot", 2.5, ["Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"],
     "random", "crawl"),
    ("oai-search", 0.4, ["Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; "
                         "+https://openai.com/searchbot"], "random", "crawl"),
    ("claudebot", 2.5, ["Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; "
                        "+claudebot@anthropic.com)"], "random", "crawl"),
    ("perplexity", 0.6, ["Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; "
                         "+https://perplexity.ai/perplexitybot)"], "random", "crawl"),
    ("ccbot", 1.0, ["CCBot/2.0 (https://commoncrawl.org/faq/)"], "random", "crawl"),
    ("bytespider", 2.0, ["Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) "
                         "Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)"],
     "random", "crawl"),
    ("amazonbot", 0.8, ["Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Amazonbot/0.1; "
                        "+https://developer.amazon.com/support/amazonbot) Chrome/119.0.6045.214 Safari/537.36"],
     "random", "crawl"),
    ("ahrefs", 2.0, ["Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)"], "random", "crawl"),
    ("semrush", 1.5, ["Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)"],
     "random", "crawl"),
    ("mj12", 0.8, ["Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)"], "random", "crawl"),
    ("dotbot", 0.4, ["Mozilla/5.0 (compatible; DotBot/1.2; +https://opensiteexplorer.org/dotbot; help@moz.com)"],
     "random", "crawl"),
    ("petalbot", 0.5, ["Mozilla/5.0 (Linux; Android 7.0;) AppleWebKit/537.36 (KHTML, like Gecko) "
                       "Mobile Safari/537.36 (compatible; PetalBot;+https://webmaster.petalsearch.com/site/petalbot)"],
     "random", "crawl"),
    ("facebook", 0.6, ["facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"],
     "random", "preview"),
    ("uptimerobot", 0.5, ["Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)"],
     "monitor", "monitor"),
    ("curl", 0.5, ["curl/7.88.1", "curl/8.5.0", "curl/8.11.0"], "random", "script"),
    ("python-requests", 0.7, ["python-requests/2.31.0", "python-requests/2.32.3"], "random", "scan"),
    ("go-http", 0.6, ["Go-http-client/1.1", "Go-http-client/2.0"], "random", "scan"),
    ("wget", 0.2, ["Wget/1.21.3"], "random", "script"),
    ("empty", 0.6, ["-"], "random", "scan"),
]
# Share of all requests made by browsers; the robots' shares above are
# scaled to fill the rest.
BROWSER_SHARE = 0.60


# === Addresses ===

def public_v4(rng):
    """A random unicast address outside private, shared, loopback,
    link-local, multicast and documentation space."""
    while True:
        a = rng.randrange(1, 224)
        if a in (10, 100, 127, 169, 172, 192, 198, 203):
            continue
        return f"{a}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"


def public_v6(rng):
    return "2a0{}:{:x}:{:x}:{:x}::{:x}".format(rng.randrange(10), rng.randrange(0x10, 0xffff),
                                              rng.randrange(0xffff), rng.randrange(0xffff),
                                              rng.randrange(1, 0xffff))


def in_prefix(rng, prefix):
    net = ipaddress.ip_network(prefix)
    if net.num_addresses <= 2:
        return str(net.network_address)
    if net.version == 4:
        return str(net.network_address + rng.randrange(1, net.num_addresses - 1))
    return str(net.network_address + rng.randrange(1, 1 << 32))


def google_prefixes():
    with open(GOOGLE_LIST) as f:
        doc = json.load(f)
    return [p.get("ipv4Prefix") or p.get("ipv6Prefix") for p in doc["prefixes"]]


def robot_addresses(rng, source, google):
    """A robot's pool of client addresses (repeats give the weights)."""
    if source in ("google", "bing"):
        prefixes = google if source == "google" else BING_PREFIXES
        # About three in four (77 %) from the published ranges, the rest spoofers.
        own = [in_prefix(rng, prefixes[i % len(prefixes)]) for i in range(48)]
        spoof = [public_v4(rng) for _ in range(12)]
        return own * 4 + spoof * 4 + [public_v4(rng) for _ in range(8)]
    if source == "monitor":
        return [public_v4(rng) for _ in range(6)]
    pool = [public_v4(rng) for _ in range(40)]
    if rng.random() < 0.3:
        pool += [public_v6(rng) for _ in range(10)]
    return pool


# === Requests ===

class Paths:
    """Picks request lines, statuses, sizes and referrers of the site."""

    def __init__(self, rng):
        self.r = rng.random
        self.bits = rng.getrandbits
        n = len(WORDS)
        self.titles = [f"{WORDS[i % n]}_{WORDS[(i * 7 + 3) % n]}" + (f"_{i}" if i >= n * n // 2 else "")
                       for i in range(6000)]
        self.images = [f"/img/{WORDS[i % n].lower()}-{i}.jpg" for i in range(3000)]

    def page(self):
        """A page view: (path, kind), kind in page, legacy, action, facet, topic."""
        x = self.r()
        t = self.titles[int(self.r() ** 2 * 6000)]
        if x < 0.30:
            return f"/wiki/{t}", "page"
        if x < 0.40:
            return f"/index.php?title={t}", "legacy"
        if x < 0.47:
            return f"/index.php?title={t}&action=history", "action"
        if x < 0.55:
            return f"/doku.php?id={DOKU_NS[int(self.r() * 10)]}", "page"
        if x < 0.60:
            return f"/doku.php?id={DOKU_NS[int(self.r() * 10)]}&do={DOKU_DO[int(self.r() * 8)]}", "action"
        if x < 0.75:
            return f"/forum/viewtopic.php?t={1 + int(self.r() * 48000)}", "topic"
        if x < 0.80:
            return f"/forum/viewforum.php?f={1 + int(self.r() * 40)}&start={25 * int(self.r() * 40)}", "page"
        if x < 0.95:
            q = f"/shop/list.php?cat={1 + int(self.r() * 60)}"
            if self.r() < 0.6:
                q += f"&sort={SHOP_SORT[int(self.r() * 6)]}"
            if self.r() < 0.4:
                q += f"&page={2 + int(self.r() * 30)}"
            if self.r() < 0.3:
                q += f"&sessionid={self.bits(64):016x}"
            return q, "facet"
        if x < 0.97:
            return "/", "page"
        if x < 0.985:
            return "/?do=login", "action"
        return f"/shop/item.php?id={1 + int(self.r() * 9000)}&_fid={self.bits(20):05x}", "action"

    def answer(self, kind, human):
        """(status, bytes) for a page of this kind."""
        x = self.r()
        if x < 0.004:
            return (503, 597) if x < 0.002 else (500, 4312)
        if kind == "legacy":
            return 301, 0 if self.r() < 0.5 else 169
        if kind == "topic" and x < 0.06:
            return 410, 1180
        if x < 0.035:
            return 404, 3108 + int(self.r() * 40)
        if human and x < 0.10:
            return 304, 0
        if kind == "action" and x < 0.12:
            return 302, 0
        if kind == "facet":
            return 200, 20000 + int(self.r() * 70000)
        return 200, 9000 + int(self.r() * 55000)

    def asset(self):
        """A static file: (path, status, bytes)."""
        if self.r() < 0.55:
            path = CSS[int(self.r() * len(CSS))]
            size = 900 + int(self.r() * 41000)
        else:
            path = self.images[int(self.r() ** 1.5 * 3000)]
            size = 12000 + int(self.r() * 408000)
        x = self.r()
        if x < 0.22:
            return path, 304, 0
        if x < 0.23:
            return path, 404, 3108
        return path, 200, size


def minute_counts(lines):
    """Lines per minute over DAYS days, and the share of browsers in each
    hour of the day, so that people follow the day and robots do not."""
    def people(h):  # lowest at 4:00, highest in the late afternoon
        return 0.08 + (0.5 - 0.5 * math.cos(2 * math.pi * (h - 4.5) / 24)) ** 1.6

    minutes = DAYS * 24 * 60
    p = [people(m / 60 % 24) * (0.75 if (m // 1440) % 7 >= 5 else 1.0) for m in range(minutes)]
    mean_p = sum(p) / minutes
    robots = (1 - BROWSER_SHARE) / BROWSER_SHARE * mean_p  # flat
    # A little wobble from minute to minute, deterministic.
    w = [(pm + robots) * (0.85 + 0.3 * ((m * 2654435761) % 997) / 997) for m, pm in enumerate(p)]
    total = sum(w)
    counts, acc, done = [], 0.0, 0
    for m in range(minutes):
        acc += w[m] * lines / total
        c = int(acc) - done
        counts.append(c)
        done += c
    counts[-1] += lines - done
    share = [p[m] / (p[m] + robots) for m in range(minutes)]
    return counts, share


def stamps(counts):
    """Yields each line's `[$time_local]` string, in order."""
    for m, c in enumerate(counts):
        if not c:
            continue
        t = time.gmtime(START + 3600 + m * 60)  # the site's local time (UTC+1)
        head = f"[{t.tm_mday:02d}/{MONTHS[t.tm_mon - 1]}/{t.tm_year}:{t.tm_hour:02d}:{t.tm_min:02d}:"
        secs = [f"{head}{s:02d}{OFFSET}]" for s in range(60)]
        for j in range(c):
            yield secs[j * 60 // c]


def generate(out, lines, max_bytes, seed):
    """Writes up to `lines` lines (and at most `max_bytes` bytes if set);
    returns (lines, bytes) written."""
    rng = random.Random(seed)
    r = rng.random
    google = google_prefixes()
    paths = Paths(rng)

    # Browsers: a pool of visitors (address, User-Agent), some returning often.
    uas = browser_uas(rng)
    ua_pick = rng.choices([u for u, _ in uas], weights=[w for _, w in uas], k=4096)
    visitors = []
    for _ in range(60000):
        ip = public_v6(rng) if r() < 0.18 else public_v4(rng)
        visitors.append((ip, ua_pick[int(r() * 4096)]))
    # Robots: each one's pool of (address, User-Agent) and kind of paths.
    scale = sum(s for _, s, *_ in ROBOTS)
    robot_table, robot_pools = [], []
    for i, (_, share, agents, source, kind) in enumerate(ROBOTS):
        addrs = robot_addresses(rng, source, google)
        robot_pools.append(([(a, agents[int(r() * len(agents))]) for a in addrs for _ in range(2)], kind))
        robot_table += [i] * max(1, round(share / scale * 4096))

    counts, share = minute_counts(lines)
    ts = stamps(counts)
    page, answer, asset = paths.page, paths.answer, paths.asset
    n_vis, n_robot = len(visitors), len(robot_table)
    written = size = 0
    minute = 0
    left_in_minute = counts[0]
    buf = []
    while written < lines:
        for _ in range(min(BATCH, lines - written)):
            while left_in_minute == 0:
                minute += 1
                left_in_minute = counts[minute]
            left_in_minute -= 1
            stamp = next(ts)
            if r() < share[minute]:
                ip, ua = visitors[int(r() ** 1.3 * n_vis)]
                proto = "HTTP/2.0" if r() < 0.7 else "HTTP/1.1"
                if r() < 0.55:
                    path, status, nbytes = asset()
                    ref = f"{SITE}/wiki/{paths.titles[int(r() * 400)]}"
                else:
                    path, kind = page()
                    status, nbytes = answer(kind, True)
                    x = r()
                    ref = (SEARCH_REFS[int(r() * 8)] if x < 0.3 else
                           f"{SITE}/wiki/{paths.titles[int(r() * 600)]}" if x < 0.75 else "-")
                method = "POST" if path == "/?do=login" and r() < 0.4 else "GET"
            else:
                pool, kind = robot_pools[robot_table[int(r() * n_robot)]]
                ip, ua = pool[int(r() * len(pool))]
                proto, ref, method = "HTTP/1.1", "-", "GET"
                x = r()
                if kind == "crawl":
                    if x < 0.012:
                        path, status, nbytes = "/robots.txt", 200, 412
                    elif x < 0.02:
                        path, status, nbytes = "/sitemap.xml", 200, 18224
                    elif x < 0.10:
                        path, status, nbytes = asset()
                        if status == 304:  # robots rarely revalidate
                            status, nbytes = 200, 900 + int(r() * 41000)
                    else:
                        path, kind2 = page()
                        status, nbytes = answer(kind2, False)
                elif kind == "monitor":
                    path, status, nbytes, method = "/", 200, 0, "HEAD"
                elif kind == "preview":
                    path, kind2 = page()
                    status, nbytes = answer(kind2, False)
                elif kind == "script":
                    path, status, nbytes = ("/", 200, 23871) if x < 0.6 else ("/sitemap.xml", 200, 18224)
                else:  # scan
                    if x < 0.5:
                        path, status, nbytes = SCAN[int(r() * len(SCAN))], 404, 3108
                    else:
                        path, kind2 = page()
                        status, nbytes = answer(kind2, False)
            buf.append(f'{ip} - - {stamp} "{method} {path} {proto}" {status} {nbytes} "{ref}" "{ua}"\n')
        data = "".join(buf).encode()
        buf.clear()
        if max_bytes is not None and size + len(data) > max_bytes:
            cut = data.rfind(b"\n", 0, max_bytes - size) + 1
            written += data[:cut].count(b"\n")
            out.write(data[:cut])
            size += cut
            return written, size
        out.write(data)
        size += len(data)
        written = written + data.count(b"\n")
    return written, size


def write_ranges(folder, google):
    """The range lists the log was made with, in the operators' shape."""
    os.makedirs(folder, exist_ok=True)

    def doc(prefixes):
        return {"creationTime": "2026-11-30T00:00:00.000000",
                "prefixes": [{("ipv6Prefix" if ":" in p else "ipv4Prefix"): p} for p in prefixes]}
    # Named as `crawlgate report --ranges` reads them: <operator>.<list>.json.
    for name, prefixes in (("google.common-crawlers.json", google), ("bing.bingbot.json", BING_PREFIXES)):
        with open(os.path.join(folder, name), "w") as f:
            json.dump(doc(prefixes), f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--size", help="about this many bytes (1G, 256M, 10k); never more")
    group.add_argument("--lines", type=int, help="exactly this many lines")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="-", help="file to write, - for standard output")
    ap.add_argument("--ranges-out", help="write the range lists the log was made with here (as crawlgate report --ranges reads them)")
    args = ap.parse_args()

    if args.ranges_out:
        write_ranges(args.ranges_out, google_prefixes())
    if args.lines is not None:
        lines, max_bytes = args.lines, None
    else:
        max_bytes = parse_size(args.size)
        # Plan the week's timeline for the number of lines the size holds:
        # measure the mean line length on a sample of the same generator.
        sample = _Count()
        n, b = generate(sample, 50000, None, args.seed + 7919)
        lines = int(max_bytes / (b / n) * 1.003) + 10
    out = sys.stdout.buffer if args.out == "-" else open(args.out, "wb")
    started = time.monotonic()
    n, b = generate(out, lines, max_bytes, args.seed)
    out.flush()
    if out is not sys.stdout.buffer:
        out.close()
    took = time.monotonic() - started
    print(f"report_log: {n} lines, {b} bytes, {b / max(n, 1):.0f} bytes/line, "
          f"{n / max(took, 1e-9):,.0f} lines/s", file=sys.stderr)


class _Count:
    """A sink that only counts."""

    def write(self, data):
        return len(data)


if __name__ == "__main__":
    main()
