//! Public real-world User-Agent corpora, fetched through package registries
//! and cached, for the classifier's corpus tests and benchmark.
//!
//! * the fixtures shipped in the Rust `isbot` crate (a dev-dependency, so
//!   cargo fetches it): bots.txt, browsers.txt, myip.ms live bots, ua-parser
//!   bots and browsers, omrilotan's browsers;
//! * from the npm registry (fetched with `npm pack` on first use, cached in
//!   `target/corpus/`): `crawler-user-agents` (the instances of each
//!   pattern), `user-agents` (browser UAs seen in real traffic),
//!   `top-user-agents`, the test fixtures that `ua-parser-js` 0.7.28 and
//!   `express-useragent` 1.0.15 shipped (browsers, devices and media players;
//!   robots), and, as the final held-out source only, `random-useragent`
//!   0.5.0 (a hand-sorted list: spiders, downloaders, validators, libraries
//!   and feed readers against browsers and devices).
//!
//! When a corpus cannot be had, [`missing`] fails under CI (`CI=true` or
//! `CRAWLGATE_REQUIRE_CORPUS=1`) and skips loudly otherwise.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Robot or browser, as the corpus labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Label {
    Bot,
    Browser,
    /// A person's program that is not a browser (media players): reported,
    /// not held to the browsers' ceilings.
    App,
}

/// One labelled set of User-Agents.
pub struct Corpus {
    pub name: &'static str,
    pub label: Label,
    pub uas: Vec<String>,
}

const CRAWLER_USER_AGENTS: (&str, &str) = ("crawler-user-agents", "1.60.0");
const USER_AGENTS: (&str, &str) = ("user-agents", "2.1.198");
const TOP_USER_AGENTS: (&str, &str) = ("top-user-agents", "2.1.138");
const UA_PARSER_JS: (&str, &str) = ("ua-parser-js", "0.7.28");
const EXPRESS_USERAGENT: (&str, &str) = ("express-useragent", "1.0.15");
const RANDOM_USERAGENT: (&str, &str) = ("random-useragent", "0.5.0");

/// Every corpus, or why one is missing.
pub fn load_all() -> Result<Vec<Corpus>, String> {
    let fixtures = isbot_fixtures()?;
    let text_lines = |file: &str| -> Result<Vec<String>, String> {
        let path = fixtures.join(file);
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(String::from_utf8_lossy(&bytes)
            .lines()
            .map(unquote)
            .collect())
    };

    let cua_dir = npm_package(CRAWLER_USER_AGENTS)?;
    let cua: serde_json::Value = read_json(&cua_dir.join("crawler-user-agents.json"))?;
    let cua_instances: Vec<String> = cua
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.get("instances")?.as_array())
        .flatten()
        .filter_map(|i| i.as_str().map(str::to_owned))
        .collect();

    let ua_dir = npm_package(USER_AGENTS)?;
    let mut real_traffic = field_strings(
        &read_json(&ua_dir.join("dist/user-agents.json"))?,
        "userAgent",
    );
    real_traffic.sort();
    real_traffic.dedup();

    let top_dir = npm_package(TOP_USER_AGENTS)?;

    // ua-parser-js's own fixtures: every browser, device, OS, engine and CPU
    // case, and the media players apart.
    let uapjs = npm_package(UA_PARSER_JS)?.join("test");
    let fixture = |file: &str| -> Result<Vec<String>, String> {
        Ok(field_strings(&read_json(&uapjs.join(file))?, "ua"))
    };
    let mut uapjs_browsers = Vec::new();
    for file in [
        "browser-test.json",
        "device-test.json",
        "os-test.json",
        "engine-test.json",
        "cpu-test.json",
    ] {
        uapjs_browsers.extend(fixture(file)?);
    }
    uapjs_browsers.sort();
    uapjs_browsers.dedup();
    let mut uapjs_players = fixture("mediaplayer-test.json")?;
    uapjs_players.sort();
    uapjs_players.dedup();

    // express-useragent's bot tests: `var source = '<UA>';` per case.
    let express = npm_package(EXPRESS_USERAGENT)?.join("test/bots.test.js");
    let text =
        std::fs::read_to_string(&express).map_err(|e| format!("{}: {e}", express.display()))?;
    let source = regex::Regex::new(r#"var source = (?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")"#)
        .map_err(|e| e.to_string())?;
    let mut express_bots: Vec<String> = source
        .captures_iter(&text)
        .filter_map(|c| {
            c.get(1)
                .or(c.get(2))
                .map(|m| m.as_str().replace("\\'", "'"))
        })
        .collect();
    express_bots.sort();
    express_bots.dedup();

    let keep = |uas: Vec<String>| -> Vec<String> {
        uas.into_iter()
            .filter(|ua| !ua.contains('\n') && !ua.contains('\r'))
            .collect()
    };
    Ok(vec![
        Corpus {
            name: "isbot bots.txt",
            label: Label::Bot,
            uas: keep(text_lines("bots.txt")?),
        },
        Corpus {
            name: "myip.ms live bots",
            label: Label::Bot,
            // myip.ms lists CUBOT phones (real browsers) as bots; the isbot
            // crate's own test skips them for the same reason.
            uas: keep(read_json(&fixtures.join("myip-ms-live-bots.json"))?)
                .into_iter()
                .filter(|ua| !ua.contains("CUBOT"))
                .collect(),
        },
        Corpus {
            name: "ua-parser bots",
            label: Label::Bot,
            uas: keep(read_json(&fixtures.join("ua-parser-bots.json"))?),
        },
        Corpus {
            name: "crawler-user-agents",
            label: Label::Bot,
            uas: keep(cua_instances),
        },
        Corpus {
            name: "express-useragent bots",
            label: Label::Bot,
            uas: keep(express_bots),
        },
        Corpus {
            name: "isbot browsers.txt",
            label: Label::Browser,
            uas: keep(text_lines("browsers.txt")?),
        },
        Corpus {
            name: "ua-parser browsers",
            label: Label::Browser,
            uas: keep(read_json(&fixtures.join("ua-parser-browsers.json"))?),
        },
        Corpus {
            name: "omrilotan browsers",
            label: Label::Browser,
            uas: keep(read_json(&fixtures.join("omrilotan-browsers.json"))?),
        },
        Corpus {
            name: "user-agents (npm)",
            label: Label::Browser,
            uas: keep(real_traffic),
        },
        Corpus {
            name: "top-user-agents",
            label: Label::Browser,
            uas: keep(read_json(&top_dir.join("src/index.json"))?),
        },
        Corpus {
            name: "ua-parser-js tests",
            label: Label::Browser,
            uas: keep(uapjs_browsers),
        },
        Corpus {
            name: "ua-parser-js players",
            label: Label::App,
            uas: keep(uapjs_players),
        },
    ])
}

/// The final held-out source, `random-useragent`'s hand-sorted list: its
/// robot folders (search spiders, other spiders, downloaders, validators,
/// libraries, feed readers) against its browser and device folders; the
/// two folders that mix both (`Miscellaneous/Miscellaneous`,
/// `Mobile Devices/Services`) are left out. The labels were fixed from the
/// folder names before any User-Agent in it was read.
pub fn final_source() -> Result<Vec<Corpus>, String> {
    let dir = npm_package(RANDOM_USERAGENT)?;
    let entries: serde_json::Value = read_json(&dir.join("useragent-data.json"))?;
    const ROBOTS: [&str; 6] = [
        "/Spiders - Search",
        "/Miscellaneous/Bots - Spiders",
        "/Miscellaneous/Downloaders",
        "/Miscellaneous/Validators",
        "/Miscellaneous/Libraries",
        "/Miscellaneous/Feed Readers",
    ];
    const MIXED: [&str; 2] = ["/Miscellaneous/Miscellaneous", "/Mobile Devices/Services"];
    let (mut bots, mut browsers) = (Vec::new(), Vec::new());
    for e in entries.as_array().into_iter().flatten() {
        let (Some(folder), Some(ua)) = (e["folder"].as_str(), e["userAgent"].as_str()) else {
            continue;
        };
        if MIXED.contains(&folder) || ua.contains('\n') || ua.contains('\r') {
            continue;
        }
        if ROBOTS.contains(&folder) {
            bots.push(ua.to_owned());
        } else {
            browsers.push(ua.to_owned());
        }
    }
    Ok(vec![
        Corpus {
            name: "random-useragent bots",
            label: Label::Bot,
            uas: bots,
        },
        Corpus {
            name: "random-useragent browsers",
            label: Label::Browser,
            uas: browsers,
        },
    ])
}

/// Browser-labelled entries that are automation tools or not browser
/// User-Agents at all: counted in the raw figure and reported separately.
/// The categories, each fixed by its shape and not by what crawlgate says:
///
/// * automation: scrapinghub's Splash renderer, Cypress, SlimerJS, jsdom,
///   headless Chrome, PhantomJS;
/// * attacks and markup: shell (`() {`), SQL (`SELECT `), HTML (`<`);
/// * a header line or MIME list instead of a User-Agent (`Accept-Encoding:`,
///   `text/html,…`);
/// * a bare browser name or version with no platform, engine or device at
///   all (`Mozilla/5.0`, `Chrome/41.0 Safari/537.36`, `firefox`, `Internet
///   Explorer 6.0`, `MSIE9`);
/// * one or two bare words with no version, platform or punctuation
///   (`Foo`, `something`, `woot woot`, `NULL`).
pub fn disputed_browser_label(ua: &str) -> bool {
    let automation = ua.contains(") splash ")
        || ua.contains(" Cypress/")
        || ua.contains(" SlimerJS/")
        || ua.contains(" jsdom")
        || ua.contains("HeadlessChrome")
        || ua.contains("PhantomJS");
    let attack =
        ua.contains("() {") || ua.contains('<') || ua.to_ascii_uppercase().contains("SELECT ");
    let not_a_user_agent =
        ua.starts_with("Accept") || ua.starts_with("User-Agent") || ua.starts_with("text/html,");
    // Every word a browser name, a version or filler: no platform, engine or
    // device.
    const BARE: [&str; 10] = [
        "mozilla",
        "chrome",
        "firefox",
        "safari",
        "iceweasel",
        "internet",
        "explorer",
        "msie",
        "opera",
        "compatible",
    ];
    let words: Vec<String> = ua
        .split([' ', '/', '(', ')', ';', '-'])
        .filter(|w| !w.is_empty())
        .map(|w| w.trim_end_matches('.').to_ascii_lowercase())
        .collect();
    let bare_browser = !words.is_empty()
        && words.iter().all(|w| {
            BARE.iter().any(|b| {
                w.starts_with(b) && w[b.len()..].chars().all(|c| c.is_ascii_digit() || c == '.')
            }) || w.chars().all(|c| c.is_ascii_digit() || c == '.')
        });
    let bare_words = words.len() <= 2
        && ua
            .chars()
            .all(|c| c.is_ascii_alphabetic() || c == ' ' || c == '_');
    automation || attack || not_a_user_agent || bare_browser || bare_words
}

/// A JSON file, parsed; errors name the file.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The string field `key` of each object of a JSON array.
fn field_strings(array: &serde_json::Value, key: &str) -> Vec<String> {
    array
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.get(key)?.as_str().map(str::to_owned))
        .collect()
}

fn unquote(line: &str) -> String {
    line.strip_prefix('"')
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or(line)
        .to_owned()
}

/// The `fixtures/` folder of the `isbot` dev-dependency, found with
/// `cargo metadata` (works with any CARGO_HOME or vendoring).
pub fn isbot_fixtures() -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    // Only this machine's platform: the packages of other platforms (macOS
    // TLS roots, Windows APIs) were never downloaded, and --offline would
    // fail on them.
    let host = host_triple()?;
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host,
            "--manifest-path",
        ])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let manifest = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "isbot")
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or("the isbot crate is not among the dependencies")?;
    let dir = Path::new(manifest)
        .parent()
        .ok_or("bad manifest path")?
        .join("fixtures");
    if dir.join("browsers.txt").is_file() {
        Ok(dir)
    } else {
        Err(format!("{} has no browsers.txt", dir.display()))
    }
}

/// The host target triple, from `rustc -vV`.
fn host_triple() -> Result<String, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("rustc -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV printed no host".to_owned())
}

/// The unpacked `package/` folder of an npm package, fetched with
/// `npm pack` on first use and cached under `target/corpus/`.
pub fn npm_package((name, version): (&str, &str)) -> Result<PathBuf, String> {
    let cache = std::env::var_os("CRAWLGATE_CORPUS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/corpus"));
    let dir = cache.join(format!("{name}-{version}"));
    let package = dir.join("package");
    if package.join("package.json").is_file() {
        return Ok(package);
    }
    // Fetched and unpacked in a folder of this thread's own, then moved
    // into place whole: tests running at once never read a package
    // another one is still unpacking.
    let work = dir.join(format!(
        ".unpack-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let spec = format!("{name}@{version}");
    let packed = Command::new("npm")
        .args(["pack", &spec, "--silent", "--pack-destination"])
        .arg(&work)
        .output()
        .map_err(|e| format!("cannot run npm to fetch {spec}: {e}"))?;
    if !packed.status.success() {
        let _ = std::fs::remove_dir_all(&work);
        return Err(format!(
            "npm pack {spec} failed: {}",
            String::from_utf8_lossy(&packed.stderr).trim()
        ));
    }
    let tarball = work.join(format!("{name}-{version}.tgz"));
    let untar = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&work)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if !untar.success() || !work.join("package/package.json").is_file() {
        let _ = std::fs::remove_dir_all(&work);
        return Err(format!("cannot unpack {}", tarball.display()));
    }
    // Another test may have won the race: its package is as good.
    let _ = std::fs::rename(work.join("package"), &package);
    let _ = std::fs::remove_dir_all(&work);
    if package.join("package.json").is_file() {
        Ok(package)
    } else {
        Err(format!("cannot move {name} into {}", package.display()))
    }
}

/// A corpus is missing: fail under CI, skip loudly elsewhere. Returns
/// normally only when skipping.
pub fn missing(why: &str) {
    let required = std::env::var_os("CRAWLGATE_REQUIRE_CORPUS")
        .is_some_and(|v| !v.is_empty() && v != "0")
        || std::env::var_os("CI").is_some_and(|v| v == "true");
    if required {
        panic!("User-Agent corpus missing: {why}");
    }
    eprintln!("SKIPPED: User-Agent corpus missing ({why}); it is fetched on first use through cargo and npm");
}
