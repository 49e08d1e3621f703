//! The whole file: defaults, errors naming the key and line, paths,
//! overrides and the deploy example.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

/// Parses and validates `text` without overrides; the error as a line.
pub(super) fn load(text: &str) -> Result<Config, String> {
    let raw = RawConfig::parse(text).map_err(|(k, _, m)| format!("{k}: {m}"))?;
    Config::from_raw(raw, &Overrides::default()).map_err(|e| e.to_string())
}

#[test]
fn defaults() {
    let c = load("").expect("empty config is valid");
    assert_eq!(c.restart.listen, "127.0.0.1:8080".parse().expect("addr"));
    assert_eq!(c.upstream.authority.as_str(), "127.0.0.1:8000");
    assert_eq!(
        &*c.blocked_params,
        &["do".into(), "_fid".into()] as &[Box<str>]
    );
    assert_eq!(c.redirect.www, WwwMode::Apex);
    assert_eq!(c.proxy.class_header.as_str(), "x-crawler");
    assert_eq!(c.proxy.connect_timeout, Duration::from_secs(2));
    assert!(c.access_log);
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("listen = \"nope\"", "listen: "),
        ("lisen = \"x\"", "lisen: unknown field `lisen`"),
        (
            "[proxy]\nconect_timeout = \"1s\"",
            "proxy.conect_timeout: unknown field `conect_timeout`",
        ),
        (
            "[proxy]\nconnect_timeout = 5",
            "proxy.connect_timeout: invalid type",
        ),
        (
            "[proxy]\nconnect_timeout = \"5 parsecs\"",
            "proxy.connect_timeout: ",
        ),
        (
            "[proxy]\nconnect_timeout = \"0s\"",
            "proxy.connect_timeout: must be greater",
        ),
        (
            "[proxy]\nclass_header = \"X Crawler\"",
            "proxy.class_header: ",
        ),
        (
            "[proxy]\ntrusted_proxies = [\"10.0.0.0/33\"]",
            "proxy.trusted_proxies: ",
        ),
        ("upstream = \"ftp://x\"", "upstream: "),
        (
            "[proxy]\nupstream_ca = \"ca.pem\"",
            "proxy.upstream_ca: only applies",
        ),
        (
            "upstream = \"https://x\"\n[proxy]\nupstream_sni = \"a b\"",
            "proxy.upstream_sni: ",
        ),
        ("[proxy]\nh2c = 1", "proxy.h2c: invalid type"),
        ("[proxy]\nworkers = 5000", "proxy.workers: "),
        ("[tls]\nlisten = \"443\"", "tls.listen: "),
        (
            "[tls]\nredirect_http = true",
            "tls.redirect_http: needs tls.listen",
        ),
        (
            "[tls]\nlisten = \"127.0.0.1:443\"\nhsts = \"1 year\"",
            "tls.hsts: ",
        ),
        (
            "[tls]\nlisten = \"127.0.0.1:443\"\ndefault_name = \"*.x\"",
            "tls.default_name: ",
        ),
        ("[tls]\ncert = \"x\"", "tls.cert: unknown field"),
        ("upstream = \"http://x/app\"", "upstream: "),
        ("upstream = \"x:80\"", "upstream: "),
        ("[block]\nparams = [\"\"]", "block.params: "),
        ("[block]\nparams = [\"a=b\"]", "block.params: "),
        ("[redirect]\nwww = \"always\"", "redirect.www: "),
        (
            "[redirect]\nhosts = [\"http://example.com\"]",
            "redirect.hosts: ",
        ),
        ("[robots]\ndisallow = [\"admin\"]", "robots.disallow: "),
        ("[robots]\nextra = [\"a\\nb\"]", "robots.extra: "),
        ("[log]\naccess = \"yes\"", "log.access: invalid type"),
        (
            "[limits]\nmax_header_bytes = 100",
            "limits.max_header_bytes: ",
        ),
        ("[limits]\nmax_connections = 0", "limits.max_connections: "),
        (
            "[limits]\nmax_headers = -1",
            "limits.max_headers: invalid value",
        ),
        (
            "[limits]\nupstream_body_idle_timeout = \"never\"",
            "limits.upstream_body_idle_timeout: ",
        ),
    ];
    for (text, want) in cases {
        let err = load(text).expect_err(text);
        assert!(
            err.starts_with(want),
            "{text:?} gave {err:?}, want {want:?}…"
        );
        assert!(!err.contains('\n'), "one line: {err:?}");
    }
}

/// Issue 10.9: an error from the file names the file and the line of
/// the key, `FILE:LINE: key: message`, like a rules error.
#[test]
fn file_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    let cases = [
        (
            "listen = \"127.0.0.1:8080\"\n\n[proxy]\nconnect_timeout = \"5 parsecs\"\n",
            ":4: proxy.connect_timeout: ",
        ),
        ("[redirect]\n\nwww = \"always\"\n", ":3: redirect.www: "),
        (
            "[tls]\nredirect_http = true\n",
            ":2: tls.redirect_http: needs",
        ),
        (
            "[proxy]\nconect_timeout = \"1s\"\n",
            ":2: proxy.conect_timeout: unknown",
        ),
        (
            "\n\n[log]\naccess = \"yes\"\n",
            ":4: log.access: invalid type",
        ),
        ("listen = [\n", ":2: syntax error: "),
    ];
    for (text, want) in cases {
        std::fs::write(&path, text).expect("write");
        let err = Config::load(Some(&path), &Overrides::default())
            .expect_err(text)
            .to_string();
        let prefix = format!("{}{want}", path.display());
        assert!(
            err.starts_with(&prefix),
            "{text:?} gave {err:?}, want {prefix:?}…"
        );
    }
}

/// Issue 10.5: paths in the file are relative to the file's folder;
/// absolute ones and flags stay as given.
#[test]
fn paths_in_the_file_are_relative_to_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "sitemap_dir = \"maps\"\nrules_dir = \"/abs/rules\"\nupstream = \"https://x:1\"\n\
         [proxy]\nupstream_ca = \"ca/root.pem\"\n[tls]\nlisten = \"127.0.0.1:8443\"\n",
    )
    .expect("write");
    let c = Config::load(Some(&path), &Overrides::default()).expect("valid");
    assert_eq!(c.sitemap_dir, Some(dir.path().join("maps")));
    assert_eq!(c.rules_dir, Some(PathBuf::from("/abs/rules")));
    assert_eq!(c.upstream.ca_file, Some(dir.path().join("ca/root.pem")));
    assert_eq!(c.tls.expect("tls").certs_dir, dir.path().join("certs"));
    let flags = Overrides {
        certs_dir: Some(PathBuf::from("mine")),
        sitemap_dir: Some(PathBuf::from("here")),
        ..Overrides::default()
    };
    let c = Config::load(Some(&path), &flags).expect("valid");
    assert_eq!(c.sitemap_dir, Some(PathBuf::from("here")));
    assert_eq!(c.tls.expect("tls").certs_dir, PathBuf::from("mine"));
}

#[test]
fn overrides_win_over_the_file() {
    let raw =
        RawConfig::parse("listen = \"127.0.0.1:1\"\nupstream = \"http://a:1\"").expect("parses");
    let o = Overrides {
        listen: Some("127.0.0.1:2".into()),
        upstream: Some("http://b:2".into()),
        ..Overrides::default()
    };
    let c = Config::from_raw(raw, &o).expect("valid");
    assert_eq!(c.restart.listen.port(), 2);
    assert_eq!(c.upstream.authority.as_str(), "b:2");
}

/// Issue 25: the example says it sets every key to its default, and
/// does (a value meant for one setup stays a comment), and its header
/// names every flag that overrides it.
#[test]
fn the_deploy_example_sets_every_key_to_its_default() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crawlgate.toml");
    let text = std::fs::read_to_string(&path).expect("deploy/crawlgate.toml exists");
    let example = load(&text).expect("the example config is valid");
    let defaults = load("").expect("defaults");
    assert_eq!(format!("{example:?}"), format!("{defaults:?}"));
    let header: String = text.lines().take_while(|l| l.starts_with('#')).collect();
    for flag in [
        "--listen",
        "--upstream",
        "--sitemap-dir",
        "--rules",
        "--tls-listen",
        "--certs",
        "--admin-listen",
    ] {
        assert!(header.contains(flag), "the header does not name {flag}");
    }
}

/// Issue 25: without `verify.state_dir` in the file, systemd's state
/// folder (given by `main` as an override's default) is used; the
/// file's own value wins over it.
#[test]
fn the_state_dir_defaults_to_the_one_given() {
    let given = Overrides {
        default_state_dir: Some(PathBuf::from("/var/lib/crawlgate/verify")),
        ..Overrides::default()
    };
    let state_dir = |text: &str| {
        let raw = RawConfig::parse(text).expect("parses");
        Config::from_raw(raw, &given)
            .expect("valid")
            .verify
            .and_then(|v| v.state_dir)
    };
    assert_eq!(
        state_dir(""),
        Some(PathBuf::from("/var/lib/crawlgate/verify"))
    );
    assert_eq!(
        state_dir("[verify]\nstate_dir = \"/srv/lists\""),
        Some(PathBuf::from("/srv/lists"))
    );
    assert_eq!(state_dir("[verify]\nenabled = false"), None);
}

/// The keys of `keys()` that `text`, written like `deploy/crawlgate.toml`,
/// does not document: a key is documented by a line `key = …` or
/// `# key = …` under its section's `[section]` header (top-level keys
/// before the first header), or, for a table of tables, by a
/// `[section.key.…]` header, commented or not.
fn undocumented(text: &str) -> Vec<String> {
    // A `[table]` header's name (not a line of an array of arrays).
    let header = |line: &str| {
        line.strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'))
            .filter(|name| !name.contains(['"', '[', ',']))
            .map(str::to_owned)
    };
    // The dotted keys the lines document.
    let mut documented = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = header(line) {
            section = name;
            continue;
        }
        let written = line.trim_start_matches('#').trim_start();
        if let Some(name) = header(written) {
            documented.push(name);
        } else if let Some((key, _)) = written.split_once('=') {
            let key = key.trim();
            if !key.is_empty() && !key.contains(' ') {
                documented.push(match section.as_str() {
                    "" => key.to_owned(),
                    section => format!("{section}.{key}"),
                });
            }
        }
    }
    keys()
        .into_iter()
        .filter(|key| {
            !documented
                .iter()
                .any(|d| d == key || d.starts_with(&format!("{key}.")))
        })
        .collect()
}

fn deploy_example() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crawlgate.toml");
    std::fs::read_to_string(&path).expect("deploy/crawlgate.toml exists")
}

/// Every key of the raw types (docs/configuration.md and crawlgate.toml(5) are made from
/// this file) is in the example, set or as a comment.
#[test]
fn the_deploy_example_is_valid_and_complete() {
    let text = deploy_example();
    load(&text).expect("the example config is valid");
    assert_eq!(undocumented(&text), Vec::<String>::new());
}

#[test]
fn a_key_left_out_of_the_example_is_named() {
    let text = deploy_example();
    for (line, key) in [
        ("capped_share = 0.25\n", "shed.capped_share"),
        ("# ttl = \"10m\"\n", "bot_cache.ttl"),
        ("# rules_dir = \"/etc/crawlgate/rules\"\n", "rules_dir"),
        ("# [verify.ranges.google]\n", "verify.ranges"),
    ] {
        assert!(text.contains(line), "{line:?} is not in the example");
        assert_eq!(undocumented(&text.replacen(line, "", 1)), [key]);
    }
}

/// `mode`: `enforce` by default, `observe` from the file or `--mode`
/// (the flag wins), anything else refused with the key's line.
#[test]
fn the_mode_is_read_from_the_file_and_the_flag() {
    let mode = |text: &str, flag: Option<&str>| {
        let raw = RawConfig::parse(text).expect("parses");
        let o = Overrides {
            mode: flag.map(str::to_owned),
            ..Overrides::default()
        };
        Config::from_raw(raw, &o).map(|c| c.mode)
    };
    assert_eq!(mode("", None).expect("valid"), Mode::Enforce);
    assert_eq!(
        mode("mode = \"observe\"", None).expect("valid"),
        Mode::Observe
    );
    assert_eq!(
        mode("mode = \"observe\"", Some("enforce")).expect("valid"),
        Mode::Enforce
    );
    let err = mode("mode = \"watch\"", None).expect_err("invalid");
    assert!(
        err.to_string().contains("mode: \"watch\" is not one of"),
        "{err}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "listen = \"127.0.0.1:1\"\nmode = \"watch\"\n").expect("write");
    let err = Config::load(Some(&path), &Overrides::default()).expect_err("invalid");
    assert!(err.to_string().contains("c.toml:2: mode: "), "{err}");
}
