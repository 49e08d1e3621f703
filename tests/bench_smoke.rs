//! The benchmarks' smoke runs. The load benchmark: a few seconds per
//! scenario of `bench/load.sh --smoke` (crawlgate, crawlgate with shedding
//! and the robots cache on, and the 25-token nginx peer in front of an
//! nginx origin, wrk as the load), checking only that every scenario
//! produced the expected status mix and that both streams moved every
//! byte; a few seconds of `bench/faults.sh --smoke` on both HTTP/1.1
//! layers; and one short round of `bench/sitemap_serve.sh`. The measured runs
//! are the scripts with their defaults (see bench/README.md); they are too
//! long for the test suite.

use std::process::Command;

use crawlgate::testing::{required_tool, REQUIRE_BENCH};

/// Runs `bench/<script>` with `args` and `envs`, this build's binary as
/// `CRAWLGATE_BIN`, and asserts it succeeded; its standard output, or
/// `None` when a tool it needs is missing (outside CI).
fn run_bench(script: &str, args: &[&str], envs: &[(&str, &str)]) -> Option<String> {
    let tools = ["nginx", "wrk", "curl", "python3", "taskset"];
    if tools
        .iter()
        .any(|tool| required_tool(tool, REQUIRE_BENCH).is_none())
    {
        return None;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{root}/bench/{script}"))
        .args(args)
        .env("CRAWLGATE_BIN", env!("CARGO_BIN_EXE_crawlgate"))
        .envs(envs.iter().copied())
        .current_dir(root)
        .output()
        .expect("run a benchmark script");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}\n{stderr}");
    assert!(out.status.success(), "bench/{script} failed");
    Some(stdout)
}

#[test]
fn load_benchmark_smoke() {
    let envs = [
        // Also crawlgate with shedding and the robots cache on, and the
        // robots-only scenario.
        ("PROTECT", "1"),
        // And crawlgate with crawler verification on (lists from files).
        ("VERIFY", "1"),
    ];
    let Some(stdout) = run_bench("load.sh", &["--smoke"], &envs) else {
        return;
    };
    let checks = stdout.lines().filter(|l| l.starts_with("smoke ")).count();
    // origin pass + (mixed, pass, robots, mixed-logged) × (crawlgate,
    // crawlgate-protect, crawlgate-verify, nginx-lean)
    assert_eq!(checks, 17, "every scenario was checked:\n{stdout}");
    assert!(
        stdout
            .lines()
            .filter(|l| l.starts_with("smoke "))
            .all(|l| l.ends_with(": ok")),
        "{stdout}"
    );
    assert!(stdout.contains("## Memory and streaming"), "{stdout}");
}

/// The fault benchmark (bench/README.md §8), a few seconds per proxy:
/// crawlgate on each HTTP/1.1 layer and nginx-lean in front of an origin
/// that cuts bodies, resets, stalls and breaks its status lines, under
/// load and a SIGHUP every 2 s. The script checks that each stayed up
/// without a panic, still answered 200s, and met every kind of fault.
#[test]
fn fault_benchmark_smoke() {
    let envs = [("PROXIES", "crawlgate crawlgate-native nginx-lean")];
    let Some(stdout) = run_bench("faults.sh", &["--smoke"], &envs) else {
        return;
    };
    let checks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("smoke ")).collect();
    assert_eq!(checks.len(), 3, "every proxy was checked:\n{stdout}");
    assert!(checks.iter().all(|l| l.ends_with(": ok")), "{stdout}");
}

/// The sitemap serving benchmark, one short round: it checks by itself
/// that crawlgate and nginx send the file byte for byte and answer 304 to
/// their own ETag (and exits non-zero otherwise); here, also that every
/// scenario ran without an error response.
#[test]
fn sitemap_serving_benchmark_smoke() {
    let envs = [("DURATION", "1"), ("ROUNDS", "1")];
    let Some(stdout) = run_bench("sitemap_serve.sh", &[], &envs) else {
        return;
    };
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| {
            l.starts_with("| full ") || l.starts_with("| 304 ") || l.starts_with("| index ")
        })
        .collect();
    assert_eq!(rows.len(), 6, "three scenarios × two servers:\n{stdout}");
    for row in rows {
        // Columns: scenario, server, req/s, CPU, errors, ratio.
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[5], "0", "error responses: {row}");
        assert!(!cells[3].starts_with("0;"), "no requests: {row}");
    }
}

/// The crawl report benchmark's log generator on a tiny size: every line
/// is nginx's combined format, the same seed gives the same bytes, and
/// `crawlgate report` counts every line as a request.
#[test]
fn report_log_generator_smoke() {
    if required_tool("python3", REQUIRE_BENCH).is_none() {
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let generate = |seed: &str| {
        let out = Command::new("python3")
            .arg(format!("{root}/bench/report_log.py"))
            .args(["--lines", "2000", "--seed", seed, "--out", "-"])
            .output()
            .expect("run bench/report_log.py");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("the log is UTF-8")
    };
    let log = generate("1");
    assert_eq!(log, generate("1"), "the same seed gives the same log");
    assert_ne!(log, generate("2"), "another seed, another log");
    let combined = regex::Regex::new(
        r#"^[0-9a-f.:]+ - - \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "(GET|HEAD|POST) /\S* HTTP/(1\.1|2\.0)" \d{3} \d+ "[^"]*" "[^"]+"$"#,
    )
    .expect("the pattern compiles");
    assert_eq!(log.lines().count(), 2000);
    for line in log.lines() {
        assert!(
            combined.is_match(line),
            "not nginx's combined format: {line}"
        );
    }
}
