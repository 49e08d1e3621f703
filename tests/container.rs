//! The offline container image (`deploy/container/offline.sh`): built
//! with buildah from this test's own crawlgate binary, run with podman on
//! the host network in front of a recording upstream. A robot's `?do=`
//! gets 403 and never reaches the upstream, a person's request does,
//! `/healthz` answers 200, and the image's HEALTHCHECK (`crawlgate
//! health`) passes inside the container.
//!
//! buildah and podman are optional: when they are missing or cannot run
//! here (no user namespaces, no cgroups), the test prints one line saying
//! which and why and returns, unless `CRAWLGATE_REQUIRE_CONTAINER` is set,
//! which makes that a failure. CI does not set it.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::process::{free_addr, BIN};
use support::{get, Upstream, FIREFOX, GOOGLEBOT};

/// The variable that makes missing or unusable container tools a failure.
const REQUIRE: &str = "CRAWLGATE_REQUIRE_CONTAINER";

/// How long one buildah or podman command may take.
const STEP: Duration = Duration::from_secs(180);

fn required() -> bool {
    std::env::var_os(REQUIRE).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Skips (one line) or, when required, fails.
fn unavailable(why: &str) {
    assert!(!required(), "{REQUIRE} is set but {why}");
    eprintln!("SKIPPED: {why} (set {REQUIRE}=1 to make this a failure)");
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

/// What a finished command said.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// The first line of the error that is not podman's complaint about
    /// systemd timers (it has no systemd to schedule health checks with).
    fn first_error(&self) -> String {
        self.stderr
            .lines()
            .find(|l| !l.trim().is_empty() && !l.contains("systemd"))
            .unwrap_or("(no message)")
            .trim()
            .to_owned()
    }
}

/// Runs `program args…` for at most [`STEP`], killing it after that.
fn run(program: &str, args: &[String], env: &[(&str, &str)]) -> Ran {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            return Ran {
                ok: false,
                stdout: String::new(),
                stderr: format!("cannot start {program}: {err}"),
            }
        }
    };
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + STEP;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = reader.join().unwrap_or_default();
    let mut stderr = err_reader.join().unwrap_or_default();
    if status.is_none() {
        stderr.insert_str(0, &format!("{program} took longer than {STEP:?}\n"));
    }
    Ran {
        ok: status.is_some_and(|s| s.success()),
        stdout,
        stderr,
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// buildah and podman on a storage of the test's own (vfs: no overlay
/// mounts needed), removed with everything in it when dropped.
struct Engine {
    storage: tempfile::TempDir,
    runtime: Vec<String>,
    container: Option<String>,
    image: Option<String>,
}

impl Engine {
    fn new() -> Self {
        // crun refuses hybrid cgroup hierarchies; runc runs on them.
        let runtime = match std::env::var("CRAWLGATE_CONTAINER_RUNTIME") {
            Ok(name) if !name.is_empty() => vec!["--runtime".to_owned(), name],
            _ if on_path("runc") => strings(&["--runtime", "runc"]),
            _ => Vec::new(),
        };
        Self {
            storage: tempfile::tempdir().expect("temp dir"),
            runtime,
            container: None,
            image: None,
        }
    }

    fn storage_flags(&self) -> Vec<String> {
        let dir = self.storage.path();
        vec![
            "--root".to_owned(),
            dir.join("root").display().to_string(),
            "--runroot".to_owned(),
            dir.join("run").display().to_string(),
            "--storage-driver".to_owned(),
            "vfs".to_owned(),
        ]
    }

    fn buildah_command(&self) -> String {
        format!("buildah {}", self.storage_flags().join(" "))
    }

    fn podman(&self, args: &[&str]) -> Ran {
        let mut all = self.storage_flags();
        all.extend(strings(&["--cgroup-manager", "cgroupfs"]));
        all.extend(self.runtime.iter().cloned());
        all.extend(strings(args));
        run("podman", &all, &[])
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(container) = self.container.take() {
            self.podman(&["rm", "--force", "--time", "0", &container]);
        }
        if let Some(image) = self.image.take() {
            self.podman(&["rmi", "--force", &image]);
        }
    }
}

fn offline_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/container/offline.sh")
}

/// The image's config for this test: deploy/container/crawlgate.toml with
/// loopback ports that are free, the test upstream, and verification off
/// (it would fetch the operators' lists from the internet).
fn test_config(listen: &str, admin: &str, upstream: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/container/crawlgate.toml");
    let text = std::fs::read_to_string(file).expect("deploy/container/crawlgate.toml");
    let replaced = text
        .replace("\"0.0.0.0:8080\"", &format!("\"{listen}\""))
        .replace("\"0.0.0.0:9090\"", &format!("\"{admin}\""))
        .replace("\"http://site:80\"", &format!("\"{upstream}\""))
        .replace("[verify]\n", "[verify]\nenabled = false\n");
    assert_ne!(replaced, text, "the container config has the expected keys");
    assert!(replaced.contains("enabled = false"), "{replaced}");
    replaced
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_image_runs_blocks_robots_and_passes_its_health_check() {
    for tool in ["buildah", "podman"] {
        if !on_path(tool) {
            unavailable(&format!("`{tool}` is not on PATH"));
            return;
        }
    }
    let mut engine = Engine::new();
    let name = format!("crawlgate-test-{}", std::process::id());
    let image = format!("localhost/{name}:latest");

    // Build: the script stages the root and commits it with buildah.
    let script = offline_script().display().to_string();
    let buildah = engine.buildah_command();
    let built = tokio::task::spawn_blocking({
        let image = image.clone();
        move || run(&script, &[BIN.to_owned(), image], &[("BUILDAH", &buildah)])
    })
    .await
    .expect("build ran");
    if !built.ok {
        unavailable(&format!(
            "buildah cannot build here: {}",
            built.first_error()
        ));
        return;
    }
    engine.image = Some(image.clone());

    // The image says what the Containerfile says.
    let inspected = engine.podman(&[
        "image",
        "inspect",
        "--format",
        "{{.Config.User}} {{json .Config.ExposedPorts}} {{json .HealthCheck.Test}}",
        &image,
    ]);
    assert!(inspected.ok, "{}", inspected.stderr);
    let said = inspected.stdout.trim();
    assert!(said.starts_with("65532:65532 "), "{said}");
    for port in ["8080", "8443", "9090"] {
        assert!(said.contains(&format!("\"{port}")), "{said}");
    }
    assert!(said.contains("\"health\""), "{said}");

    // Run it on the host network in front of a recording upstream.
    let upstream = Upstream::start().await;
    let listen = free_addr();
    let admin = free_addr();
    let dir = tempfile::tempdir().expect("temp dir");
    let config_dir = dir.path().join("etc");
    std::fs::create_dir(&config_dir).expect("mkdir");
    let config = config_dir.join("crawlgate.toml");
    std::fs::write(
        &config,
        test_config(&listen.to_string(), &admin.to_string(), &upstream.url()),
    )
    .expect("write config");
    // Read by uid 65532 in the container.
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [
        (dir.path(), 0o755),
        (config_dir.as_path(), 0o755),
        (config.as_path(), 0o644),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let volume = format!("{}:/etc/crawlgate:ro", config_dir.display());
    let started = {
        let args = [
            "run",
            "--detach",
            "--name",
            &name,
            "--network",
            "host",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--ulimit",
            "nofile=4096:4096",
            "--ulimit",
            "nproc=4096:4096",
            "--volume",
            &volume,
            &image,
        ];
        let args = strings(&args);
        let engine = &engine;
        tokio::task::block_in_place(|| {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            engine.podman(&refs)
        })
    };
    if !started.ok {
        unavailable(&format!(
            "podman cannot run a container here: {}",
            started.first_error()
        ));
        return;
    }
    engine.container = Some(name.clone());

    // Up within 30 s.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(admin).is_err()
        || std::net::TcpStream::connect(listen).is_err()
    {
        if Instant::now() > deadline {
            let logs = engine.podman(&["logs", &name]);
            panic!(
                "the container did not start listening:\n{}{}",
                logs.stdout, logs.stderr
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let health = get(admin, "localhost", "/healthz", None).await;
    assert_eq!(health.status, 200, "{}", health.text());

    let robot = get(listen, "example.com", "/page?do=edit", Some(GOOGLEBOT)).await;
    assert_eq!(robot.status, 403, "{}", robot.text());
    assert!(
        upstream.last("/page?do=edit").is_none(),
        "the robot's action link reached the upstream"
    );

    let person = get(listen, "example.com", "/page?id=7", Some(FIREFOX)).await;
    assert_eq!(person.status, 200, "{}", person.text());
    assert!(
        upstream.last("/page?id=7").is_some(),
        "the person's request reached the upstream"
    );

    // The image's HEALTHCHECK, run by podman, and the command itself.
    let checked = tokio::task::block_in_place(|| engine.podman(&["healthcheck", "run", &name]));
    assert!(
        checked.ok,
        "podman healthcheck run: {}{}",
        checked.stdout, checked.stderr
    );
    let exec = tokio::task::block_in_place(|| {
        engine.podman(&[
            "exec",
            &name,
            "/usr/local/bin/crawlgate",
            "health",
            "--config",
            "/etc/crawlgate/crawlgate.toml",
        ])
    });
    assert!(
        exec.ok,
        "crawlgate health in the container: {}",
        exec.stderr
    );
    assert!(
        exec.stdout.contains("/healthz: HTTP/1.1 200"),
        "{}",
        exec.stdout
    );

    // Stopped by SIGTERM (its STOPSIGNAL), drained, within the grace.
    let stopped = tokio::task::block_in_place(|| engine.podman(&["stop", "--time", "20", &name]));
    assert!(stopped.ok, "podman stop: {}", stopped.stderr);
}

/// The Containerfile's instructions, continuation lines joined and
/// comments dropped: (instruction, arguments).
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                let (word, rest) = current.split_once(' ').unwrap_or((current.as_str(), ""));
                out.push((word.to_uppercase(), rest.trim().to_owned()));
                current.clear();
            }
        }
    }
    out
}

/// The registry build cannot run here (no registry to pull the Rust and
/// distroless images from), so its file is checked instead: two stages,
/// a numeric non-root user that is the Deployment's, a health check that
/// is `crawlgate health`, the ports of the container config, its volumes,
/// exec-form entry point, and a config that passes check-config.
#[test]
fn the_containerfile_says_what_the_deploy_forms_say() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("deploy/container/Containerfile"))
        .expect("deploy/container/Containerfile");
    let all = instructions(&text);
    let stages: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, (word, _))| word == "FROM")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(stages.len(), 2, "two stages: {all:?}");
    let (build, run_stage) = (&all[stages[0]..stages[1]], &all[stages[1]..]);
    assert!(
        build[0].1.starts_with("docker.io/library/rust:1-bookworm "),
        "{:?}",
        build[0]
    );
    assert!(
        run_stage[0]
            .1
            .starts_with("gcr.io/distroless/cc-debian12:nonroot"),
        "{:?}",
        run_stage[0]
    );
    let find = |stage: &[(String, String)], word: &str| -> Vec<String> {
        stage
            .iter()
            .filter(|(w, _)| w == word)
            .map(|(_, a)| a.clone())
            .collect()
    };
    assert!(
        find(build, "RUN")
            .iter()
            .any(|r| r.contains("cargo build --release --locked")),
        "{build:?}"
    );
    assert!(find(build, "ARG")
        .iter()
        .any(|a| a.starts_with("CRAWLGATE_COMMIT")));
    assert_eq!(find(build, "ENV"), ["CRAWLGATE_COMMIT=${CRAWLGATE_COMMIT}"]);

    // The user: numeric, not root, the Kubernetes Deployment's.
    let user = find(run_stage, "USER");
    assert_eq!(user.len(), 1, "{run_stage:?}");
    let (uid, gid) = user[0].split_once(':').expect("USER uid:gid");
    let uid: u32 = uid.parse().expect("numeric uid");
    let _: u32 = gid.parse().expect("numeric gid");
    assert_ne!(uid, 0);
    let deployment = std::fs::read_to_string(root.join("deploy/kubernetes/deployment.yaml"))
        .expect("deployment.yaml");
    assert!(
        deployment.contains(&format!("runAsUser: {uid}")),
        "the Deployment runs as {uid}"
    );

    // The health check is the health subcommand, on the baked config.
    let health = find(run_stage, "HEALTHCHECK");
    assert_eq!(health.len(), 1);
    assert!(
        health[0].contains(
            r#"CMD ["/usr/local/bin/crawlgate", "health", "--config", "/etc/crawlgate/crawlgate.toml"]"#
        ),
        "{}",
        health[0]
    );
    for word in ["ENTRYPOINT", "CMD"] {
        let value = find(run_stage, word);
        assert_eq!(value.len(), 1, "{word}");
        assert!(
            value[0].starts_with('[') && value[0].ends_with(']'),
            "{word} in exec form"
        );
    }
    assert_eq!(find(run_stage, "STOPSIGNAL"), ["SIGTERM"]);
    assert!(find(run_stage, "LABEL")
        .iter()
        .any(|l| l.contains("org.opencontainers.image.")));
    let copies = find(run_stage, "COPY").join("\n");
    assert!(copies.contains("/usr/local/bin/crawlgate"), "{copies}");
    assert!(copies.contains("/etc/crawlgate"), "{copies}");

    // The exposed ports are the container config's: listen, tls (optional,
    // commented out) and admin.
    let config_path = root.join("deploy/container/crawlgate.toml");
    let config_text = std::fs::read_to_string(&config_path).expect("container config");
    let config: toml::Value = toml::from_str(&config_text).expect("TOML");
    let port = |addr: &str| addr.rsplit(':').next().expect("port").to_owned();
    let mut ports = vec![
        port(config["listen"].as_str().expect("listen")),
        port(config["admin"]["listen"].as_str().expect("admin.listen")),
    ];
    let tls = config_text
        .split("[tls]")
        .nth(1)
        .and_then(|section| {
            section
                .lines()
                .find(|l| l.trim_start_matches(['#', ' ']).starts_with("listen = "))
        })
        .expect("a [tls] listen line, set or commented");
    ports.push(port(tls.trim().trim_end_matches('"')));
    ports.sort();
    let mut exposed: Vec<String> = find(run_stage, "EXPOSE")
        .iter()
        .flat_map(|e| e.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    exposed.sort();
    assert_eq!(exposed, ports);

    // The volumes hold the config folder and the verify state.
    let volumes = find(run_stage, "VOLUME").join(" ");
    for dir in ["/etc/crawlgate", "/var/lib/crawlgate"] {
        assert!(volumes.contains(&format!("\"{dir}\"")), "{volumes}");
    }
    let state = config["verify"]["state_dir"]
        .as_str()
        .expect("verify.state_dir");
    assert!(state.starts_with("/var/lib/crawlgate/"), "{state}");
    assert!(config["admin"]["listen"]
        .as_str()
        .expect("a string")
        .starts_with("0.0.0.0:"));
    assert!(config["listen"]
        .as_str()
        .expect("a string")
        .starts_with("0.0.0.0:"));

    // The config the image carries passes check-config.
    let checked = Command::new(BIN)
        .arg("check-config")
        .arg(&config_path)
        .output()
        .expect("check-config");
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );

    // The context leaves out the build folder and the repository.
    for ignore in [".containerignore", ".dockerignore"] {
        let text = std::fs::read_to_string(root.join(ignore)).expect(ignore);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        assert!(
            lines.contains(&"target") && lines.contains(&".git"),
            "{ignore}"
        );
    }
}
