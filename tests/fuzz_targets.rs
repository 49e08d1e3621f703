//! The fuzz targets under `fuzz/` still build against the crate.
//!
//! `cargo fuzz` needs a nightly toolchain and is not part of `cargo test`,
//! so nothing else would notice a change to the crate's API that breaks a
//! target (it happened twice). This type-checks every target with the
//! toolchain running the tests, without linking libFuzzer.

use std::path::Path;
use std::process::Command;

#[test]
fn the_fuzz_targets_type_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-check");
    let out = Command::new(env!("CARGO"))
        .current_dir(root.join("fuzz"))
        .args(["check", "--bins", "--no-default-features", "--locked"])
        .env("CARGO_TARGET_DIR", &target_dir)
        // The outer build's flags (coverage, sanitizers) are not the
        // fuzz crate's.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("run cargo check on fuzz/");
    assert!(
        out.status.success(),
        "a fuzz target no longer builds (cd fuzz && cargo check --bins --no-default-features):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every target declared is one cargo checked: none left out of the
    // manifest by mistake.
    let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).expect("fuzz manifest");
    for entry in std::fs::read_dir(root.join("fuzz/fuzz_targets")).expect("fuzz targets") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).expect("a name");
        if name == "pieces" {
            // A module the targets share, not a target.
            continue;
        }
        assert!(
            manifest.contains(&format!("path = \"fuzz_targets/{name}.rs\"")),
            "fuzz/fuzz_targets/{name}.rs is not a [[bin]] of fuzz/Cargo.toml"
        );
    }
}
