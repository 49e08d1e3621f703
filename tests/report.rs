//! `crawlgate report` on small logs written for the tests: the JSON report
//! against a golden file, gzip and standard input read alike, the log's own
//! verification verdicts, a robots.txt given or synthesized from a config,
//! the filters, and hostile input (a line of many megabytes, binary junk)
//! counted and skipped in bounded memory.
//!
//! `CRAWLGATE_UPDATE_GOLDEN=1 cargo test --test report` rewrites the golden
//! files from what the binary writes now (then read the diff).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_crawlgate");

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report")
}

/// `crawlgate report ARGS…` in `dir`, with `stdin` fed in.
fn report_in(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(BIN)
        .arg("report")
        .args(args)
        .current_dir(dir)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run crawlgate report");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input).expect("feed stdin");
    }
    child.wait_with_output().expect("report ran")
}

/// The JSON report of a successful run, its generator blanked (it
/// carries the version and commit).
fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    report["generator"] = Value::from("crawlgate");
    report
}

fn row<'a>(report: &'a Value, robot: &str, class: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["robot"] == robot && r["class"] == class)
        .unwrap_or_else(|| panic!("no row {robot}/{class}: {report:#}"))
}

/// Compares `got` with the golden file `name`, or rewrites it.
fn golden(name: &str, got: &str) {
    let path = data().join(name);
    if std::env::var_os("CRAWLGATE_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).expect("write golden");
        return;
    }
    let want =
        std::fs::read_to_string(&path).expect("golden file (CRAWLGATE_UPDATE_GOLDEN=1 writes it)");
    assert!(
        want == got,
        "{} differs from what the binary writes now; if the change is meant, rerun with CRAWLGATE_UPDATE_GOLDEN=1 and read the diff",
        path.display()
    );
}

const SITE_ARGS: [&str; 7] = [
    "--ranges",
    "ranges",
    "--robots",
    "robots.txt",
    "--format",
    "json",
    "site.log",
];

#[test]
fn a_small_site_log_gives_the_golden_report() {
    let report = json(&report_in(&data(), &SITE_ARGS, None));
    golden(
        "site.json",
        &(serde_json::to_string_pretty(&report).expect("json") + "\n"),
    );
    // What the golden file says, spelled out.
    let input = &report["input"];
    assert_eq!(input["lines"], 56);
    assert_eq!(input["counted"], 53);
    assert_eq!(input["skipped"]["unreadable"], 2, "text and binary junk");
    assert_eq!(input["skipped"]["empty"], 1);
    let google = row(&report, "Googlebot", "search");
    assert_eq!(google["verification"]["verified"], 17);
    assert_eq!(google["waste"]["repeats"], 8, "four pages every 40 minutes");
    assert_eq!(google["waste"]["action_urls"], 1);
    assert_eq!(google["robots_txt"]["disallowed"], 1, "/*&do=");
    let spoofed = row(&report, "Googlebot", "unknown");
    assert_eq!(spoofed["verification"]["spoofed"], 6);
    let blocks = &report["operators"]
        .as_array()
        .expect("operators")
        .iter()
        .find(|o| o["operator"] == "google")
        .expect("google")["spoofer_blocks"];
    assert_eq!(blocks[0]["key"], "198.51.100.0/24");
    assert_eq!(blocks[0]["requests"], 5);
    let ahrefs = row(&report, "AhrefsBot", "seo");
    assert_eq!(ahrefs["robots_txt"]["group"], "AhrefsBot");
    assert_eq!(ahrefs["robots_txt"]["disallowed"], 9);
    assert_eq!(
        ahrefs["waste"]["query_variants"], 4,
        "the 5th to 8th sort/page variant"
    );
    assert_eq!(
        row(&report, "ClaudeBot", "ai")["verification"]["verified"],
        4
    );
    assert_eq!(
        row(&report, "GPTBot", "ai")["robots_txt"]["disallowed"],
        2,
        "Disallow: /"
    );
    let humans = row(&report, "humans", "human");
    assert_eq!(humans["volume"]["requests"], 10);
    assert_eq!(
        humans["waste"]["total"], 0,
        "a person's visit is not crawl budget"
    );
    assert_eq!(
        report["rows"]
            .as_array()
            .expect("rows")
            .last()
            .expect("a row")["robot"],
        "humans"
    );
}

#[test]
fn gzip_rotated_files_and_standard_input_read_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = std::fs::read(data().join("site.log")).expect("site.log");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&log).expect("gzip");
    std::fs::write(dir.path().join("site.log.2.gz"), gz.finish().expect("gzip")).expect("write");
    std::fs::copy(data().join("robots.txt"), dir.path().join("robots.txt")).expect("copy");
    let ranges = data().join("ranges");
    let ranges = ranges.to_str().expect("utf-8 path");
    let args = |log: &'static str| {
        [
            "--ranges",
            ranges,
            "--robots",
            "robots.txt",
            "--format",
            "json",
            log,
        ]
    };
    let plain = json(&report_in(&data(), &SITE_ARGS, None));
    let gzip = json(&report_in(dir.path(), &args("site.log.2.gz"), None));
    let stdin = json(&report_in(dir.path(), &args("-"), Some(&log)));
    for mut other in [gzip, stdin] {
        other["input"]["files"] = plain["input"]["files"].clone();
        other["ranges"]["sources"] = plain["ranges"]["sources"].clone();
        assert_eq!(other, plain);
    }
    // Two rotated files in one report: every count doubles.
    let both = json(&report_in(
        dir.path(),
        &["--ranges", ranges, "--format", "json", "site.log.2.gz", "-"],
        Some(&log),
    ));
    assert_eq!(both["input"]["counted"], 106);
    assert_eq!(
        both["input"]["files"],
        serde_json::json!(["site.log.2.gz", "-"])
    );
}

/// crawlgate's own lines: what it logged as verified (DNS included, at
/// the time) is taken over what the lists say now.
#[test]
fn crawlgate_lines_bring_their_own_verification() {
    let log = concat!(
        "192.0.2.9 - - [01/Dec/2026:10:00:00 +0000] \"GET http://example.com/a HTTP/1.1\" 200 10 \"-\" \"Googlebot/2.1\" class=search rule=\"search:Googlebot\" decision=forward upstream=0.001 total=0.002 verified=dns\n",
        "{\"time\":\"2026-12-01T10:00:01Z\",\"client\":\"192.0.2.9\",\"method\":\"GET\",\"host\":\"example.com\",\"path\":\"/b\",\"query\":\"do=edit\",\"status\":403,\"bytes_out\":0,\"user_agent\":\"Googlebot/2.1\",\"decision\":\"block\",\"enforced\":true,\"verified\":\"spoofed\"}\n",
        "{\"time\":\"2026-12-01T10:00:02Z\",\"client\":\"192.0.2.9\",\"host\":\"other.example\",\"path\":\"/c\",\"status\":200,\"user_agent\":\"Googlebot/2.1\"}\n",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let report = json(&report_in(
        dir.path(),
        &["--format", "json", "--host", "EXAMPLE.com"],
        Some(log.as_bytes()),
    ));
    assert_eq!(report["input"]["filtered"], 1, "other.example");
    assert_eq!(report["ranges"]["from_log"], 2);
    assert_eq!(
        row(&report, "Googlebot", "search")["verification"]["verified"],
        1
    );
    let spoofed = row(&report, "Googlebot", "unknown");
    assert_eq!(spoofed["verification"]["spoofed"], 1);
    assert_eq!(spoofed["waste"]["action_urls"], 1);
}

#[test]
fn the_robots_txt_is_the_one_crawlgate_would_synthesize_from_the_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("crawlgate.toml");
    std::fs::write(&config, "upstream = \"http://127.0.0.1:9\"\n[block]\nparams = [\"act\"]\n[robots]\ndisallow = [\"/admin/\"]\n").expect("config");
    let log = concat!(
        "192.0.2.1 - - [01/Dec/2026:10:00:00 +0000] \"GET /wiki?act=edit HTTP/1.1\" 200 1 \"-\" \"Mozilla/5.0 (compatible; bingbot/2.0)\"\n",
        "192.0.2.1 - - [01/Dec/2026:10:00:01 +0000] \"GET /admin/users HTTP/1.1\" 200 1 \"-\" \"Mozilla/5.0 (compatible; bingbot/2.0)\"\n",
        "192.0.2.1 - - [01/Dec/2026:10:00:02 +0000] \"GET /wiki?do=edit HTTP/1.1\" 200 1 \"-\" \"Mozilla/5.0 (compatible; bingbot/2.0)\"\n",
    );
    let report = json(&report_in(
        dir.path(),
        &["--format", "json", "--config", "crawlgate.toml"],
        Some(log.as_bytes()),
    ));
    assert_eq!(report["robots_txt"], "synthesized from crawlgate.toml");
    let bing = row(&report, "bingbot", "search");
    assert_eq!(bing["robots_txt"]["disallowed"], 2, "{bing:#}");
    assert_eq!(
        bing["waste"]["action_urls"], 1,
        "act is this site's action parameter, do is not"
    );
}

#[test]
fn since_and_until_bound_the_period() {
    let log = std::fs::read(data().join("site.log")).expect("site.log");
    let dir = tempfile::tempdir().expect("tempdir");
    let all = json(&report_in(dir.path(), &["--format", "json"], Some(&log)));
    let early = json(&report_in(
        dir.path(),
        &["--format", "json", "--until", "2026-12-01T09:00:00Z"],
        Some(&log),
    ));
    let late = json(&report_in(
        dir.path(),
        &["--format", "json", "--since", "2026-12-01T09:00:00Z"],
        Some(&log),
    ));
    let counted = |r: &Value| r["input"]["counted"].as_u64().expect("counted");
    assert!(counted(&early) > 0 && counted(&late) > 0);
    assert_eq!(counted(&early) + counted(&late), counted(&all));
    assert!(early["last"].as_str().expect("last") < "2026-12-01T09:00:00Z");
    assert_eq!(late["input"]["filtered"], early["input"]["counted"]);
}

/// VmHWM of a running process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn a_huge_line_and_binary_junk_are_counted_and_skipped_in_bounded_memory() {
    let mut child = Command::new(BIN)
        .args(["report", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let mut stdin = child.stdin.take().expect("stdin");
    // 64 MiB without a line end, then junk, then one good line.
    let chunk = vec![b'A'; 1 << 20];
    for _ in 0..64 {
        stdin.write_all(&chunk).expect("feed");
    }
    stdin
        .write_all(b"\n\x00\x01\xfe\xff\x1b[2J junk\n")
        .expect("feed");
    stdin
        .write_all(b"192.0.2.1 - - [01/Dec/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"curl/8\"\n")
        .expect("feed");
    stdin.flush().expect("flush");
    // Still running, waiting for more: the peak so far is the peak of
    // reading the huge line.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let peak = peak_rss_kib(child.id());
    drop(stdin);
    let report = json(&child.wait_with_output().expect("ran"));
    assert_eq!(report["input"]["skipped"]["too_long"], 1);
    assert_eq!(report["input"]["skipped"]["unreadable"], 1);
    assert_eq!(report["input"]["counted"], 1);
    assert!(
        peak < 48 * 1024,
        "peak RSS {peak} KiB while reading a 64 MiB line"
    );
}

#[test]
fn bad_input_and_flags_fail_with_one_clear_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: [(&[&str], i32, &str); 4] = [
        (&["missing.log"], 65, "missing.log: No such file"),
        (&["--since", "yesterday", "x.log"], 2, "is not a time"),
        (
            &["--ranges", "nowhere", "x.log"],
            64,
            "nowhere: no such folder",
        ),
        (&["--config", "nope.toml", "x.log"], 64, "nope.toml"),
    ];
    for (args, code, says) in cases {
        let out = report_in(dir.path(), args, None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn out_replaces_the_file_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("report.json");
    std::fs::write(&out, "old").expect("old");
    let log = std::fs::read(data().join("site.log")).expect("site.log");
    let run = report_in(
        dir.path(),
        &["--format", "json", "--out", "report.json"],
        Some(&log),
    );
    assert!(run.status.success());
    assert!(run.stdout.is_empty());
    let written: Value = serde_json::from_slice(&std::fs::read(&out).expect("read")).expect("json");
    assert_eq!(written["input"]["counted"], 53);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
}
