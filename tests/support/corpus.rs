//! Public real-world User-Agent corpora, fetched through package registries
//! and cached, for the classifier's corpus tests and benchmark.
//!
//! * the fixtures shipped in the Rust `isbot` crate (a dev-dependency, so
//!   cargo fetches it): bots.txt, browsers.txt, myip.ms live bots, ua-parser
//!   bots and browsers, omrilotan's browsers;
//! * from the npm registry (fetched with `npm pack` on first use, cached in
//!   `target/corpus/`): `crawler-user-agents` (the instances of each
//!   pattern), `user-agents` (browser UAs seen in real traffic) and
//!   `top-user-agents`.
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
    let json_list = |path: &Path| -> Result<Vec<String>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    };

    let cua_dir = npm_package(CRAWLER_USER_AGENTS)?;
    let cua: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cua_dir.join("crawler-user-agents.json"))
            .map_err(|e| format!("crawler-user-agents.json: {e}"))?,
    )
    .map_err(|e| format!("crawler-user-agents.json: {e}"))?;
    let cua_instances: Vec<String> = cua
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.get("instances")?.as_array())
        .flatten()
        .filter_map(|i| i.as_str().map(str::to_owned))
        .collect();

    let ua_dir = npm_package(USER_AGENTS)?;
    let ua_json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ua_dir.join("dist/user-agents.json"))
            .map_err(|e| format!("user-agents.json: {e}"))?,
    )
    .map_err(|e| format!("user-agents.json: {e}"))?;
    let mut real_traffic: Vec<String> = ua_json
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("userAgent")?.as_str().map(str::to_owned))
        .collect();
    real_traffic.sort();
    real_traffic.dedup();

    let top_dir = npm_package(TOP_USER_AGENTS)?;

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
            uas: keep(json_list(&fixtures.join("myip-ms-live-bots.json"))?)
                .into_iter()
                .filter(|ua| !ua.contains("CUBOT"))
                .collect(),
        },
        Corpus {
            name: "ua-parser bots",
            label: Label::Bot,
            uas: keep(json_list(&fixtures.join("ua-parser-bots.json"))?),
        },
        Corpus {
            name: "crawler-user-agents",
            label: Label::Bot,
            uas: keep(cua_instances),
        },
        Corpus {
            name: "isbot browsers.txt",
            label: Label::Browser,
            uas: keep(text_lines("browsers.txt")?),
        },
        Corpus {
            name: "ua-parser browsers",
            label: Label::Browser,
            uas: keep(json_list(&fixtures.join("ua-parser-browsers.json"))?),
        },
        Corpus {
            name: "omrilotan browsers",
            label: Label::Browser,
            uas: keep(json_list(&fixtures.join("omrilotan-browsers.json"))?),
        },
        Corpus {
            name: "user-agents (npm)",
            label: Label::Browser,
            uas: keep(real_traffic),
        },
        Corpus {
            name: "top-user-agents",
            label: Label::Browser,
            uas: keep(json_list(&top_dir.join("src/index.json"))?),
        },
    ])
}

/// Browser-labelled entries that are automation tools or not browsers at
/// all (scrapinghub's Splash renderer, Cypress, SlimerJS, jsdom). Counted
/// raw and reported separately.
pub fn disputed_browser_label(ua: &str) -> bool {
    ua.contains(") splash ")
        || ua.contains(" Cypress/")
        || ua.contains(" SlimerJS/")
        || ua.contains(" jsdom")
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
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let spec = format!("{name}@{version}");
    let packed = Command::new("npm")
        .args(["pack", &spec, "--silent", "--pack-destination"])
        .arg(&dir)
        .output()
        .map_err(|e| format!("cannot run npm to fetch {spec}: {e}"))?;
    if !packed.status.success() {
        return Err(format!(
            "npm pack {spec} failed: {}",
            String::from_utf8_lossy(&packed.stderr).trim()
        ));
    }
    let tarball = dir.join(format!("{name}-{version}.tgz"));
    let untar = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&dir)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if !untar.success() || !package.join("package.json").is_file() {
        return Err(format!("cannot unpack {}", tarball.display()));
    }
    Ok(package)
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
