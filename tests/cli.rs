//! The `crawlgate` binary itself: flags, exit codes, one-line errors,
//! `classify`, `check-config`, `demo`, signals, and bounded memory while
//! streaming.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::process::{self, free_addr, Running};
use support::{get, Upstream, FIREFOX};

const BIN: &str = process::BIN;

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run crawlgate")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_documents_every_flag_and_subcommand() {
    let out = run(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "--listen",
        "--upstream",
        "--config",
        "--sitemap-dir",
        "--rules",
        "--tls-listen",
        "--certs",
        "demo",
        "classify",
        "check-config",
        "health",
        "sitemap",
    ] {
        assert!(
            text.contains(word),
            "--help does not mention {word}:\n{text}"
        );
    }
    // Issue 25: an https upstream is supported, and the help says so.
    let upstream = text
        .lines()
        .find(|l| l.contains("--upstream"))
        .expect("--upstream line");
    assert!(upstream.contains("https://"), "{upstream}");
}

#[test]
fn check_config_accepts_the_example_and_names_the_bad_key() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/crawlgate.toml");
    let out = run(&["check-config", example]);
    assert!(out.status.success(), "{}", stderr(&out));

    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("[redirect]\nwww = \"sometimes\"\n", "redirect.www"),
        ("[proxy]\nconnect_timout = \"1s\"\n", "proxy.connect_timout"),
        (
            "[proxy]\nresponse_timeout = \"soon\"\n",
            "proxy.response_timeout",
        ),
        ("listen = [\n", "bad.toml:2: syntax error"),
        (
            "\n[redirect]\nwww = \"sometimes\"\n",
            "bad.toml:3: redirect.www",
        ),
        ("rules_dir = \"/nonexistent/rules\"\n", "/nonexistent/rules"),
        (
            "[shed]\nmax_upstream_inflight = 4\norder = [[\"seo\"], [\"serach\"]]\n",
            "bad.toml:3: shed.order: \"serach\" is not a robot class",
        ),
    ];
    for (text, key) in cases {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, text).expect("write");
        let out = run(&["check-config", path.to_str().expect("utf-8 path")]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(64), "{text:?}: {err}");
        assert!(
            err.contains(key),
            "{text:?}: error does not name {key}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = run(&["check-config", "/nonexistent/crawlgate.toml"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("/nonexistent/crawlgate.toml"));
}

/// Issue 10.5: `rules_dir = "rules"` means the folder beside the config
/// file, wherever crawlgate is started from (systemd starts it in `/`);
/// errors print the resolved path.
#[test]
fn config_paths_are_relative_to_the_config_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("rules")).expect("mkdir");
    std::fs::write(dir.path().join("rules/mine.txt"), "FancyFetcher\n").expect("write");
    let config = dir.path().join("crawlgate.toml");
    std::fs::write(&config, "rules_dir = \"rules\"\n").expect("write");
    let out = Command::new(BIN)
        .args(["check-config", config.to_str().expect("utf-8")])
        .current_dir("/")
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));

    std::fs::write(&config, "rules_dir = \"gone\"\n").expect("write");
    let out = Command::new(BIN)
        .args(["check-config", config.to_str().expect("utf-8")])
        .current_dir("/")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(64));
    let resolved = dir.path().join("gone");
    assert!(
        stderr(&out).contains(&resolved.display().to_string()),
        "{}",
        stderr(&out)
    );
}

#[test]
fn start_up_errors_are_one_line() {
    // A flag value that cannot be an address is a bad flag (issue 10.9).
    for bad in ["not-an-address", "127.0.0.1:99999"] {
        let out = run(&["--listen", bad]);
        assert_eq!(out.status.code(), Some(2), "--listen {bad}");
        assert!(stderr(&out).contains("--listen"), "{}", stderr(&out));
    }
    let out = run(&["--upstream", "ftp://x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // The same value in the file is a config error naming file and line.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "\nlisten = \"127.0.0.1:99999\"\n").expect("write");
    let out = run(&["--config", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(64));
    let want = format!("crawlgate: error: {}:2: listen: ", file.display());
    assert!(stderr(&out).starts_with(&want), "{}", stderr(&out));

    let out = run(&["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = Command::new(BIN)
        .args(["--listen", &addr])
        .env("RUST_LOG", "off")
        .output()
        .expect("run");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // Issue 25: each cause once, not the OS error twice.
    assert_eq!(err.matches("in use").count(), 1, "{err}");
}

/// Issue 10.7: with `SO_REUSEPORT`, a second crawlgate on the same address
/// would silently get every other connection. It must exit 1 with the
/// occupied-port line instead, and the first one keeps all the traffic.
#[test]
fn a_second_instance_on_the_same_address_is_refused() {
    let addr = free_addr();
    let text = addr.to_string();
    let _first = process::start(
        &["--listen", &text, "--upstream", "http://127.0.0.1:9"],
        addr,
        Stdio::null(),
    );
    let out = Command::new(BIN)
        .args(["--listen", &text, "--upstream", "http://127.0.0.1:9"])
        .env("RUST_LOG", "off")
        .output()
        .expect("run");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot listen on {addr}")) && err.contains("in use"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn classify_reads_lines_and_explains() {
    let mut child = Command::new(BIN)
        .args(["classify", "--explain"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let input = b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)\n\
        Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0\r\n\
        \n\
        python-requests/2.32\n\
        Mozilla/5.0 (X11) \xff\xfe not utf-8\n\
        SiteTool/2.1\n";
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "bot\tsearch:Googlebot\nhuman\tno-bot-token\nbot\tempty-user-agent\nbot\tlibrary:python-requests\nhuman\tno-bot-token\nbot\tstructure:no-browser-shape\n"
    );
}

#[test]
fn classify_uses_a_rules_folder_when_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("bot-mine.txt"), "# mine\nFirefox\n").expect("write");
    let mut child = Command::new(BIN)
        .args([
            "classify",
            "--rules",
            dir.path().to_str().expect("utf-8"),
            "--explain",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"Firefox/133\nMozilla/5.0 (X11; Linux) curl/8\n")
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "bot\tbot-mine:Firefox\nhuman\tno-bot-token\n"
    );
}

fn start_proxy(args: &[&str], addr: SocketAddr) -> Running {
    process::start(args, addr, Stdio::null())
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("field")
}

#[test]
fn sigterm_stops_the_proxy_with_exit_code_0() {
    let addr = free_addr();
    let mut proxy = start_proxy(
        &[
            "--listen",
            &addr.to_string(),
            "--upstream",
            "http://127.0.0.1:9",
        ],
        addr,
    );
    proxy.signal("TERM");
    let status = proxy.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
}

/// Streams 256 MiB down and 256 MiB up through the real binary and checks
/// that its peak resident memory grows by a few MiB at most.
/// `CRAWLGATE_STREAM_MIB=1024` makes it 1 GiB each way (see bench/README.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_256_mib_each_way_keeps_memory_flat() {
    use http_body_util::BodyExt;

    const LIMIT_KIB: u64 = 16 * 1024;
    let mib: u64 = std::env::var("CRAWLGATE_STREAM_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let size = mib * 1024 * 1024;

    let upstream = Upstream::start().await;
    let addr = free_addr();
    let proxy = start_proxy(
        &["--listen", &addr.to_string(), "--upstream", &upstream.url()],
        addr,
    );
    let pid = proxy.0.id();

    // Warm up: pools, buffers, allocator arenas.
    for _ in 0..3 {
        assert_eq!(
            get(addr, "example.com", "/", Some(FIREFOX)).await.status,
            200
        );
    }
    let baseline = status_kib(pid, "VmRSS:");

    let mut sender = support::h1_client(addr).await;

    let req = http::Request::get(format!("/download?bytes={size}"))
        .header("host", "example.com")
        .header("user-agent", FIREFOX)
        .body(support::Chunks::new(0))
        .expect("request");
    let res = sender.send_request(req).await.expect("response");
    let mut body = res.into_body();
    let mut down = 0u64;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.expect("frame").into_data() {
            down += data.len() as u64;
        }
    }
    assert_eq!(down, size);

    let req = http::Request::post("/upload")
        .header("host", "example.com")
        .header("user-agent", FIREFOX)
        .body(support::Chunks::chunked(size))
        .expect("request");
    sender.ready().await.expect("connection kept alive");
    let res = sender.send_request(req).await.expect("response");
    let hash = res.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(hash, support::pattern_sha256(size).as_bytes());

    let peak = status_kib(pid, "VmHWM:");
    let grew = peak.saturating_sub(baseline);
    eprintln!("crawlgate RSS: baseline {baseline} KiB, peak {peak} KiB, growth {grew} KiB after {mib} MiB down and {mib} MiB up");
    assert!(
        grew < LIMIT_KIB,
        "peak RSS grew by {grew} KiB (limit {LIMIT_KIB} KiB)"
    );
}

#[test]
fn demo_shows_every_feature() {
    let mut child = Command::new(BIN)
        .args(["demo", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn demo");
    let stdout = child.stdout.take().expect("stdout");
    let demo = Running(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut printed = Vec::new();
    let addr: SocketAddr = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("demo prints its address");
        printed.push(line.clone());
        if let Some(rest) = line.split("proxy listening on http://").nth(1) {
            break rest
                .split(' ')
                .next()
                .expect("addr")
                .parse()
                .expect("socket address");
        }
    };
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(300)) {
        printed.push(line);
    }
    let printed = printed.join("\n");
    // The classify hint runs the binary that was started, not `cargo run`
    // (issue 10.9).
    let classify_hint = format!("| {BIN} classify --explain");
    for needle in [
        "?do=vote",
        "robots.txt",
        "/sitemaps/sitemap.xml",
        "Host: www.localhost",
        "curl -i",
        &classify_hint,
    ] {
        assert!(
            printed.contains(needle),
            "demo output lacks {needle}:\n{printed}"
        );
    }

    assert!(!printed.contains("cargo run"), "{printed}");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let blocked = get(addr, "127.0.0.1", "/?do=vote", Some("curl/8.5.0")).await;
        assert_eq!(blocked.status, 403);
        let voted = get(addr, "127.0.0.1", "/?do=vote", Some(FIREFOX)).await;
        assert_eq!(voted.status, 200);
        assert!(
            voted.text().contains("votes recorded: 1"),
            "{}",
            voted.text()
        );
        assert!(voted.text().contains("X-Crawler: 0"), "{}", voted.text());
        let page = get(addr, "127.0.0.1", "/page?id=1", Some("curl/8.5.0")).await;
        assert!(page.text().contains("votes recorded: 1") && page.text().contains("X-Crawler: 1"));
        let host = format!("www.localhost:{}", addr.port());
        let moved = get(addr, &host, "/www/page?id=1", Some("curl/8.5.0")).await;
        assert_eq!(moved.status, 301);
        let want = format!("http://localhost:{}/page?id=1", addr.port());
        assert_eq!(moved.header("location"), Some(want.as_str()));
        let robots = get(addr, "127.0.0.1", "/robots.txt", Some("curl/8.5.0")).await;
        let sitemap = "Sitemap: http://127.0.0.1/sitemaps/sitemap.xml";
        assert!(robots.text().contains(sitemap), "{}", robots.text());
        let index = get(
            addr,
            "127.0.0.1",
            "/sitemaps/sitemap.xml",
            Some("curl/8.5.0"),
        )
        .await;
        assert_eq!(index.status, 200);
        let file = format!("<loc>http://{addr}/sitemaps/sitemap-0.xml</loc>");
        assert!(index.text().contains(&file), "{}", index.text());
        let urls = get(
            addr,
            "127.0.0.1",
            "/sitemaps/sitemap-0.xml",
            Some("curl/8.5.0"),
        )
        .await;
        let page = format!("<loc>http://{addr}/page?id=1</loc>");
        assert!(urls.text().contains(&page), "{}", urls.text());
    });
    drop(demo);
}

/// The commit of this checkout, as build.rs asks git for it; none
/// without git.
fn checkout_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let short = run(&["-V"]);
    assert!(short.status.success(), "{}", stderr(&short));
    let short = String::from_utf8_lossy(&short.stdout).into_owned();
    let pattern = regex::Regex::new(concat!(
        r"^crawlgate ",
        env!("CARGO_PKG_VERSION"),
        r" \((\S+) (\d{4}-\d{2}-\d{2})\)\n$"
    ))
    .expect("regex");
    let found = pattern
        .captures(&short)
        .unwrap_or_else(|| panic!("-V prints one line: {short:?}"));
    let (commit, date) = (&found[1], &found[2]);
    match checkout_commit() {
        Some(head) => assert!(
            commit == head || commit == format!("{head}-dirty"),
            "-V says {commit}, the checkout is at {head}"
        ),
        None => eprintln!("no git here: the commit ({commit}) is not checked"),
    }

    let long = run(&["--version"]);
    assert!(long.status.success(), "{}", stderr(&long));
    let long = String::from_utf8_lossy(&long.stdout).into_owned();
    let lines: Vec<&str> = long.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(concat!("crawlgate ", env!("CARGO_PKG_VERSION"))),
        "{long}"
    );
    for line in [format!("commit: {commit}"), format!("built: {date}")] {
        assert!(lines.contains(&line.as_str()), "no {line:?} in:\n{long}");
    }
    // Cargo's features (`none` today), the target triple and the profile.
    for field in ["features: ", "target: ", "profile: "] {
        assert!(
            lines
                .iter()
                .any(|l| l.strip_prefix(field).is_some_and(|v| !v.is_empty())),
            "no {field:?} in:\n{long}"
        );
    }
}

/// The page names of the visible commands, from the clap definition:
/// `crawlgate`, `crawlgate-sitemap-build`, ….
fn command_page_names() -> Vec<String> {
    fn walk(cmd: &clap::Command, name: String, names: &mut Vec<String>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name() != "help" {
                walk(sub, format!("{name}-{}", sub.get_name()), names);
            }
        }
        names.push(name);
    }
    let mut names = Vec::new();
    let cli = <crawlgate::cli::Cli as clap::CommandFactory>::command();
    walk(&cli, "crawlgate".to_owned(), &mut names);
    names
}

/// A terminal rendering as plain text: overstrikes (bold, underline) and
/// SGR sequences removed, typographic hyphens and minus signs as `-`.
fn plain(text: &str) -> String {
    let sgr = regex::Regex::new("\x1b\\[[0-9;]*m").expect("regex");
    let mut out: Vec<char> = Vec::new();
    for c in sgr.replace_all(text, "").chars() {
        match c {
            '\u{8}' => {
                out.pop();
            }
            '\u{2010}' | '\u{2011}' | '\u{2212}' => out.push('-'),
            c => out.push(c),
        }
    }
    out.into_iter().collect()
}

/// Renders a page with `man -l` or, without man, `nroff -man`; none when
/// neither runs here.
fn render_page(path: &std::path::Path) -> Option<String> {
    let tools: [(&str, &[&str]); 2] = [("man", &["-l"]), ("nroff", &["-man"])];
    for (tool, args) in tools {
        let Ok(out) = Command::new(tool)
            .args(args)
            .arg(path)
            .env("MANWIDTH", "80")
            .env("LC_ALL", "C.UTF-8")
            .env_remove("MANPAGER")
            .env_remove("PAGER")
            .output()
        else {
            continue;
        };
        let errors = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && errors.trim().is_empty(),
            "{tool} {}: {errors}",
            path.display()
        );
        return Some(plain(&String::from_utf8_lossy(&out.stdout)));
    }
    None
}

#[test]
fn man_writes_a_page_per_command_and_the_config_reference() {
    let help = run(&["--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        !help.lines().any(|l| l.trim_start().starts_with("man ")),
        "`man` is hidden from --help:\n{help}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let out = run(&["man", "--out", dir.path().to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut files: Vec<String> = command_page_names()
        .into_iter()
        .map(|name| format!("{name}.1"))
        .collect();
    files.push("crawlgate.toml.5".to_owned());
    files.sort();
    let mut listed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.rsplit('/').next().unwrap_or(l).to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, files, "the paths printed");
    let mut found: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read the folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(found, files, "the pages written");

    let mut rendered = 0;
    for file in &files {
        let path = dir.path().join(file);
        let roff = std::fs::read_to_string(&path).expect("read the page");
        assert!(roff.starts_with(".TH "), "{file}: {roff}");
        assert!(roff.contains(".SH \"SEE ALSO\"\n"), "{file}: {roff}");
        let name = file.rsplit_once('.').expect("section").0;
        let text = match render_page(&path) {
            Some(text) => {
                rendered += 1;
                text
            }
            None => roff.replace("\\-", "-"),
        };
        assert!(text.contains(name), "{file} does not name {name}:\n{text}");
        if file == "crawlgate.toml.5" {
            check_config_reference(&text, rendered > 0);
        }
    }
    if rendered == 0 {
        println!(
            "neither man nor nroff runs here: the pages' roff is checked, not their rendering"
        );
    }
}

/// Every key of the config is in crawlgate.toml(5), under its section's
/// heading (`[proxy]`; top-level keys under TOP-LEVEL KEYS): as the tag
/// `key = …` or `# key = …`, or, for a table of tables, `[section.key.…]`.
fn check_config_reference(text: &str, rendered: bool) {
    if !rendered {
        for key in crawlgate::config::keys() {
            let last = key.rsplit('.').next().expect("a name");
            assert!(text.contains(last), "crawlgate.toml.5 lacks {key}");
        }
        return;
    }
    // The rendered page's sections: a heading starts at the margin.
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if !line.is_empty() && !line.starts_with(char::is_whitespace) {
            sections.push((line.trim().to_owned(), Vec::new()));
        } else if let Some((_, lines)) = sections.last_mut() {
            let line = line.trim();
            lines.push(line.strip_prefix("# ").unwrap_or(line).to_owned());
        }
    }
    for key in crawlgate::config::keys() {
        let (heading, name) = match key.rsplit_once('.') {
            Some((section, name)) => (format!("[{section}]"), name),
            None => ("TOP-LEVEL KEYS".to_owned(), key.as_str()),
        };
        let lines = &sections
            .iter()
            .find(|(h, _)| *h == heading)
            .unwrap_or_else(|| panic!("crawlgate.toml.5 has no section {heading}:\n{text}"))
            .1;
        let table = format!("[{key}.");
        assert!(
            lines.iter().any(|l| {
                l.starts_with(&table)
                    || l.strip_prefix(name)
                        .is_some_and(|rest| rest.trim_start().starts_with('='))
            }),
            "crawlgate.toml.5 does not document {key} under {heading}"
        );
    }
}
