//! The running state and its reload: config, rules and certificates read
//! again, validated, and swapped whole.
//!
//! [`Live::start`] loads everything once (any failure is a start-up error
//! naming the key or file). [`Live::reload`] repeats the same loading; only
//! if all of it succeeds does it swap the request-path state and the
//! certificate store, so a reload that fails validation leaves the running
//! state untouched. Requests already in flight keep the `Arc<Shared>` they
//! started with; the next request sees the new one. Settings that only a
//! restart can apply (listen addresses, HTTP/2 on the TLS port) are
//! reported, not silently ignored.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::config::{Config, ConfigError, Overrides};
use crate::observe::Observer;
use crate::server::Live as LiveShared;
use crate::service::{SetupError, Shared};
use crate::tls::{CertStore, Certs, TlsError};

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
    /// The access-log file cannot be opened.
    #[error("log.file: {0}")]
    Log(std::io::Error),
}

/// Everything one load produced.
pub struct Loaded {
    /// The validated config.
    pub config: Config,
    /// The request-path state built from it.
    pub shared: Shared,
    /// The certificates, when a TLS listener is configured.
    pub certs: Option<CertStore>,
}

/// Reads the config file (if any) with `overrides`, then the rules, the
/// upstream's TLS roots and the certificate folder; the state built
/// reports to `observer`.
pub fn load(
    path: Option<&std::path::Path>,
    overrides: &Overrides,
    observer: &Arc<Observer>,
) -> Result<Loaded, LoadError> {
    let config = Config::load(path, overrides)?;
    let shared = Shared::new(&config, Arc::clone(observer)).map_err(|err| match (err, path) {
        (SetupError::Shed(class), Some(path)) => LoadError::Config(ConfigError::invalid_in(
            path,
            "shed.order",
            class.to_string(),
        )),
        (SetupError::VerifyRanges(why), Some(path)) => {
            LoadError::Config(ConfigError::invalid_in(path, "verify.ranges", why))
        }
        (err, _) => LoadError::Setup(err),
    })?;
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
        shared,
        certs,
    })
}

/// `n` copies of `shared`, each with its own upstream pool.
fn per_worker(shared: Shared, n: usize) -> Vec<Shared> {
    let mut all = Vec::with_capacity(n.max(1));
    for _ in 1..n {
        all.push(shared.for_worker());
    }
    all.push(shared);
    all
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
    /// The request-path state of each worker thread, read per request.
    pub shared: Vec<Arc<LiveShared>>,
    /// The TLS listener's certificates, when there is one.
    pub certs: Option<Arc<Certs>>,
    /// The config in effect (listen addresses are the ones bound at start).
    running: Mutex<Config>,
    /// The process-wide part, handed to every state a reload builds.
    pub observer: Arc<Observer>,
}

impl Live {
    /// Loads everything for the first time.
    pub fn start(config_path: Option<PathBuf>, overrides: Overrides) -> Result<Self, LoadError> {
        let observer = Arc::new(Observer::new());
        let Loaded {
            config,
            shared,
            certs,
        } = load(config_path.as_deref(), &overrides, &observer)?;
        observer
            .start_log(config.restart.log_file.as_deref())
            .map_err(LoadError::Log)?;
        observer
            .ranges
            .configure(shared.verify.as_ref().map(|v| v.setup.clone()));
        let shared = per_worker(shared, config.restart.workers)
            .into_iter()
            .map(|s| Arc::new(ArcSwap::from_pointee(s)))
            .collect();
        Ok(Self {
            config_path,
            overrides,
            shared,
            certs: certs.map(|c| Arc::new(Certs::new(c))),
            running: Mutex::new(config),
            observer,
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
            shared,
            certs,
        } = load(self.config_path.as_deref(), &self.overrides, &self.observer)?;
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let restart_needed = running.restart_needed(&config);
        // Lists whose source did not change keep their copies.
        self.observer
            .ranges
            .configure(shared.verify.as_ref().map(|v| v.setup.clone()));
        let mut certificates = 0;
        // A TLS listener cannot be added or removed without a restart (that
        // is reported above); while there is one, its certificates follow.
        if let (Some(live), Some(store)) = (&self.certs, certs) {
            certificates = store.loaded.len();
            live.replace(store);
        }
        for (cell, shared) in self
            .shared
            .iter()
            .zip(per_worker(shared, self.shared.len()))
        {
            // Each worker keeps its own pool when the upstream is the same.
            let shared = shared.keeping_pool_of(&cell.load());
            cell.store(Arc::new(shared));
        }
        // A reload that turns shedding off (or on again): the gauge says
        // what the requests will now see.
        let level = config
            .shed
            .as_ref()
            .map_or(0, |_| self.observer.load.level());
        self.observer.metrics.shed_level(level);
        let previous = std::mem::replace(&mut *running, config);
        running.keep_restart_settings(previous);
        Ok(Reloaded {
            restart_needed,
            certificates,
        })
    }
}
