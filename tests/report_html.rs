//! The HTML crawl report in a real browser. A realistic report built by
//! hand (six robots and the humans over 48 hourly buckets, spoofers,
//! waste) is written with `crawlgate::report::html::write` and opened in
//! headless Chromium: the DOM it parsed has the summary, the class table
//! and a chart with bars, the screenshot is a real picture, and the
//! console stayed silent (the page has no script; Chromium's console
//! log on standard error, `--enable-logging=stderr`, would also show a
//! Content-Security-Policy refusal of anything the page tried to load).
//! Then the real binary reads a log of hostile requests (markup, quotes,
//! ESC, bidi controls, NUL and invalid UTF-8 in paths, User-Agents and
//! Referers) and its HTML and text reports show all of it escaped.
//!
//! Chromium is optional: without `/usr/bin/chromium` the browser checks
//! print one line and return, unless `CRAWLGATE_REQUIRE_CHROMIUM=1`,
//! which makes that a failure. `CRAWLGATE_REPORT_HTML_KEEP=DIR` copies
//! the realistic page and its screenshot to DIR.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crawlgate::report::model::*;

const BIN: &str = env!("CARGO_BIN_EXE_crawlgate");
const CHROMIUM: &str = "/usr/bin/chromium";
/// The variable that makes a missing Chromium a failure.
const REQUIRE: &str = "CRAWLGATE_REQUIRE_CHROMIUM";
/// A folder to copy the realistic page and its screenshot to, to look
/// at them.
const KEEP: &str = "CRAWLGATE_REPORT_HTML_KEEP";
/// How long one Chromium run may take before it is killed.
const LIMIT: Duration = Duration::from_secs(60);
/// 2026-12-01T00:00:00Z.
const START: i64 = 1_796_083_200;
const HOURS: usize = 48;

/// Whether Chromium is here; prints the one SKIPPED line when not (or
/// fails when it is required).
fn chromium_here() -> bool {
    if Path::new(CHROMIUM).is_file() {
        return true;
    }
    let required = std::env::var_os(REQUIRE).is_some_and(|v| !v.is_empty() && v != "0");
    assert!(!required, "{REQUIRE} is set but {CHROMIUM} is missing");
    eprintln!("SKIPPED: chromium not installed (apt-get install chromium)");
    false
}

/// What one Chromium run wrote.
struct Browser {
    stdout: String,
    stderr: String,
}

/// Runs headless Chromium on `page` with `extra` flags, in a fresh
/// profile under `dir`; killed (its whole process group) after [`LIMIT`].
fn chromium(dir: &Path, page: &Path, extra: &[String]) -> Browser {
    use std::os::unix::process::CommandExt;
    let profile = tempfile::tempdir_in(dir).expect("a profile folder");
    let (out, err) = (dir.join("chromium.out"), dir.join("chromium.err"));
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(File::create(&out).expect("stdout file"))
        .stderr(File::create(&err).expect("stderr file"))
        .process_group(0)
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        match child.try_wait().expect("wait for chromium") {
            Some(status) => break status,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            None => {
                let group = format!("-{}", child.id());
                let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
                let _ = child.wait();
                panic!("chromium ran longer than {LIMIT:?} on {}", page.display());
            }
        }
    };
    let read =
        |p: &PathBuf| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    let browser = Browser {
        stdout: read(&out),
        stderr: read(&err),
    };
    assert!(
        status.success(),
        "chromium failed ({status}): {}",
        browser.stderr
    );
    browser
}

/// Console messages Chromium logged for the page: none expected (no
/// script runs; a refused load would be one).
fn console(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Refused to"))
        .collect()
}

/// The DOM Chromium parsed from `page`, checked for a silent console.
fn dom(dir: &Path, page: &Path) -> String {
    let run = chromium(dir, page, &["--dump-dom".to_owned()]);
    assert!(
        console(&run.stderr).is_empty(),
        "console: {:?}",
        console(&run.stderr)
    );
    assert!(
        run.stdout.contains("</html>"),
        "no DOM dumped: {}",
        run.stderr
    );
    run.stdout
}

/// A series over the 48 hours: `f(hour)`, the hour of the day in 0..24.
fn curve(f: impl Fn(usize, usize) -> u64) -> Vec<u64> {
    (0..HOURS).map(|h| f(h, h % 24)).collect()
}

/// A little deterministic noise, 0..n.
fn noise(h: usize, seed: usize, n: u64) -> u64 {
    ((h * 7919 + seed * 104_729) % 9973) as u64 % n.max(1)
}

fn count(key: &str, requests: u64) -> Count {
    Count {
        key: key.to_owned(),
        requests,
        error: 0,
    }
}

struct Spec {
    robot: &'static str,
    class: &'static str,
    operator: Option<&'static str>,
    ai: Option<&'static str>,
    chart: Vec<u64>,
    bytes_per: u64,
    /// Verified, unverified, spoofed shares of its requests (per mille).
    claims: (u64, u64, u64),
    /// Per mille of its requests per waste category.
    waste: [u64; 7],
    disallowed: u64,
    paths: &'static [&'static str],
}

fn row(spec: &Spec, total: u64, with_robots: bool) -> Row {
    let n: u64 = spec.chart.iter().sum();
    let part = |per_mille: u64| n * per_mille / 1000;
    let w = spec.waste.map(part);
    let waste = Waste {
        action_urls: w[0],
        robots_and_sitemaps: w[1],
        server_errors: w[2],
        not_found: w[3],
        redirects: w[4],
        repeats: w[5],
        query_variants: w[6],
        total: w.iter().sum(),
    };
    let (s5, s4, s3, s304) = (part(8), part(35), part(30), part(60));
    let human = spec.class == "human";
    let top_paths: Vec<Count> = spec
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| count(p, n / (3 + 2 * i as u64)))
        .collect();
    Row {
        robot: spec.robot.to_owned(),
        class: spec.class.to_owned(),
        operator: spec.operator.map(str::to_owned),
        ai: spec.ai.map(str::to_owned),
        volume: Volume {
            requests: n,
            bytes: n * spec.bytes_per,
        },
        share: n as f64 / total as f64,
        chart: spec.chart.clone(),
        status: Status {
            s2xx: n - s5 - s4 - s3 - s304,
            s3xx: s3,
            s304,
            s4xx: s4,
            s5xx: s5,
            other: 0,
        },
        verification: match spec.operator {
            Some(_) => Verification {
                verified: part(spec.claims.0),
                unverified: part(spec.claims.1),
                spoofed: part(spec.claims.2),
            },
            None => Verification::default(),
        },
        waste: if human { Waste::default() } else { waste },
        robots_txt: (with_robots && !human).then(|| Compliance {
            token: spec.robot.to_owned(),
            group: if spec.disallowed > 0 {
                spec.robot.to_owned()
            } else {
                "*".to_owned()
            },
            disallowed: spec.disallowed,
            paths: (0..spec.disallowed.min(4))
                .map(|i| {
                    count(
                        &format!("/wiki/start?do=edit&rev={i}"),
                        spec.disallowed / (i + 1),
                    )
                })
                .collect(),
        }),
        top_paths,
        top_patterns: vec![
            count("/wiki/{id}", n / 2),
            count("/wiki/{id}?do=", n / 8),
            Count {
                key: "/shop/list.php?cat=&sort=&page=".to_owned(),
                requests: n / 10,
                error: n / 100,
            },
        ],
    }
}

/// Six robots and the humans over two days, as a report of a wiki with
/// a shop would show them.
fn realistic() -> Report {
    let day = |hour: usize| (12.0 - (hour as f64 - 14.0).abs()).max(1.0) as u64;
    let specs = [
        Spec {
            robot: "humans",
            class: "human",
            operator: None,
            ai: None,
            chart: curve(|h, hour| 180 * day(hour) + noise(h, 1, 300)),
            bytes_per: 42_000,
            claims: (0, 0, 0),
            waste: [0; 7],
            disallowed: 0,
            paths: &["/", "/wiki/start", "/shop/", "/wiki/Help"],
        },
        Spec {
            robot: "Googlebot",
            class: "search",
            operator: Some("google"),
            ai: None,
            chart: curve(|h, _| 900 + noise(h, 2, 400)),
            bytes_per: 23_000,
            claims: (1000, 0, 0),
            waste: [12, 4, 6, 30, 20, 110, 40],
            disallowed: 37,
            paths: &[
                "/robots.txt",
                "/wiki/start",
                "/sitemap.xml",
                "/wiki/Release_notes",
            ],
        },
        Spec {
            robot: "GPTBot",
            class: "ai",
            operator: Some("openai"),
            ai: Some("training"),
            chart: curve(|h, hour| {
                if (2..9).contains(&hour) {
                    1500 + noise(h, 3, 900)
                } else {
                    noise(h, 3, 60)
                }
            }),
            bytes_per: 31_000,
            claims: (980, 20, 0),
            waste: [80, 2, 10, 60, 30, 210, 150],
            disallowed: 412,
            paths: &["/wiki/start?do=index", "/wiki/Archive", "/shop/list.php"],
        },
        Spec {
            robot: "AhrefsBot",
            class: "seo",
            operator: None,
            ai: None,
            chart: curve(|h, _| 300 + noise(h, 4, 250)),
            bytes_per: 18_000,
            claims: (0, 0, 0),
            waste: [40, 10, 5, 90, 60, 80, 320],
            disallowed: 0,
            paths: &["/shop/list.php", "/wiki/Sitemap"],
        },
        Spec {
            robot: "ClaudeBot",
            class: "ai",
            operator: Some("anthropic"),
            ai: Some("training"),
            chart: curve(|h, hour| {
                if hour % 6 == 1 {
                    700 + noise(h, 5, 300)
                } else {
                    40 + noise(h, 5, 40)
                }
            }),
            bytes_per: 27_000,
            claims: (1000, 0, 0),
            waste: [20, 3, 4, 40, 10, 60, 30],
            disallowed: 5,
            paths: &["/wiki/start", "/wiki/Archive"],
        },
        Spec {
            robot: "Googlebot",
            class: "unknown",
            operator: Some("google"),
            ai: None,
            chart: curve(|h, _| if h >= 30 { 250 + noise(h, 6, 200) } else { 0 }),
            bytes_per: 9_000,
            claims: (0, 0, 1000),
            waste: [600, 0, 20, 50, 0, 100, 0],
            disallowed: 1290,
            paths: &["/wiki/start?do=login", "/wp-login.php", "/.env"],
        },
        Spec {
            robot: "bingbot",
            class: "search",
            operator: Some("bing"),
            ai: None,
            chart: curve(|h, _| 120 + noise(h, 7, 80)),
            bytes_per: 21_000,
            claims: (950, 50, 0),
            waste: [5, 20, 5, 20, 15, 90, 10],
            disallowed: 0,
            paths: &["/robots.txt", "/wiki/start"],
        },
    ];
    let total: u64 = specs.iter().map(|s| s.chart.iter().sum::<u64>()).sum();
    let mut rows: Vec<Row> = specs.iter().map(|s| row(s, total, true)).collect();
    rows.sort_by_key(|r| (r.class == "human", std::cmp::Reverse(r.volume.requests)));
    let mut classes: Vec<ClassSummary> = Vec::new();
    for r in &rows {
        match classes.iter_mut().find(|c| c.class == r.class) {
            Some(c) => {
                c.volume.requests += r.volume.requests;
                c.volume.bytes += r.volume.bytes;
                c.share += r.share;
                c.chart.iter_mut().zip(&r.chart).for_each(|(a, b)| *a += b);
            }
            None => classes.push(ClassSummary {
                class: r.class.clone(),
                volume: r.volume,
                share: r.share,
                chart: r.chart.clone(),
            }),
        }
    }
    classes.sort_by_key(|c| std::cmp::Reverse(c.volume.requests));
    let operator = |name: &str, blocks: Vec<Count>| {
        let mine = rows.iter().filter(|r| r.operator.as_deref() == Some(name));
        let mut o = OperatorSummary {
            operator: name.to_owned(),
            verified: 0,
            unverified: 0,
            spoofed: 0,
            spoofer_blocks: blocks,
        };
        for r in mine {
            o.verified += r.verification.verified;
            o.unverified += r.verification.unverified;
            o.spoofed += r.verification.spoofed;
        }
        o
    };
    let spoofers = vec![
        count("203.0.113.0/24", 5120),
        count("198.51.100.0/24", 2210),
        count("2001:db8:77::/48", 940),
        count("192.0.2.0/24", 17),
    ];
    let operators = vec![
        operator("google", spoofers),
        operator("openai", Vec::new()),
        operator("anthropic", Vec::new()),
        operator("bing", Vec::new()),
    ];
    let training: Vec<&Row> = rows
        .iter()
        .filter(|r| r.ai.as_deref() == Some("training"))
        .collect();
    let ai = vec![AiSummary {
        purpose: "training".to_owned(),
        volume: Volume {
            requests: training.iter().map(|r| r.volume.requests).sum(),
            bytes: training.iter().map(|r| r.volume.bytes).sum(),
        },
        robots: training
            .iter()
            .map(|r| count(&r.robot, r.volume.requests))
            .collect(),
    }];
    let bytes = rows.iter().map(|r| r.volume.bytes).sum();
    Report {
        generator: "crawlgate 0.1.0".to_owned(),
        input: Input {
            files: vec![
                "/var/log/nginx/access.log".to_owned(),
                "/var/log/nginx/access.log.1".to_owned(),
            ],
            lines: total + 1_234,
            counted: total,
            filtered: 1_100,
            skipped: Skipped {
                unreadable: 120,
                too_long: 2,
                empty: 12,
            },
            without_host: 0,
        },
        first: Some("2026-12-01T00:00:04Z".to_owned()),
        last: Some("2026-12-02T23:59:51Z".to_owned()),
        bucket_seconds: 3600,
        chart_start: START,
        chart_len: HOURS,
        total: Volume {
            requests: total,
            bytes,
        },
        classes,
        operators,
        ai,
        rows,
        robots_txt: Some("/srv/wiki/robots.txt".to_owned()),
        ranges: RangesUsed {
            sources: vec!["/var/lib/crawlgate".to_owned()],
            loaded: vec![
                "google.common-crawlers".to_owned(),
                "openai.gptbot".to_owned(),
            ],
            from_log: 0,
        },
    }
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(
        png.len() > 24 && png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG"
    );
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

#[test]
fn a_realistic_report_renders_in_chromium() {
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("report.html");
    let mut file = File::create(&page).expect("page file");
    crawlgate::report::html::write(&realistic(), &mut file).expect("write the page");
    drop(file);
    if !chromium_here() {
        return;
    }
    let dom = dom(dir.path(), &page);
    assert!(dom.contains("<h2>Summary</h2>"), "no summary heading");
    assert!(dom.contains("<table class=\"classes\">"), "no class table");
    assert!(!dom.contains("<script"), "a script in the DOM");
    let svg = dom.find("<svg").expect("a chart");
    let end = dom[svg..].find("</svg>").expect("a closed chart") + svg;
    let bars = dom[svg..end].matches("<rect").count();
    assert!(bars >= HOURS, "{bars} bars in the first chart");
    assert!(
        dom.contains("href=\"#robot-1\""),
        "rows linked from the summary"
    );
    assert!(dom.contains("id=\"robot-6\""), "the humans' section");

    let png = dir.path().join("report.png");
    let run = chromium(
        dir.path(),
        &page,
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1280,2000".to_owned(),
        ],
    );
    assert!(
        console(&run.stderr).is_empty(),
        "console: {:?}",
        console(&run.stderr)
    );
    let bytes = std::fs::read(&png).expect("a screenshot");
    // A page of one colour compresses to a few KiB; charts and text do not.
    assert!(
        bytes.len() > 20 * 1024,
        "screenshot of {} bytes",
        bytes.len()
    );
    assert_eq!(png_size(&bytes), (1280, 2000));
    if let Some(keep) = std::env::var_os(KEEP) {
        let keep = Path::new(&keep);
        std::fs::copy(&page, keep.join("report.html")).expect("keep the page");
        std::fs::copy(&png, keep.join("report.png")).expect("keep the screenshot");
    }
}

/// A combined-format line with `path`, `referer` and `ua` written raw.
fn line(ip: &str, minute: u32, path: &[u8], referer: &[u8], ua: &[u8]) -> Vec<u8> {
    let mut l = format!("{ip} - - [01/Dec/2026:08:{minute:02}:00 +0000] \"GET ").into_bytes();
    l.extend_from_slice(path);
    l.extend_from_slice(b" HTTP/1.1\" 200 512 \"");
    l.extend_from_slice(referer);
    l.extend_from_slice(b"\" \"");
    l.extend_from_slice(ua);
    l.extend_from_slice(b"\"\n");
    l
}

const HOSTILE_PATHS: [&[u8]; 7] = [
    b"/<script>alert(1)</script>",
    b"/a\\\"onmouseover=alert(1)",
    b"/it's",
    b"/esc\x1b[31mred",
    b"/rlo\xe2\x80\xaeevil",
    b"/bad\xff\xfeutf8",
    b"/nul\x00x",
];

const HOSTILE_UAS: [&[u8]; 4] = [
    b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    b"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    b"<script>alert(2)</script>",
    b"evilbot\x1b[2J\xe2\x80\xae\xff/1.0",
];

/// Whether `out` holds log text raw that must never reach a reader so.
fn assert_no_raw(out: &[u8], what: &str) {
    assert!(!out.contains(&0x1b), "{what}: a raw ESC");
    assert!(!out.contains(&0), "{what}: a raw NUL");
    assert!(
        !out.windows(3).any(|w| w == "\u{202e}".as_bytes()),
        "{what}: a raw RLO"
    );
    assert!(std::str::from_utf8(out).is_ok(), "{what}: not UTF-8");
}

#[test]
fn the_binary_escapes_a_hostile_log_in_html_and_text() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("hostile.log");
    // The paths with control characters twice, so that they are among
    // the five the text form lists.
    let mut text = Vec::new();
    let mut lines = 0;
    for (n, path) in HOSTILE_PATHS.iter().enumerate() {
        for _ in 0..1 + usize::from(n >= 3) {
            for ua in HOSTILE_UAS {
                let referer = b"http://x/<script>\x1b[31m\\\"'";
                text.extend(line("198.51.100.7", n as u32, path, referer, ua));
                lines += 1;
            }
        }
    }
    std::fs::write(&log, text).expect("write the log");
    let page = dir.path().join("report.html");
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(["report", "-q"])
            .args(args)
            .arg(&log)
            .output()
            .expect("run crawlgate report");
        assert!(
            out.status.success(),
            "report failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let json: serde_json::Value =
        serde_json::from_slice(&run(&["--format", "json"])).expect("a JSON report");
    assert_eq!(json["input"]["counted"], lines, "every hostile line read");
    run(&[
        "--format",
        "html",
        "--out",
        page.to_str().expect("a UTF-8 temp path"),
    ]);
    let html = std::fs::read(&page).expect("the page");
    assert_no_raw(&html, "html");
    let html = String::from_utf8(html).expect("UTF-8");
    assert!(
        !html.to_ascii_lowercase().contains("<script"),
        "a raw script tag"
    );
    assert!(
        html.contains("/&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the path escaped"
    );
    assert!(html.contains("/a\\&quot;onmouseover=alert(1)"));
    assert!(html.contains("/it&#39;s"));
    assert!(html.contains("/esc<span class=\"esc\">\\u{1b}</span>[31mred"));
    assert!(html.contains("/rlo<span class=\"esc\">\\u{202e}</span>evil"));
    assert!(html.contains("/nul<span class=\"esc\">\\u{0}</span>x"));
    assert!(html.contains("/bad\u{fffd}\u{fffd}utf8"));

    let text = run(&["--format", "text"]);
    assert_no_raw(&text, "text");
    let text = String::from_utf8(text).expect("UTF-8");
    assert!(text.contains("/esc\\x1b[31mred"), "{text}");
    assert!(text.contains("/rlo\\u{202e}evil"), "{text}");
    assert!(text.contains("/nul\\x00x"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");

    if !chromium_here() {
        return;
    }
    let dom = dom(dir.path(), &page);
    assert!(!dom.contains("<script"), "a script element in the DOM");
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}
