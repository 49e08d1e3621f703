//! The load benchmark's smoke mode: a few seconds per scenario of
//! `bench/load.sh --smoke` (crawlgate, crawlgate with shedding and the
//! robots cache on, and the 25-token nginx peer in front of an
//! nginx origin, wrk as the load), checking only that every scenario
//! produced the expected status mix and that both streams moved every
//! byte. The measured run is `bench/load.sh` without `--smoke` (see
//! bench/README.md); it is too long for the test suite.

use std::process::Command;

use crawlgate::testing::{required_tool, REQUIRE_BENCH};

#[test]
fn load_benchmark_smoke() {
    let tools = ["nginx", "wrk", "curl", "python3", "taskset"];
    if tools
        .iter()
        .any(|tool| required_tool(tool, REQUIRE_BENCH).is_none())
    {
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{root}/bench/load.sh"))
        .arg("--smoke")
        .env("CRAWLGATE_BIN", env!("CARGO_BIN_EXE_crawlgate"))
        // Also crawlgate with shedding and the robots cache on, and the
        // robots-only scenario.
        .env("PROTECT", "1")
        // And crawlgate with crawler verification on (lists from files).
        .env("VERIFY", "1")
        .current_dir(root)
        .output()
        .expect("run bench/load.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}\n{stderr}");
    assert!(out.status.success(), "bench/load.sh --smoke failed");
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
