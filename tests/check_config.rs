//! `crawlgate check-config` against the start of the real binary: the
//! same verdict for every config start-up refuses (files and folders
//! named, local range lists), and nothing created by the check.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crawlgate::verify::Operators;
use support::lists::{lists_toml, GOOGLE_LIST};
use support::process::{self, free_addr, Running, BIN};

/// The real binary with `config` on a free port, with `env`, until it
/// listens.
fn start(config: &Path, env: &[(&str, &str)], stderr: Stdio) -> Running {
    let addr = free_addr();
    let listen = addr.to_string();
    let args = [
        "--config",
        config.to_str().expect("utf-8"),
        "--listen",
        &listen,
    ];
    process::start_env(&args, env, addr, stderr)
}

fn check(config: &Path, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(BIN);
    command.args(["check-config", config.to_str().expect("utf-8")]);
    command.env_remove("STATE_DIRECTORY");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run check-config")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Starts the proxy on `config`; it must exit (a config it refuses) within
/// 10 s: its exit code and standard error.
fn start_refused(config: &Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let listen = free_addr().to_string();
    let mut command = Command::new(BIN);
    command
        .args([
            "--config",
            config.to_str().expect("utf-8"),
            "--listen",
            &listen,
        ])
        .args(["--upstream", "http://127.0.0.1:9"])
        .env("RUST_LOG", "off")
        .env_remove("STATE_DIRECTORY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut running = Running(command.spawn().expect("spawn"));
    let status = running.wait_exit(Duration::from_secs(10));
    let mut err = String::new();
    if let Some(mut pipe) = running.0.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut err).expect("stderr");
    }
    (status.code(), err)
}

/// Each config start-up refuses is refused by check-config too, exit 64
/// with the same one line, `FILE:LINE: key: …`.
#[test]
fn check_config_refuses_what_start_up_refuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("a-file"), "").expect("write");
    std::fs::write(
        d.join("malformed.json"),
        "{\"prefixes\": [{\"ipv4Prefix\": \"66.249.66.0/24\"},\n {\"ipv4Prefix\": \"66.249.66\"}]}",
    )
    .expect("write");
    std::fs::write(d.join("html.json"), "<html>maintenance</html>").expect("write");
    let off = "[verify]\nenabled = false\n";
    let verify = |extra: &str, files: &[(&str, &Path)]| {
        format!(
            "[verify]\ndns = false\nsignatures = false\n{extra}{}",
            lists_toml(files)
        )
    };
    let malformed = d.join("malformed.json");
    let html = d.join("html.json");
    let missing = d.join("missing.json");
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "log file in a missing folder",
            format!("{off}[log]\nfile = \"/nonexistent/dir/access.log\"\n"),
            vec![":4: log.file: ", "/nonexistent/dir"],
        ),
        (
            "log file that is a folder",
            format!("{off}[log]\nfile = {:?}\n", d.display()),
            vec![":4: log.file: ", "is a folder"],
        ),
        (
            "a malformed local range list",
            verify("", &[("google.common-crawlers", &malformed)]),
            vec![
                "verify.ranges: google.common-crawlers: ",
                // The range file's own line.
                "malformed.json:2: entry 1: \"66.249.66\"",
            ],
        ),
        (
            "a local range list that is not JSON",
            verify("", &[("google.common-crawlers", &html)]),
            vec![
                "verify.ranges: google.common-crawlers: ",
                "html.json:1: not a range file",
            ],
        ),
        (
            "a missing local range list",
            verify("", &[("google.common-crawlers", &missing)]),
            vec![
                "verify.ranges: google.common-crawlers: ",
                "missing.json: no such file",
            ],
        ),
        (
            "a state_dir that cannot be created (below a file, even for root)",
            verify("state_dir = \"a-file/sub\"\n", &[]),
            vec![
                ":4: verify.state_dir: ",
                "a-file/sub: cannot be created: ",
                "a-file is not a folder",
            ],
        ),
        (
            "a sitemap_dir that does not exist",
            format!("sitemap_dir = \"maps\"\n{off}"),
            vec![":1: sitemap_dir: ", "maps: no such folder"],
        ),
    ];
    for (what, text, wants) in cases {
        let config = d.join("crawlgate.toml");
        std::fs::write(&config, &text).expect("write");
        let prefix = format!("crawlgate: error: {}:", config.display());

        let out = check(&config, &[]);
        let checked = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(64),
            "check-config, {what}: {checked}"
        );
        let (code, started) = start_refused(&config, &[]);
        assert_eq!(code, Some(64), "start, {what}: {started}");
        for (who, err) in [("check-config", &checked), ("start", &started)] {
            assert!(err.starts_with(&prefix), "{who}, {what}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{who}, {what}: {err}");
            for want in &wants {
                assert!(err.contains(want), "{who}, {what}: {want:?} not in {err}");
            }
        }
        assert_eq!(checked, started, "{what}: the same message");
    }
}

/// check-config creates nothing: not the state folder (nor its parent),
/// not the access log. The start that it predicts creates both.
#[test]
fn check_config_creates_nothing_and_start_up_then_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("lib/verify");
    let log = dir.path().join("access.log");
    let config = dir.path().join("crawlgate.toml");
    std::fs::write(
        &config,
        format!(
            "[log]\nfile = {:?}\n[verify]\ndns = false\nsignatures = false\nstate_dir = {:?}\n{}",
            log.display(),
            state.display(),
            lists_toml(&[])
        ),
    )
    .expect("write");
    let out = check(&config, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !dir.path().join("lib").exists(),
        "check-config created the state folder"
    );
    assert!(!log.exists(), "check-config created the access log");
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["crawlgate.toml"], "nothing else in the folder");

    let mut proxy = start(&config, &[], Stdio::null());
    assert!(state.is_dir(), "start-up creates the state folder");
    assert!(log.is_file(), "start-up opens the access log");
    proxy.signal("TERM");
    assert!(proxy.wait_exit(Duration::from_secs(15)).success());
}

/// Under systemd's `StateDirectory=` (`$STATE_DIRECTORY`), a config
/// without `verify.state_dir` keeps the lists' copies in its folder
/// `verify`; check-config checks the same folder, and creates nothing.
#[test]
fn the_default_state_dir_follows_systemds_state_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let systemd = dir.path().join("state");
    std::fs::create_dir(&systemd).expect("mkdir");
    std::fs::write(dir.path().join("a-file"), "").expect("write");
    let config = dir.path().join("crawlgate.toml");
    std::fs::write(
        &config,
        format!(
            "[verify]\ndns = false\nsignatures = false\n{}",
            lists_toml(&[])
        ),
    )
    .expect("write");
    let env = |path: &Path| [("STATE_DIRECTORY", path.display().to_string())];
    let good = env(&systemd);
    let good: Vec<(&str, &str)> = good.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = check(&config, &good);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !systemd.join("verify").exists(),
        "check-config creates nothing"
    );

    // A StateDirectory it cannot use is an error of both, naming the key.
    let bad = env(&dir.path().join("a-file"));
    let bad: Vec<(&str, &str)> = bad.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = check(&config, &bad);
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("verify.state_dir: "),
        "{}",
        stderr(&out)
    );
    let (code, err) = start_refused(&config, &bad);
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("verify.state_dir: "), "{err}");

    let mut proxy = start(&config, &good, Stdio::null());
    assert!(
        systemd.join("verify").is_dir(),
        "start-up creates $STATE_DIRECTORY/verify"
    );
    proxy.signal("TERM");
    assert!(proxy.wait_exit(Duration::from_secs(15)).success());
}

/// The start-up line counts the copies read from `state_dir`, not lists
/// read from local files.
#[test]
fn the_start_up_line_counts_only_saved_copies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let operators = Operators::embedded();
    let names: Vec<&str> = operators.lists.iter().map(|l| &*l.name).collect();
    // Every list but the first from a local file; the first from a closed
    // port, with a saved copy in state_dir.
    let files: Vec<(&str, std::path::PathBuf)> = names[1..]
        .iter()
        .map(|name| (*name, dir.path().join(format!("{name}.local.json"))))
        .collect();
    for (_, path) in &files {
        std::fs::write(path, GOOGLE_LIST).expect("write");
    }
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    std::fs::write(state.join(format!("{}.json", names[0])), GOOGLE_LIST).expect("write");
    let refs: Vec<(&str, &Path)> = files.iter().map(|(n, p)| (*n, p.as_path())).collect();
    let start_line = |state_dir: Option<&Path>| {
        let config = dir.path().join("crawlgate.toml");
        let state_dir = state_dir
            .map(|s| format!("state_dir = {:?}\n", s.display()))
            .unwrap_or_default();
        std::fs::write(
            &config,
            format!(
                "[verify]\ndns = false\nsignatures = false\n{state_dir}{}",
                lists_toml(&refs)
            ),
        )
        .expect("write");
        let mut proxy = start(&config, &[("RUST_LOG", "info")], Stdio::piped());
        proxy.signal("TERM");
        assert!(proxy.wait_exit(Duration::from_secs(15)).success());
        let mut err = String::new();
        let mut pipe = proxy.0.stderr.take().expect("stderr");
        std::io::Read::read_to_string(&mut pipe, &mut err).expect("stderr");
        err.lines()
            .find(|l| l.contains("crawler verification on"))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no verification line in {err}"))
    };
    let lists = format!("lists={}", names.len());
    let line = start_line(None);
    assert!(
        line.contains(&lists) && line.contains("from_saved_copies=0"),
        "local files are not saved copies: {line}"
    );
    let line = start_line(Some(&state));
    assert!(
        line.contains(&lists) && line.contains("from_saved_copies=1"),
        "one copy read from state_dir: {line}"
    );
}
