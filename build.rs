//! Build facts for `crawlgate --version`, handed to the crate as
//! environment variables: the commit, the build date, the Cargo features,
//! the target and the profile.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

include!("src/cli/civil_date.rs");

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&dir);
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/cli/civil_date.rs");
    println!("cargo:rerun-if-env-changed=CRAWLGATE_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");

    let commit = git_commit(dir)
        .or_else(|| std::env::var("CRAWLGATE_COMMIT").ok())
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=CRAWLGATE_BUILD_COMMIT={commit}");

    // Reproducible builds set SOURCE_DATE_EPOCH (Debian: the changelog's
    // date); without it, the date of this build.
    let seconds = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) => value
            .trim()
            .parse::<i64>()
            .unwrap_or_else(|_| panic!("SOURCE_DATE_EPOCH is not whole seconds: {value:?}")),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
    };
    println!(
        "cargo:rustc-env=CRAWLGATE_BUILD_DATE={}",
        civil_date(seconds)
    );

    // Cargo features enabled for this build, as Cargo.toml names them.
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(name, _)| {
            let feature = name.strip_prefix("CARGO_FEATURE_")?;
            Some(feature.to_lowercase().replace('_', "-"))
        })
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(", ")
    };
    println!("cargo:rustc-env=CRAWLGATE_BUILD_FEATURES={features}");
    for name in ["TARGET", "PROFILE"] {
        let value = std::env::var(name).unwrap_or_else(|_| "unknown".to_owned());
        println!("cargo:rustc-env=CRAWLGATE_BUILD_{name}={value}");
    }
}

/// `git` run in `dir`: its output, trimmed, when it ran and succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The checkout's commit, 12 hex digits, with `-dirty` when files differ
/// from it; none outside a git checkout or without git. The build script
/// runs again when HEAD, the branch it names or the index changes (a
/// commit, a checkout, `git add`), not at every build: an edit nobody
/// staged yet leaves the mark as it was.
fn git_commit(dir: &Path) -> Option<String> {
    if !dir.join(".git").exists() {
        return None;
    }
    let commit = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = vec![
        "HEAD".to_owned(),
        "index".to_owned(),
        "packed-refs".to_owned(),
    ];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        // The paths of a worktree's own HEAD and the shared refs differ:
        // git says where each one is.
        if let Some(path) = git(dir, &["rev-parse", "--git-path", &name]) {
            let path = dir.join(path);
            // A path that does not exist would rerun the script every build.
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    let dirty = git(dir, &["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}
