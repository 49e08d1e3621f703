//! The running state and its reload: config, rules and certificates read
//! again, validated, and swapped whole.
//!
//! [`load`] reads and checks everything and changes nothing on disk:
//! `crawlgate check-config` runs it alone, so its verdict is the start's.
//! [`Live::start`] runs it, then does what it checked could be done
//! (creating `verify.state_dir`, opening the access log); any failure is
//! a start-up error naming the key or file. [`Live::reload`] repeats the
//! same loading; only
//! if all of it succeeds does it swap the snapshot and the certificate
//! store, so a reload that fails validation leaves the running state
//! untouched. Requests already in flight keep the `Arc<Snapshot>` they
//! started with; the next request sees the new one. The process's state
//! (and its caches, where their settings did not change) is kept. Settings that only a
//! restart can apply (listen addresses, HTTP/2 on the TLS port) are
//! reported, not silently ignored.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::config::{Config, ConfigError, Overrides};
use crate::state::{Current, Process, SetupError, Snapshot, WorkerSlot};
use crate::tls::{CertStore, Certs, TlsError};
use crate::verify::store::StoreError;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file or a value in it (`FILE:LINE: key: problem`).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The rules (`FILE:LINE: problem`) or the upstream's TLS settings.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The certificate folder (`FILE: problem`).
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Everything one load produced.
pub struct Loaded {
    /// The validated config.
    pub config: Config,
    /// The snapshot built from it.
    pub snapshot: Snapshot,
    /// The certificates, when a TLS listener is configured.
    pub certs: Option<CertStore>,
}

/// Reads the config file (if any) with `overrides`, then the rules, the
/// local range lists, the upstream's TLS roots and the certificate
/// folder, and checks that the access log and the state folder can be
/// opened or created; the snapshot uses `process`'s caches where their
/// settings did not change. Nothing is
/// created or written: what start-up and a reload do after it,
/// `prepare` and the log's opening, cannot fail on what it checked.
///
/// `for_start`: the access-log file is checked too. A reload passes
/// `false`: it keeps the log the process opened (`log.file` needs a
/// restart), so a log folder that changed since is no reason to refuse it.
pub fn load(
    path: Option<&Path>,
    overrides: &Overrides,
    process: &Arc<Process>,
    for_start: bool,
) -> Result<Loaded, LoadError> {
    let config = Config::load(path, overrides)?;
    let snapshot = Snapshot::new(&config, Arc::clone(process))
        .map_err(|err| setup_error(err, path, overrides))?;
    if let (true, Some(file)) = (for_start, &config.restart.log_file) {
        check_file_writable(file).map_err(|why| in_file(path, "log.file", why))?;
    }
    if let Some(dir) = config.verify.as_ref().and_then(|v| v.state_dir.as_ref()) {
        check_dir_creatable(dir).map_err(|why| in_file(path, "verify.state_dir", why))?;
    }
    let certs = match &config.tls {
        Some(tls) => Some(CertStore::load(
            &tls.certs_dir,
            tls.default_name.as_deref(),
            tls.strict,
        )?),
        None => None,
    };
    Ok(Loaded {
        config,
        snapshot,
        certs,
    })
}

/// What [`load`] checked and left undone: creates `verify.state_dir`
/// (an error here is a race with whatever changed the folder since).
fn prepare(config: &Config, path: Option<&Path>) -> Result<(), LoadError> {
    if let Some(dir) = config.verify.as_ref().and_then(|v| v.state_dir.as_ref()) {
        crate::verify::store::create_state_dir(dir).map_err(|err| match err {
            StoreError::StateDir { path: dir, source } => in_file(
                path,
                "verify.state_dir",
                format!("cannot create {}: {source}", dir.display()),
            ),
        })?;
    }
    Ok(())
}

/// A value of the config at `path` (or of a flag) that cannot be used,
/// reported as `FILE:LINE: key: why`.
fn in_file(path: Option<&Path>, key: &'static str, why: String) -> LoadError {
    LoadError::Config(match path {
        Some(path) => ConfigError::invalid_in(path, key, why),
        None => ConfigError::Invalid { key, message: why },
    })
}

/// A setup error about a value of the config file, with the file and the
/// line of its key; a value given by a flag is named by the flag.
fn setup_error(err: SetupError, path: Option<&Path>, overrides: &Overrides) -> LoadError {
    use crate::proxy::UpstreamTlsError;
    use crate::rules::RulesError;
    use crate::verify::fetch::FetcherError;
    let flagged = |flag: &'static str, why: String| {
        LoadError::Config(ConfigError::Invalid {
            key: flag,
            message: why,
        })
    };
    match err {
        SetupError::Shed(class) => in_file(path, "shed.order", class.to_string()),
        SetupError::LiveClasses(class) => {
            in_file(path, "bot_cache.live_classes", class.to_string())
        }
        SetupError::VerifyRanges(why) => in_file(path, "verify.ranges", why),
        SetupError::SitemapDir(dir) => {
            let why = format!(
                "{}: no such folder (create it, or leave sitemap_dir out)",
                dir.display()
            );
            match overrides.sitemap_dir {
                Some(_) => flagged("--sitemap-dir", why),
                None => in_file(path, "sitemap_dir", why),
            }
        }
        // The folder itself (a file's line is already in the error).
        SetupError::Rules(err @ (RulesError::Read { .. } | RulesError::NoBotTokens(_))) => {
            match overrides.rules_dir {
                Some(_) => flagged("--rules", err.to_string()),
                None => in_file(path, "rules_dir", err.to_string()),
            }
        }
        SetupError::UpstreamTls(UpstreamTlsError::Ca { path: ca, message }) => in_file(
            path,
            "proxy.upstream_ca",
            format!("{}: {message}", ca.display()),
        ),
        SetupError::UpstreamTls(UpstreamTlsError::Sni(name)) => in_file(
            path,
            "proxy.upstream_sni",
            format!("{name:?} is not a server name"),
        ),
        SetupError::Fetcher(FetcherError::CaFile { path: ca, message }) => in_file(
            path,
            "verify.ca_file",
            format!("{}: {message}", ca.display()),
        ),
        SetupError::Dns(err) => in_file(path, "verify.resolver", err.to_string()),
        err => LoadError::Setup(err),
    }
}

/// Checks, creating nothing, that `file` can be opened for appending:
/// it is a file crawlgate may write, or it does not exist and its folder
/// is one crawlgate may create files in.
pub fn check_file_writable(file: &Path) -> Result<(), String> {
    let shown = file.display();
    match std::fs::metadata(file) {
        Ok(meta) if meta.is_dir() => Err(format!("{shown}: is a folder, not a file")),
        Ok(_) => writable(file, false).map_err(|e| format!("{shown}: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let folder = parent(file);
            match std::fs::metadata(folder) {
                Ok(meta) if meta.is_dir() => writable(folder, true).map_err(|e| {
                    format!("{shown}: cannot be created in {}: {e}", folder.display())
                }),
                Ok(_) => Err(format!("{shown}: {} is not a folder", folder.display())),
                Err(e) if is_missing(&e) => Err(format!(
                    "{shown}: no such folder {} (crawlgate does not create it)",
                    folder.display()
                )),
                Err(e) => Err(format!("{shown}: {}: {e}", folder.display())),
            }
        }
        Err(e) if is_missing(&e) => Err(format!("{shown}: a part of the path is not a folder")),
        Err(e) => Err(format!("{shown}: {e}")),
    }
}

/// Checks, creating nothing, that `dir` is a folder crawlgate may write
/// files in, or that `create_dir_all` can make it: its nearest existing
/// ancestor is a folder crawlgate may create folders in.
pub fn check_dir_creatable(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(meta) if meta.is_dir() => {
                return writable(at, true).map_err(|e| {
                    if at == dir {
                        format!("{shown}: {e}")
                    } else {
                        format!("{shown}: cannot be created in {}: {e}", at.display())
                    }
                });
            }
            Ok(_) if at == dir => return Err(format!("{shown}: not a folder")),
            Ok(_) => {
                return Err(format!(
                    "{shown}: cannot be created: {} is not a folder",
                    at.display()
                ))
            }
            Err(e) if is_missing(&e) && at != parent(at) => at = parent(at),
            Err(e) => return Err(format!("{shown}: {}: {e}", at.display())),
        }
    }
}

/// The folder holding `path` (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        Some(_) => Path::new("."),
        None => path,
    }
}

/// Not there: missing, or below something that is not a folder.
fn is_missing(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// access(2) for writing (and, for a folder, entering) as the effective
/// user: what opening or creating there will meet, without doing it.
fn writable(path: &Path, folder: bool) -> std::io::Result<()> {
    use rustix::fs::{Access, AtFlags};
    let access = if folder {
        Access::WRITE_OK | Access::EXEC_OK
    } else {
        Access::WRITE_OK
    };
    rustix::fs::accessat(rustix::fs::CWD, path, access, AtFlags::EACCESS).map_err(Into::into)
}

/// What a successful reload changed and could not change.
#[derive(Debug)]
pub struct Reloaded {
    /// Settings that differ but need a restart: (key, running, on disk).
    pub restart_needed: Vec<(&'static str, String, String)>,
    /// Certificates now served (0 without TLS).
    pub certificates: usize,
}

/// The running state: what requests read, and how to reload it.
pub struct Live {
    config_path: Option<PathBuf>,
    overrides: Overrides,
    /// The snapshot in effect, swapped whole by a reload.
    pub current: Arc<Current>,
    /// Each worker thread's state, derived from the snapshot in effect.
    pub workers: Vec<Arc<WorkerSlot>>,
    /// The TLS listener's certificates, when there is one.
    pub certs: Option<Arc<Certs>>,
    /// The config in effect (listen addresses are the ones bound at start).
    running: Mutex<Config>,
    /// The process's state, handed to every snapshot a reload builds.
    pub process: Arc<Process>,
}

impl Live {
    /// Loads everything for the first time.
    pub fn start(config_path: Option<PathBuf>, overrides: Overrides) -> Result<Self, LoadError> {
        let process = Arc::new(Process::new());
        let Loaded {
            config,
            snapshot,
            certs,
        } = load(config_path.as_deref(), &overrides, &process, true)?;
        prepare(&config, config_path.as_deref())?;
        process
            .start_log(config.restart.log_file.as_deref())
            .map_err(|e| {
                let file = config.restart.log_file.as_deref().unwrap_or(Path::new("-"));
                let why = format!("{}: cannot be opened: {e}", file.display());
                in_file(config_path.as_deref(), "log.file", why)
            })?;
        process
            .ranges
            .configure(snapshot.verify.as_ref().map(|v| v.setup.clone()));
        process.keep(&snapshot.caches, false);
        let current = Arc::new(ArcSwap::from_pointee(snapshot));
        let workers = (0..config.restart.workers.max(1))
            .map(|_| Arc::new(WorkerSlot::new(Arc::clone(&current))))
            .collect();
        Ok(Self {
            config_path,
            overrides,
            current,
            workers,
            certs: certs.map(|c| Arc::new(Certs::new(c))),
            running: Mutex::new(config),
            process,
        })
    }

    /// The config in effect.
    pub fn config(&self) -> Config {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Loads everything again and swaps it in, or changes nothing and
    /// returns why not.
    pub fn reload(&self) -> Result<Reloaded, LoadError> {
        let Loaded {
            config,
            snapshot,
            certs,
        } = load(
            self.config_path.as_deref(),
            &self.overrides,
            &self.process,
            false,
        )?;
        prepare(&config, self.config_path.as_deref())?;
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let restart_needed = running.restart_needed(&config);
        // Lists whose source did not change keep their copies.
        self.process
            .ranges
            .configure(snapshot.verify.as_ref().map(|v| v.setup.clone()));
        let mut certificates = 0;
        // A TLS listener cannot be added or removed without a restart (that
        // is reported above); while there is one, its certificates follow.
        if let (Some(live), Some(store)) = (&self.certs, certs) {
            certificates = store.loaded.len();
            live.replace(store);
        }
        // The caches whose settings did not change are the snapshot's
        // already; the others start empty now.
        self.process.keep(&snapshot.caches, true);
        // Each worker derives its own state from it at its next request,
        // keeping its pool when the upstream is the same.
        self.current.store(Arc::new(snapshot));
        // A reload that turns shedding off (or on again): the gauge says
        // what the requests will now see.
        let level = config
            .shed
            .as_ref()
            .map_or(0, |_| self.process.load.level());
        self.process.metrics.shed_level(level);
        let previous = std::mem::replace(&mut *running, config);
        running.keep_restart_settings(previous);
        Ok(Reloaded {
            restart_needed,
            certificates,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks say what opening or creating would meet, and create
    /// nothing.
    #[test]
    fn paths_are_checked_without_creating_anything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::write(d.join("file"), "").expect("write");

        assert_eq!(check_dir_creatable(d), Ok(()));
        assert_eq!(check_dir_creatable(&d.join("a/b/c")), Ok(()));
        assert!(!d.join("a").exists(), "nothing created");
        let err = check_dir_creatable(&d.join("file/sub")).expect_err("below a file");
        assert!(err.ends_with("file is not a folder"), "{err}");
        let err = check_dir_creatable(&d.join("file")).expect_err("a file");
        assert!(err.ends_with("file: not a folder"), "{err}");

        assert_eq!(check_file_writable(&d.join("file")), Ok(()));
        assert_eq!(check_file_writable(&d.join("new.log")), Ok(()));
        assert!(!d.join("new.log").exists(), "nothing created");
        let err = check_file_writable(&d.join("gone/access.log")).expect_err("no folder");
        assert!(err.contains("no such folder"), "{err}");
        let err = check_file_writable(d).expect_err("a folder");
        assert!(err.ends_with("is a folder, not a file"), "{err}");
        let err = check_file_writable(&d.join("file/access.log")).expect_err("below a file");
        assert!(err.contains("is not a folder"), "{err}");
    }
}
