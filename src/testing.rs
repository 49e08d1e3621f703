//! Helpers shared by the unit and integration tests (not a public API).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A header map of `(name, value)` pairs, in order (repeats append).
pub fn header_map(pairs: &[(&str, &str)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            http::header::HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
            http::header::HeaderValue::from_str(value).expect("a header value"),
        );
    }
    map
}

/// The variable that makes a missing `php` a test failure (CI sets it).
pub const REQUIRE_PHP: &str = "CRAWLGATE_REQUIRE_PHP";

/// The variable that makes a missing benchmark tool (nginx, wrk, curl) a
/// test failure (CI sets it).
pub const REQUIRE_BENCH: &str = "CRAWLGATE_REQUIRE_BENCH";

/// Finds `php` on `PATH`. When it is missing: panics if
/// `CRAWLGATE_REQUIRE_PHP` is set (`.ci/run` installs PHP and sets it) or
/// `CI=true`, otherwise prints that the test is skipped and returns `None`.
pub fn php_binary() -> Option<PathBuf> {
    required_tool("php", REQUIRE_PHP)
}

/// Finds `name` on `PATH`. When it is missing: panics if the variable
/// `require` is set (and not `0`) or `CI=true`; otherwise prints that the
/// test is skipped and returns `None`.
pub fn required_tool(name: &str, require: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    let required = std::env::var_os(require).is_some_and(|v| !v.is_empty() && v != "0")
        || std::env::var_os("CI").is_some_and(|v| v == "true");
    match found {
        Some(path) => Some(path),
        None if required => panic!("{require} is set but `{name}` is not on PATH"),
        None => {
            eprintln!("SKIPPED: `{name}` is not on PATH (set {require}=1 to make this a failure)");
            None
        }
    }
}

/// Runs `bin args…` with `input` on stdin and returns its stdout; panics
/// (this is test code) if it cannot run or fails.
pub fn run_with_stdin(bin: &Path, args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{} failed: {:?}",
        bin.display(),
        out.status
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}
