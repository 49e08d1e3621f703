//! The Debian package (`cargo deb`, metadata in Cargo.toml): the man pages
//! it ships, committed under deploy/man/, are what `crawlgate man` writes
//! now; its unit, deploy/debian/crawlgate.service, is deploy/crawlgate.service
//! with the binary at /usr/bin; and, where cargo-deb is installed, the
//! package builds, lists what it should, unpacks into a scratch root where
//! its binary, config, unit and pages work, and installs there with
//! `dpkg --root`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_crawlgate");

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// Runs `program args`, which must succeed; its stdout.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The files under `dir`, as paths relative to it, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                let rel = path.strip_prefix(base).expect("under base");
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn the_committed_man_pages_are_what_crawlgate_man_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let man1 = dir.path().join("man1");
    run(BIN, &["man", "--out", man1.to_str().expect("utf-8 path")]);
    let committed = Path::new(ROOT).join("deploy/man");
    let refresh =
        "refresh them with `cargo run -- man --out deploy/man/man1` and commit deploy/man";
    let written = files(dir.path());
    assert_eq!(
        files(&committed),
        written,
        "the pages under deploy/man are not the ones `crawlgate man` writes: {refresh}"
    );
    for page in &written {
        assert!(
            read(&committed.join(page)) == read(&dir.path().join(page)),
            "deploy/man/{page} differs from what `crawlgate man` writes: {refresh}"
        );
    }
    // The pages depend on the source alone: the same on every build.
    for page in &written {
        let roff = read(&dir.path().join(page));
        let version = crawlgate::cli::version::SHORT;
        assert!(!roff.contains(version), "{page} names the build: {version}");
    }
}

/// A unit without the comment lines above `[Unit]`.
fn unit_body(unit: &str) -> &str {
    &unit[unit.find("[Unit]").expect("a [Unit] section")..]
}

#[test]
fn the_package_unit_is_the_deploy_unit_with_the_binary_in_usr_bin() {
    let deploy = read(&Path::new(ROOT).join("deploy/crawlgate.service"));
    let package = read(&Path::new(ROOT).join("deploy/debian/crawlgate.service"));
    assert!(!package.contains("/usr/local/"), "{package}");
    assert!(
        package.contains("\nExecStart=/usr/bin/crawlgate --config /etc/crawlgate/crawlgate.toml\n")
    );
    assert_eq!(
        unit_body(&package),
        unit_body(&deploy).replace("/usr/local/bin/crawlgate", "/usr/bin/crawlgate"),
        "deploy/debian/crawlgate.service must be deploy/crawlgate.service (below its \
         opening comment) with /usr/bin/crawlgate: change both"
    );
    // The static user the package creates is the unit's.
    let sysusers = read(&Path::new(ROOT).join("deploy/debian/crawlgate.sysusers"));
    assert!(
        sysusers.lines().any(|l| l.starts_with("u crawlgate ")),
        "{sysusers}"
    );
    assert!(package.contains("\nUser=crawlgate\n") && package.contains("\nGroup=crawlgate\n"));
    assert!(package.contains("\nStateDirectory=crawlgate\n"));
}

/// What the package must hold, besides the man pages.
const EXPECTED: &[&str] = &[
    "./usr/bin/crawlgate",
    "./etc/crawlgate/crawlgate.toml",
    "./usr/lib/systemd/system/crawlgate.service",
    "./usr/lib/sysusers.d/crawlgate.conf",
    "./usr/share/crawlgate/rules/README.md",
    "./usr/share/crawlgate/rules/search.txt",
    "./usr/share/crawlgate/rules/ai.txt",
    "./usr/share/doc/crawlgate/README.md",
    "./usr/share/doc/crawlgate/README.Debian",
    "./usr/share/doc/crawlgate/docs/operator-guide.md",
    "./usr/share/doc/crawlgate/docs/configuration.md",
    "./usr/share/doc/crawlgate/CHANGELOG.md",
    "./usr/share/doc/crawlgate/copyright",
    "./usr/share/man/man1/crawlgate.1.gz",
    "./usr/share/man/man1/crawlgate-check-config.1.gz",
    "./usr/share/man/man5/crawlgate.toml.5.gz",
];

/// Builds the package with `cargo deb` into a temporary folder: its path.
/// `cargo deb` runs `cargo build --release` (the target folder's release
/// build: a no-op when fresh, a full LTO build of several minutes when not).
fn build_package(out: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let started = std::time::Instant::now();
    let built = Command::new(&cargo)
        .args(["deb", "--manifest-path"])
        .arg(Path::new(ROOT).join("Cargo.toml"))
        .arg("--output")
        .arg(out)
        .output()
        .expect("cargo deb");
    assert!(built.status.success(), "cargo deb: {}", text(&built));
    println!("cargo deb took {:?}", started.elapsed());
    let debs: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("output folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "{debs:?}: {}", text(&built));
    debs.into_iter().next().expect("one package")
}

#[test]
fn cargo_deb_builds_a_package_that_unpacks_and_installs() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let has_deb = Command::new(&cargo)
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    let has_dpkg = Command::new("dpkg-deb").arg("--version").output().is_ok();
    if !has_deb || !has_dpkg {
        println!("cargo-deb or dpkg-deb not installed: the Debian package is not built");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let deb = build_package(dir.path());
    let deb_path = deb.to_str().expect("utf-8 path");
    let size = std::fs::metadata(&deb).expect("package").len();
    println!("{}: {size} bytes", deb.display());

    // The control file: name, resolved dependencies, section.
    let info = run("dpkg-deb", &["-I", deb_path]);
    assert!(info.contains("\n Package: crawlgate\n"), "{info}");
    assert!(info.contains("\n Section: httpd\n"), "{info}");
    let depends = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("Depends: "))
        .unwrap_or_else(|| panic!("no Depends: {info}"));
    assert!(!depends.contains('$'), "unresolved: {depends}");
    assert!(depends.contains("libc6"), "{depends}");
    assert!(
        depends.contains("systemd | systemd-standalone-sysusers"),
        "{depends}"
    );
    let conffiles = run("dpkg-deb", &["-I", deb_path, "conffiles"]);
    assert_eq!(conffiles.trim(), "/etc/crawlgate/crawlgate.toml");
    let postinst = run("dpkg-deb", &["-I", deb_path, "postinst"]);
    assert!(
        postinst.contains("systemd-sysusers") && postinst.contains("deb-systemd-helper"),
        "the postinst creates the user and records the unit: {postinst}"
    );
    assert!(
        !postinst.contains("#DEBHELPER#") && !postinst.contains("deb-systemd-invoke start"),
        "not started on install: {postinst}"
    );
    let postrm = run("dpkg-deb", &["-I", deb_path, "postrm"]);
    assert!(
        postrm.contains("deb-systemd-helper purge")
            && postrm.contains("/var/lib/private/crawlgate")
    );
    run("dpkg-deb", &["-I", deb_path, "prerm"]);

    // Every expected path, and every committed page.
    let listing = run("dpkg-deb", &["-c", deb_path]);
    let paths: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    let mut expected: Vec<String> = EXPECTED.iter().map(|p| (*p).to_owned()).collect();
    for page in files(&Path::new(ROOT).join("deploy/man")) {
        expected.push(format!("./usr/share/man/{page}.gz"));
    }
    for path in &expected {
        assert!(paths.contains(&path.as_str()), "{path} missing:\n{listing}");
    }
    assert!(
        !paths.iter().any(|p| p.contains("/usr/local/")),
        "{listing}"
    );

    // Unpacked into a scratch root: the binary runs, the config passes
    // check-config (its state folder a temporary one, as systemd's
    // StateDirectory would give), the unit verifies, the pages render.
    let root = dir.path().join("root");
    run(
        "dpkg",
        &["-x", deb_path, root.to_str().expect("utf-8 path")],
    );
    let bin = root.join("usr/bin/crawlgate");
    let bin = bin.to_str().expect("utf-8 path");
    let version = run(bin, &["--version"]);
    assert!(
        version.starts_with(&format!("crawlgate {}", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state folder");
    let config = root.join("etc/crawlgate/crawlgate.toml");
    let checked = Command::new(bin)
        .arg("check-config")
        .arg(&config)
        .env("STATE_DIRECTORY", &state)
        .output()
        .expect("check-config");
    assert!(checked.status.success(), "check-config: {}", text(&checked));
    verify_unit(&root, bin);
    render_pages(&root);

    install_into_root(dir.path(), deb_path);
}

/// `systemd-analyze verify` of the unpacked unit, its binary the unpacked
/// one; skipped with one line where the tool is missing.
fn verify_unit(root: &Path, bin: &str) {
    let unit = read(&root.join("usr/lib/systemd/system/crawlgate.service"));
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("crawlgate.service");
    std::fs::write(&path, unit.replace("/usr/bin/crawlgate", bin)).expect("write");
    let Ok(out) = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
    else {
        println!("systemd-analyze not found: the packaged unit is not verified");
        return;
    };
    let report = text(&out);
    assert!(
        out.status.success() && !report.contains("crawlgate.service"),
        "systemd-analyze verify: {report}"
    );
}

/// Every packaged page renders with `man -l` without a warning; skipped
/// with one line where man is missing.
fn render_pages(root: &Path) {
    let man = root.join("usr/share/man");
    for page in files(&man) {
        let path = man.join(&page);
        let Ok(out) = Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANWIDTH", "80")
            .env("LC_ALL", "C.UTF-8")
            .env_remove("MANPAGER")
            .env_remove("PAGER")
            .output()
        else {
            println!("man not found: the packaged pages are not rendered");
            return;
        };
        let errors = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && errors.trim().is_empty(),
            "man -l {page}: {errors}"
        );
        let name = page
            .rsplit('/')
            .next()
            .and_then(|f| f.strip_suffix(".gz"))
            .and_then(|f| f.rsplit_once('.'))
            .expect("NAME.SECTION.gz")
            .0;
        let shown = String::from_utf8_lossy(&out.stdout).replace(['\u{2010}', '\u{2212}'], "-");
        assert!(
            shown.contains(name),
            "{page} does not name {name}:\n{shown}"
        );
    }
}

/// `dpkg --root` into an empty scratch root, the maintainer scripts run
/// outside it with $DPKG_ROOT (systemd-sysusers and deb-systemd-helper
/// honour it): the user is created there, the unit is not enabled, and a
/// purge removes everything. The root's dpkg database knows no libc6 or
/// systemd, hence --force-depends. Without root, dpkg cannot give the
/// files their owner: then the failure is printed, not asserted.
fn install_into_root(dir: &Path, deb: &str) {
    let root = dir.join("installed");
    for sub in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
        "etc",
    ] {
        std::fs::create_dir_all(root.join(sub)).expect("admin folders");
    }
    std::fs::write(root.join("var/lib/dpkg/status"), "").expect("status");
    let root_arg = format!("--root={}", root.to_str().expect("utf-8 path"));
    let dpkg = |args: &[&str]| {
        Command::new("dpkg")
            .arg(&root_arg)
            .args([
                "--force-not-root",
                "--force-script-chrootless",
                "--force-depends",
                "--no-triggers",
            ])
            .args(args)
            .output()
            .expect("dpkg")
    };
    let is_root = run("id", &["-u"]).trim() == "0";
    let installed = dpkg(&["-i", deb]);
    if !installed.status.success() && !is_root {
        println!(
            "dpkg --root as a user failed, not checked: {}",
            text(&installed)
        );
        return;
    }
    assert!(
        installed.status.success(),
        "dpkg --root -i: {}",
        text(&installed)
    );
    assert!(root.join("usr/bin/crawlgate").is_file());
    let passwd = read(&root.join("etc/passwd"));
    assert!(
        passwd.lines().any(|l| l.starts_with("crawlgate:")),
        "the postinst creates the user: {passwd}"
    );
    assert!(
        !root
            .join("etc/systemd/system/multi-user.target.wants/crawlgate.service")
            .exists(),
        "installed disabled"
    );
    let purged = dpkg(&["--purge", "crawlgate"]);
    assert!(
        purged.status.success(),
        "dpkg --root --purge: {}",
        text(&purged)
    );
    assert!(!root.join("usr/bin/crawlgate").exists());
    assert!(!root.join("etc/crawlgate/crawlgate.toml").exists());
}
