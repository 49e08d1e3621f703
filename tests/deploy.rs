//! The files under deploy/ that operators copy: every PromQL expression of
//! the Prometheus rules and the Grafana dashboard parses, and names only
//! metrics crawlgate exports; the Kubernetes manifests parse, agree with
//! the config their ConfigMap holds (ports, probes, drain time, volumes),
//! and that config passes `crawlgate check-config` and serves the probes
//! and a robot's 403 when the real binary runs it.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;

use support::metrics::exported;
use yaml_rust2::{Yaml, YamlLoader};

fn deploy(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn check(expr: &str, exported: &BTreeSet<String>, source: &str) {
    promql_parser::parser::parse(expr).unwrap_or_else(|e| panic!("{source}: {expr}: {e}"));
    let re = regex::Regex::new(r"\bcrawlgate_[a-z_]+").expect("regex");
    for name in re.find_iter(expr) {
        assert!(
            exported.contains(name.as_str()),
            "{source}: {expr} names {} which crawlgate does not export ({exported:?})",
            name.as_str()
        );
    }
}

#[test]
fn the_prometheus_rules_parse_and_name_real_metrics() {
    let exported = exported();
    let rules = deploy("prometheus/crawlgate.rules.yml");
    let exprs: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr:"))
        .map(str::trim)
        .collect();
    assert!(exprs.len() >= 8, "{exprs:?}");
    for expr in exprs {
        check(expr, &exported, "crawlgate.rules.yml");
    }
}

#[test]
fn the_grafana_dashboard_parses_and_names_real_metrics() {
    let exported = exported();
    let dashboard: serde_json::Value =
        serde_json::from_str(&deploy("grafana/crawlgate.json")).expect("valid JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut count = 0;
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            check(expr, &exported, "grafana/crawlgate.json");
            count += 1;
        }
    }
    // The four questions of the README are on the dashboard.
    let all: String = panels.iter().map(|p| p["targets"].to_string()).collect();
    for question in [
        "decision=\\\"block\\\"",
        "class!~\\\"human|none\\\"",
        "histogram_quantile(0.99",
        "code=\\\"5xx\\\"",
    ] {
        assert!(all.contains(question), "the dashboard lacks {question}");
    }
    assert!(count >= 10, "{count} queries");
}

/// Every document of `deploy/kubernetes/NAME`, parsed.
fn manifest(name: &str) -> Vec<Yaml> {
    let text = deploy(&format!("kubernetes/{name}"));
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("kubernetes/{name}: {e}"))
}

/// The one document of `deploy/kubernetes/NAME`, of kind `kind`.
fn object(name: &str, kind: &str) -> Yaml {
    let mut docs = manifest(name);
    assert_eq!(docs.len(), 1, "kubernetes/{name}: one object");
    let doc = docs.remove(0);
    assert_eq!(doc["kind"].as_str(), Some(kind), "kubernetes/{name}");
    doc
}

fn text<'a>(yaml: &'a Yaml, what: &str) -> &'a str {
    yaml.as_str()
        .unwrap_or_else(|| panic!("{what}: not a string: {yaml:?}"))
}

fn list<'a>(yaml: &'a Yaml, what: &str) -> &'a [Yaml] {
    yaml.as_vec()
        .unwrap_or_else(|| panic!("{what}: not a list: {yaml:?}"))
}

/// The Kubernetes manifests against the config of their ConfigMap: every
/// file parses and is tied by the kustomization; the container runs that
/// config where the ConfigMap is mounted; the ports and probes are the
/// config's listeners and crawlgate's health paths; the pod may run for
/// the preStop pause plus the drain grace; it runs as non-root with a
/// read-only root, so every folder crawlgate writes is a volume; the
/// Service, budget and autoscaler name the Deployment's pods.
#[test]
fn the_kubernetes_manifests_agree_with_their_config() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes");
    let kustomization = object("kustomization.yaml", "Kustomization");
    let resources: Vec<&str> = list(&kustomization["resources"], "resources")
        .iter()
        .map(|r| text(r, "resource"))
        .collect();
    // Every manifest is a resource (the Secret's example is kept out: a
    // private key does not belong in the repository).
    for entry in std::fs::read_dir(&dir).expect("deploy/kubernetes") {
        let name = entry
            .expect("entry")
            .file_name()
            .into_string()
            .expect("utf-8");
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            let docs = manifest(&name);
            assert!(!docs.is_empty(), "{name}: empty");
            assert_eq!(
                resources.contains(&name.as_str()),
                name != "secret.example.yaml",
                "{name} in kustomization.yaml's resources"
            );
        }
    }
    let generator = &list(&kustomization["configMapGenerator"], "configMapGenerator")[0];
    let config_map = text(&generator["name"], "configMap name");
    assert_eq!(
        list(&generator["files"], "files")[0].as_str(),
        Some("crawlgate.toml")
    );
    let config = crawlgate::config::Config::load(
        Some(&dir.join("crawlgate.toml")),
        &crawlgate::config::Overrides::default(),
    )
    .expect("deploy/kubernetes/crawlgate.toml is valid");

    let deployment = object("deployment.yaml", "Deployment");
    let pod = &deployment["spec"]["template"];
    let labels = pod["metadata"]["labels"].clone();
    assert_eq!(deployment["spec"]["selector"]["matchLabels"], labels);
    let spec = &pod["spec"];
    let containers = list(&spec["containers"], "containers");
    assert_eq!(containers.len(), 1);
    let container = &containers[0];

    // The config file the container reads is the ConfigMap's.
    let volumes = list(&spec["volumes"], "volumes");
    let mounts = list(&container["volumeMounts"], "volumeMounts");
    let mount_of = |volume: &str| {
        mounts
            .iter()
            .find(|m| m["name"].as_str() == Some(volume))
            .map(|m| text(&m["mountPath"], "mountPath"))
            .unwrap_or_else(|| panic!("volume {volume} is not mounted"))
    };
    let config_volume = volumes
        .iter()
        .find(|v| v["configMap"]["name"].as_str() == Some(config_map))
        .expect("a volume of the generated ConfigMap");
    let config_dir = mount_of(text(&config_volume["name"], "volume name"));
    let args: Vec<&str> = list(&container["args"], "args")
        .iter()
        .map(|a| text(a, "arg"))
        .collect();
    assert_eq!(
        args,
        ["--config", &format!("{config_dir}/crawlgate.toml")],
        "the container runs the ConfigMap's config"
    );
    // The certificate folder (relative to the config) is the Secret's.
    let certs = volumes
        .iter()
        .find(|v| v["secret"]["secretName"].as_str() == Some("crawlgate-certs"))
        .expect("a volume of the certificates' Secret");
    let certs_dir = format!("{config_dir}/certs");
    assert_eq!(mount_of(text(&certs["name"], "volume name")), certs_dir);
    let raw: toml::Table = deploy("kubernetes/crawlgate.toml").parse().expect("TOML");
    assert_eq!(
        raw["tls"]["certs"].as_str(),
        Some("certs"),
        "tls.certs: the folder beside the config, where the Secret is mounted"
    );
    // The rules folder (relative to the config) is the rules ConfigMap's,
    // generated from a copy of the built-in rules that has not drifted.
    assert_eq!(
        raw["rules_dir"].as_str(),
        Some("rules"),
        "rules_dir: the folder beside the config, where the rules ConfigMap is mounted"
    );
    let rules_generator = list(&kustomization["configMapGenerator"], "configMapGenerator")
        .iter()
        .find(|g| g["name"].as_str() == Some("crawlgate-rules"))
        .expect("a generator of the rules ConfigMap");
    let listed: Vec<&str> = list(&rules_generator["files"], "files")
        .iter()
        .map(|f| text(f, "file"))
        .collect();
    let names = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .filter(|n| n.ends_with(".txt") || n == "signals.conf")
            .collect();
        names.sort();
        names
    };
    let built_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let copies = names(&dir.join("rules"));
    assert_eq!(
        copies,
        names(&built_in),
        "deploy/kubernetes/rules/ holds every rule file"
    );
    assert_eq!(
        listed,
        copies
            .iter()
            .map(|n| format!("rules/{n}"))
            .collect::<Vec<_>>(),
        "kustomization.yaml lists every file of deploy/kubernetes/rules/"
    );
    for name in &copies {
        assert!(
            std::fs::read(dir.join("rules").join(name)).ok()
                == std::fs::read(built_in.join(name)).ok(),
            "deploy/kubernetes/rules/{name} differs from rules/{name}: \
             cp rules/*.txt rules/signals.conf deploy/kubernetes/rules/"
        );
    }
    let rules_volume = volumes
        .iter()
        .find(|v| v["configMap"]["name"].as_str() == Some("crawlgate-rules"))
        .expect("a volume of the rules ConfigMap");
    assert_eq!(
        mount_of(text(&rules_volume["name"], "volume name")),
        format!("{config_dir}/rules")
    );

    // Ports: the listeners of the config, by name.
    let port = |name: &str| {
        list(&container["ports"], "ports")
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .and_then(|p| p["containerPort"].as_i64())
            .unwrap_or_else(|| panic!("no container port named {name}"))
    };
    assert_eq!(port("http"), i64::from(config.restart.listen.port()));
    let admin = config.restart.admin_listen.expect("admin.listen is set");
    assert_eq!(port("admin"), i64::from(admin.port()));
    assert!(
        config.restart.listen.ip().is_unspecified() && admin.ip().is_unspecified(),
        "a pod's listeners take every address (kubelet probes the pod's)"
    );
    if let Some(tls_listen) = config.restart.tls_listen {
        assert_eq!(port("https"), i64::from(tls_listen.port()));
    }
    // Probes: crawlgate's health paths on the admin port.
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"].as_str(), Some(path), "{probe}");
        let probed = get["port"]
            .as_i64()
            .unwrap_or_else(|| port(text(&get["port"], "probe port")));
        assert_eq!(probed, i64::from(admin.port()), "{probe} on the admin port");
    }
    // A stop: the preStop pause, then SIGTERM and the drain grace, within
    // the termination grace period.
    let pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_i64()
        .expect("a preStop pause");
    let grace = spec["terminationGracePeriodSeconds"]
        .as_i64()
        .expect("terminationGracePeriodSeconds");
    let drain = i64::try_from(config.proxy.shutdown_grace.as_secs()).expect("seconds");
    assert!(
        grace > pause + drain,
        "terminationGracePeriodSeconds {grace} must exceed preStop {pause} s + shutdown_grace {drain} s"
    );
    // Non-root, read-only root: what crawlgate writes is on a volume.
    assert_eq!(
        spec["securityContext"]["runAsNonRoot"].as_bool(),
        Some(true)
    );
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert_eq!(security["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert_eq!(
        list(&security["capabilities"]["drop"], "drop")[0].as_str(),
        Some("ALL")
    );
    let state = config
        .verify
        .as_ref()
        .and_then(|v| v.state_dir.clone())
        .expect("verify.state_dir is set: no systemd StateDirectory in a pod");
    let writable = volumes
        .iter()
        .filter(|v| !v["emptyDir"].is_badvalue())
        .map(|v| mount_of(text(&v["name"], "volume name")))
        .any(|path| state.starts_with(path));
    assert!(writable, "{} is not on a writable volume", state.display());
    for limit in ["requests", "limits"] {
        assert!(
            !container["resources"][limit]["memory"].is_badvalue(),
            "resources.{limit}.memory"
        );
    }

    // The Service, the budget and the autoscaler name these pods.
    let service = object("service.yaml", "Service");
    assert_eq!(service["spec"]["selector"], labels);
    for p in list(&service["spec"]["ports"], "service ports") {
        port(text(&p["targetPort"], "targetPort"));
    }
    let pdb = object("pdb.yaml", "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["selector"]["matchLabels"], labels);
    let hpa = object("hpa.yaml", "HorizontalPodAutoscaler");
    let name = deployment["metadata"]["name"].clone();
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], name);
    assert_eq!(
        hpa["spec"]["scaleTargetRef"]["kind"].as_str(),
        Some("Deployment")
    );

    // kustomize itself, when kubectl is there: the build names the
    // generated ConfigMap (with its content hash) in the Deployment.
    match std::process::Command::new("kubectl")
        .args(["kustomize"])
        .arg(&dir)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "kubectl kustomize: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let built = YamlLoader::load_from_str(&String::from_utf8_lossy(&out.stdout))
                .expect("built YAML");
            let generated = built
                .iter()
                .find(|d| d["kind"].as_str() == Some("ConfigMap"))
                .expect("the generated ConfigMap");
            let generated_name = text(&generated["metadata"]["name"], "name");
            assert!(
                generated_name.starts_with(&format!("{config_map}-")),
                "{generated_name}"
            );
            assert!(
                generated["data"]["crawlgate.toml"].as_str()
                    == Some(deploy("kubernetes/crawlgate.toml").as_str())
            );
            let deployment = built
                .iter()
                .find(|d| d["kind"].as_str() == Some("Deployment"))
                .expect("Deployment");
            let named = list(
                &deployment["spec"]["template"]["spec"]["volumes"],
                "volumes",
            )
            .iter()
            .any(|v| v["configMap"]["name"].as_str() == Some(generated_name));
            assert!(named, "the Deployment mounts {generated_name}");
        }
        Err(_) => {
            eprintln!("kubectl not found: the kustomize build of deploy/kubernetes is not checked")
        }
    }
}

/// The ConfigMap's config as a pod runs it, on loopback: `check-config`
/// accepts it; started, it answers both probes on the admin port and
/// refuses a robot's action URL; with TLS turned on and a
/// `kubernetes.io/tls` Secret mounted the way kubelet mounts one
/// (`tls.crt` and `tls.key` as links into a `..data` folder), the
/// certificate is found.
#[tokio::test]
async fn the_kubernetes_config_serves_the_probes() {
    let upstream = support::Upstream::start().await;
    let proxy = support::process::free_addr();
    let admin = support::process::free_addr();
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let pod = deploy("kubernetes/crawlgate.toml")
        .replace("0.0.0.0:8080", &proxy.to_string())
        .replace("0.0.0.0:9090", &admin.to_string())
        .replace("http://site:80", &upstream.url())
        .replace("/var/lib/crawlgate", state.to_str().expect("utf-8"));
    assert!(pod.contains(&admin.to_string()) && pod.contains(&upstream.url()));
    let config = dir.path().join("crawlgate.toml");
    std::fs::write(&config, &pod).expect("write");
    // The rules ConfigMap, where kubelet mounts it.
    let rules_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/rules");
    let rules: Vec<(String, Vec<u8>)> = std::fs::read_dir(&rules_dir)
        .expect("deploy/kubernetes/rules")
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let mut bytes = std::fs::read(&path).expect("read");
            // A token of the operator's own, to tell these rules from the
            // built-in ones.
            if name == "monitor.txt" {
                bytes.extend_from_slice(b"\nKubeRulesProbe\n");
            }
            (name, bytes)
        })
        .collect();
    kubelet_volume(&dir.path().join("rules"), &rules);
    let check = |config: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_crawlgate"))
            .args(["check-config", config.to_str().expect("utf-8")])
            .output()
            .expect("check-config")
    };
    let out = check(&config);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Started without verification: a test fetches nothing beyond
    // loopback (the range lists come from the operators' sites). `[verify]`
    // is the config's last section, so the line lands in it.
    assert!(pod[pod.rfind("\n[").expect("sections")..].starts_with("\n[verify]"));
    let running_config = dir.path().join("running.toml");
    std::fs::write(&running_config, format!("{pod}\nenabled = false\n")).expect("write");
    let mut running = support::process::start(
        &["--config", running_config.to_str().expect("utf-8")],
        proxy,
        Stdio::null(),
    );
    support::process::wait_listening(admin);
    for (path, status) in [("/healthz", 200), ("/readyz", 200)] {
        let res = support::get(admin, "pod", path, None).await;
        assert_eq!(res.status, status, "{path}: {}", res.text());
    }
    let res = support::get(proxy, "example.com", "/?do=vote", Some(support::GOOGLEBOT)).await;
    assert_eq!(res.status, 403);
    let res = support::get(proxy, "example.com", "/page", Some(support::FIREFOX)).await;
    assert_eq!(res.status, 200);
    assert_eq!(
        upstream.requests().len(),
        1,
        "only the human's request went up"
    );
    // The rules are the ConfigMap's: its own token makes a monitor.
    let res = support::get(proxy, "example.com", "/page", Some("KubeRulesProbe/1.0")).await;
    assert_eq!(res.status, 200);
    let seen = upstream.last("/page").expect("forwarded");
    assert_eq!(seen.header("x-crawler-class"), Some("monitor"));
    running.signal("TERM");
    assert!(running
        .wait_exit(std::time::Duration::from_secs(15))
        .success());

    // TLS on, with the certificates where kubelet puts a Secret's keys.
    let ca = support::tls::Ca::new();
    let leaf = ca.leaf(&["example.com"]);
    kubelet_volume(
        &dir.path().join("certs"),
        &[
            ("tls.crt".to_owned(), leaf.chain_pem.clone().into_bytes()),
            ("tls.key".to_owned(), leaf.key_pem.clone().into_bytes()),
        ],
    );
    let tls = support::process::free_addr();
    let with_tls = pod.replace(
        "# listen = \"0.0.0.0:8443\"",
        &format!("listen = \"{tls}\""),
    );
    assert_ne!(with_tls, pod, "the TLS line is in the ConfigMap's config");
    std::fs::write(&config, &with_tls).expect("write");
    let out = check(&config);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("example.com"),
        "check-config names the certificate: {said}"
    );
}

/// Writes `files` into `volume` as kubelet mounts a ConfigMap or a Secret:
/// the files in a timestamped folder, `..data` a link to it, and each
/// name a link through `..data`.
fn kubelet_volume(volume: &Path, files: &[(String, Vec<u8>)]) {
    let stamp = "..2026_12_03_00_00_00.000000001";
    let data = volume.join(stamp);
    std::fs::create_dir_all(&data).expect("mkdir");
    std::os::unix::fs::symlink(stamp, volume.join("..data")).expect("link");
    for (name, bytes) in files {
        std::fs::write(data.join(name), bytes).expect("write");
        std::os::unix::fs::symlink(format!("..data/{name}"), volume.join(name)).expect("link");
    }
}

/// The systemd unit is accepted by the `systemd-analyze verify` of the
/// machine (Debian 12's systemd 252 knows no `Type=notify-reload`, and
/// says so only as a warning): no line of its report names the unit,
/// with `ExecStart=` pointing at the binary under test. Skipped, with one
/// line, where `systemd-analyze` is not installed.
#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    let unit = deploy("crawlgate.service");
    assert!(unit.contains("ExecStart=/usr/local/bin/crawlgate --config"));
    assert!(
        unit.contains("\nType=notify\n") && unit.contains("\nExecReload=/bin/kill -HUP $MAINPID\n")
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("crawlgate.service");
    std::fs::write(
        &path,
        unit.replace("/usr/local/bin/crawlgate", env!("CARGO_BIN_EXE_crawlgate")),
    )
    .expect("write");
    let out = match std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
    {
        Ok(out) => out,
        Err(_) => {
            eprintln!("systemd-analyze not found: deploy/crawlgate.service is not verified");
            return;
        }
    };
    let report =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let about_unit: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("crawlgate.service"))
        .collect();
    assert!(
        out.status.success() && about_unit.is_empty(),
        "systemd-analyze verify: {report}"
    );
}
