//! TLS termination: certificates read from a folder and chosen by SNI.
//!
//! [`CertStore::load`] reads every certificate chain + private key pair in a
//! folder, in either common layout:
//!
//! - flat: `NAME.crt` or `NAME.pem` with a sibling `NAME.key` (a `.crt` or
//!   `.pem` without a sibling key, such as lego's `NAME.issuer.crt` or a
//!   stray `chain.pem`, is not a certificate of ours and is skipped);
//! - certbot: `live/<domain>/fullchain.pem` + `live/<domain>/privkey.pem`
//!   (symbolic links into `archive/` are followed).
//!
//! The names a certificate serves are read from the certificate itself
//! (its DNS subject alternative names, or the subject's common name when it
//! has none), never from the file name. Each pair is checked when loaded:
//! the PEM parses, the key matches the first certificate, and the
//! certificate is valid now. A pair that fails is [`Skipped`], with the
//! file, the reason and the names it would have served, and the others
//! serve: one expired certificate must not take every site down. Loading
//! fails only when no usable certificate is left, or at the first bad pair
//! with `tls.strict = true`.
//!
//! [`Certs`] is the rustls resolver: exact names first, then `*.parent`
//! wildcards (one label, as browsers match them), then the default
//! certificate, which also answers clients that send no SNI. The store
//! behind it is swapped whole on reload, so a renewed certificate is served
//! to new handshakes while established connections carry on.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::clock::unix_now;

/// A certificate folder that cannot be used. The message names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The folder or a file in it cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },
    /// A file's content cannot be used as a certificate chain or key.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The folder holds no certificate at all.
    #[error("{}: no certificate found (want NAME.crt + NAME.key, or live/DOMAIN/fullchain.pem + privkey.pem)", dir.display())]
    Empty {
        /// The folder.
        dir: PathBuf,
    },
    /// Every certificate of the folder was skipped.
    #[error("{}: no usable certificate ({count} skipped; first: {first})", dir.display())]
    NoneUsable {
        /// The folder.
        dir: PathBuf,
        /// How many pairs were skipped.
        count: usize,
        /// The first reason.
        first: Box<TlsError>,
    },
    /// `tls.default_name` names a host no certificate serves.
    #[error("tls.default_name: no certificate in {} serves {name:?}", dir.display())]
    NoDefault {
        /// The folder.
        dir: PathBuf,
        /// The configured name.
        name: String,
    },
    /// rustls refused the protocol settings.
    #[error("TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
}

fn invalid(path: &Path, message: impl Into<String>) -> TlsError {
    TlsError::Invalid {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// One loaded certificate: its chain and key, and what it was read from.
#[derive(Clone)]
pub struct Loaded {
    /// The chain and the signing key.
    pub key: Arc<CertifiedKey>,
    /// The certificate file.
    pub path: PathBuf,
    /// DNS names it serves, lowercase (`*.example.com` for a wildcard).
    pub names: Vec<Box<str>>,
    /// End of validity, seconds since the Unix epoch.
    pub not_after: i64,
    /// End of validity as a date, `2027-03-01 12:00:00 UTC`.
    pub expires: Box<str>,
}

/// Certificates expiring within this many days are warned about at
/// start-up, on reload and by `check-config`.
pub const EXPIRY_WARNING_DAYS: i64 = 14;

impl Loaded {
    /// Whole days from `now` (Unix seconds) until the certificate expires.
    pub fn days_left(&self, now: i64) -> i64 {
        (self.not_after - now).div_euclid(86_400)
    }
}

/// A certificate pair that was not loaded, and why.
#[derive(Debug)]
pub struct Skipped {
    /// What is wrong; its message names the file.
    pub reason: TlsError,
    /// The names the certificate would have served, when it could be read.
    pub names: Vec<Box<str>>,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.reason)?;
        if !self.names.is_empty() {
            write!(f, " (would serve {})", self.names.join(" "))?;
        }
        Ok(())
    }
}

impl fmt::Debug for Loaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loaded")
            .field("path", &self.path)
            .field("names", &self.names)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// Every certificate of a folder, indexed by the names it serves.
#[derive(Debug)]
pub struct CertStore {
    exact: HashMap<Box<str>, Arc<CertifiedKey>>,
    /// Keyed by the parent domain: `*.example.com` is under `example.com`.
    wildcard: HashMap<Box<str>, Arc<CertifiedKey>>,
    default: Arc<CertifiedKey>,
    /// What was loaded, in file order (for the start-up log and tests).
    pub loaded: Vec<Loaded>,
    /// What was not, in file order.
    pub skipped: Vec<Skipped>,
    /// Why `tls.default_name` could not be honoured, when it could not (the
    /// first certificate answers clients without SNI instead).
    pub default_warning: Option<String>,
}

impl CertStore {
    /// Reads every pair in `dir`, skipping the unusable ones (see
    /// [`CertStore::skipped`]); `strict` fails at the first one instead.
    /// `default_name` picks the certificate for clients without SNI (and
    /// with an unknown name); without it, the first certificate in
    /// file-name order is the default.
    pub fn load(dir: &Path, default_name: Option<&str>, strict: bool) -> Result<Self, TlsError> {
        let provider = provider();
        let (pairs, mut skipped) = find_pairs(dir)?;
        let now = unix_now();
        let mut loaded = Vec::with_capacity(pairs.len());
        for (cert, key) in pairs {
            match load_pair(&cert, &key, &provider, now) {
                Ok(pair) => loaded.push(pair),
                Err(skip) => skipped.push(skip),
            }
        }
        if strict && !skipped.is_empty() {
            return Err(skipped.swap_remove(0).reason);
        }
        if loaded.is_empty() && !skipped.is_empty() {
            let count = skipped.len();
            let first = skipped.swap_remove(0).reason;
            return Err(TlsError::NoneUsable {
                dir: dir.to_owned(),
                count,
                first: Box::new(first),
            });
        }
        Self::index(dir, loaded, skipped, default_name, strict)
    }

    fn index(
        dir: &Path,
        loaded: Vec<Loaded>,
        skipped: Vec<Skipped>,
        default_name: Option<&str>,
        strict: bool,
    ) -> Result<Self, TlsError> {
        let Some(first) = loaded.first() else {
            return Err(TlsError::Empty {
                dir: dir.to_owned(),
            });
        };
        let mut default = Arc::clone(&first.key);
        // When two certificates serve one name, the one valid longest wins:
        // an old file left beside its renewal does not shadow it.
        let mut exact: HashMap<Box<str>, (i64, Arc<CertifiedKey>)> = HashMap::new();
        let mut wildcard: HashMap<Box<str>, (i64, Arc<CertifiedKey>)> = HashMap::new();
        for cert in &loaded {
            for name in &cert.names {
                let (map, key) = match name.strip_prefix("*.") {
                    Some(parent) => (&mut wildcard, parent),
                    None => (&mut exact, &**name),
                };
                let entry = map
                    .entry(key.into())
                    .or_insert_with(|| (cert.not_after, Arc::clone(&cert.key)));
                if cert.not_after > entry.0 {
                    *entry = (cert.not_after, Arc::clone(&cert.key));
                }
            }
        }
        let exact: HashMap<_, _> = exact.into_iter().map(|(k, (_, v))| (k, v)).collect();
        let wildcard: HashMap<_, _> = wildcard.into_iter().map(|(k, (_, v))| (k, v)).collect();
        let mut default_warning = None;
        if let Some(name) = default_name {
            match lookup(&exact, &wildcard, name) {
                Some(key) => default = key,
                None if strict => {
                    return Err(TlsError::NoDefault {
                        dir: dir.to_owned(),
                        name: name.to_owned(),
                    })
                }
                None => {
                    default_warning = Some(format!(
                        "tls.default_name: no usable certificate in {} serves {name:?}; clients without SNI get {}",
                        dir.display(),
                        first.path.display()
                    ));
                }
            }
        }
        Ok(Self {
            exact,
            wildcard,
            default,
            loaded,
            skipped,
            default_warning,
        })
    }

    /// The certificate for `server_name` (SNI), or the default.
    pub fn pick(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        server_name
            .and_then(|name| lookup(&self.exact, &self.wildcard, name))
            .unwrap_or_else(|| Arc::clone(&self.default))
    }
}

fn lookup(
    exact: &HashMap<Box<str>, Arc<CertifiedKey>>,
    wildcard: &HashMap<Box<str>, Arc<CertifiedKey>>,
    name: &str,
) -> Option<Arc<CertifiedKey>> {
    let name = name.trim_end_matches('.');
    let lower;
    let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
        lower = name.to_ascii_lowercase();
        &lower
    } else {
        name
    };
    if let Some(key) = exact.get(name) {
        return Some(Arc::clone(key));
    }
    // `*.example.com` covers exactly one more label: `a.example.com`.
    let (label, parent) = name.split_once('.')?;
    if label.is_empty() || parent.is_empty() {
        return None;
    }
    wildcard.get(parent).cloned()
}

/// The (certificate, key) files of `dir`, in a stable order, and the
/// incomplete pairs (a key without its certificate, a certbot folder
/// missing a file). Only an unreadable folder is an error.
#[allow(clippy::type_complexity)]
fn find_pairs(dir: &Path) -> Result<(Vec<(PathBuf, PathBuf)>, Vec<Skipped>), TlsError> {
    let read_dir = |path: &Path| {
        let mut entries = std::fs::read_dir(path)
            .and_then(|rd| {
                rd.map(|e| e.map(|e| e.path()))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|source| TlsError::Read {
                path: path.to_owned(),
                source,
            })?;
        entries.sort();
        Ok::<_, TlsError>(entries)
    };
    let mut pairs = Vec::new();
    let mut skipped = Vec::new();
    let mut skip = |path: &Path, message: &str| {
        skipped.push(Skipped {
            reason: invalid(path, message),
            names: Vec::new(),
        });
    };
    for path in read_dir(dir)? {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        match ext {
            "crt" | "pem" if path.is_file() => {
                let key = path.with_extension("key");
                if key.is_file() {
                    pairs.push((path, key));
                }
            }
            "key" if path.is_file() => {
                let has_cert = ["crt", "pem"]
                    .iter()
                    .any(|e| path.with_extension(e).is_file());
                if !has_cert {
                    skip(
                        &path,
                        "private key without a certificate (want NAME.crt or NAME.pem beside it)",
                    );
                }
            }
            _ => {}
        }
    }
    let live = dir.join("live");
    if live.is_dir() {
        for domain in read_dir(&live)? {
            if !domain.is_dir() {
                continue; // certbot's live/README
            }
            let cert = domain.join("fullchain.pem");
            let key = domain.join("privkey.pem");
            let missing = [&cert, &key].into_iter().find(|f| !f.is_file()).cloned();
            match missing {
                Some(missing) => skip(
                    &missing,
                    "missing (certbot layout: live/DOMAIN/fullchain.pem + privkey.pem)",
                ),
                None => pairs.push((cert, key)),
            }
        }
    }
    Ok((pairs, skipped))
}

fn load_pair(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
    now: i64,
) -> Result<Loaded, Skipped> {
    // The names, once read, go with any later failure into the report.
    let mut names = Vec::new();
    check_pair(cert_path, key_path, provider, now, &mut names).map_err(|reason| Skipped {
        reason,
        names: std::mem::take(&mut names),
    })
}

fn check_pair(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
    now: i64,
    names: &mut Vec<Box<str>>,
) -> Result<Loaded, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let cert_pem = read(cert_path)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(cert_path, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(invalid(cert_path, "no CERTIFICATE block"));
    }
    let (not_before, not_after, expires) = {
        let (_, leaf) = x509_parser::parse_x509_certificate(&chain[0])
            .map_err(|e| invalid(cert_path, format!("cannot parse the certificate: {e}")))?;
        *names = cert_names(&leaf);
        let validity = leaf.validity();
        (
            validity.not_before.timestamp(),
            validity.not_after.timestamp(),
            date(&validity.not_after),
        )
    };
    if not_after < now {
        return Err(invalid(
            cert_path,
            format!("certificate expired on {expires}"),
        ));
    }
    if not_before > now {
        return Err(invalid(
            cert_path,
            format!("certificate not valid before {}", date_of(not_before)),
        ));
    }
    if names.is_empty() {
        return Err(invalid(
            cert_path,
            "the certificate names no DNS host (no subjectAltName DNS entry or common name)",
        ));
    }
    let key_pem = read(key_path)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| invalid(key_path, format!("not a PEM private key: {e}")))?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => invalid(
            key_path,
            format!(
                "private key does not match the certificate {}",
                cert_path.display()
            ),
        ),
        other => invalid(key_path, format!("unusable private key: {other}")),
    })?;
    Ok(Loaded {
        key: Arc::new(key),
        path: cert_path.to_owned(),
        names: names.clone(),
        not_after,
        expires,
    })
}

/// A certificate time as `2027-03-01 12:00:00 UTC`.
fn date(time: &x509_parser::time::ASN1Time) -> Box<str> {
    let t = time.to_datetime();
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
    .into_boxed_str()
}

/// Unix seconds as a date, like [`date`].
fn date_of(seconds: i64) -> Box<str> {
    x509_parser::time::ASN1Time::from_timestamp(seconds)
        .map_or_else(|_| seconds.to_string().into_boxed_str(), |t| date(&t))
}

/// The DNS names a leaf certificate serves, lowercase, without duplicates:
/// its subjectAltName DNS entries, or else (legacy certificates) the
/// subject's common names.
fn cert_names(leaf: &x509_parser::certificate::X509Certificate<'_>) -> Vec<Box<str>> {
    use x509_parser::extensions::GeneralName;
    let mut raw: Vec<&str> = Vec::new();
    if let Ok(Some(san)) = leaf.subject_alternative_name() {
        for general in &san.value.general_names {
            if let GeneralName::DNSName(name) = general {
                raw.push(name);
            }
        }
    }
    if raw.is_empty() {
        raw.extend(
            leaf.subject()
                .iter_common_name()
                .filter_map(|cn| cn.as_str().ok()),
        );
    }
    let mut names: Vec<Box<str>> = Vec::with_capacity(raw.len());
    for name in raw {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let host = name.strip_prefix("*.").unwrap_or(&name);
        if crate::config::is_hostname(host.as_bytes()) && !names.iter().any(|n| **n == *name) {
            names.push(name.into_boxed_str());
        }
    }
    names
}

/// The crypto provider: ring, with its default cipher suites.
pub fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// A TLS client (TLS 1.3 and 1.2, [`provider`]) trusting `roots`: the
/// upstream's client and the one that fetches crawler range lists and key
/// directories.
pub fn client_config(roots: rustls::RootCertStore) -> Result<rustls::ClientConfig, rustls::Error> {
    Ok(
        rustls::ClientConfig::builder_with_provider(Arc::new(provider()))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// Adds every certificate of the PEM file at `path` to `roots`; why not,
/// as text, when the file cannot be read, holds a bad block, or none.
pub fn add_pem_roots(roots: &mut rustls::RootCertStore, path: &Path) -> Result<(), String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block".to_owned());
    }
    for cert in certs {
        roots.add(cert).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The SNI resolver of the TLS listener; its store is swapped on reload.
#[derive(Debug)]
pub struct Certs {
    store: ArcSwap<CertStore>,
}

impl Certs {
    /// A resolver serving `store`.
    pub fn new(store: CertStore) -> Self {
        Self {
            store: ArcSwap::from_pointee(store),
        }
    }

    /// Serves `store` to handshakes from now on.
    pub fn replace(&self, store: CertStore) {
        self.store.store(Arc::new(store));
    }

    /// The store currently served.
    pub fn current(&self) -> Arc<CertStore> {
        self.store.load_full()
    }
}

impl ResolvesServerCert for Certs {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.store.load().pick(hello.server_name()))
    }
}

/// The rustls server settings: TLS 1.2 and 1.3, certificates from `certs`,
/// ALPN `h2` (when `http2`) and `http/1.1`, session tickets.
pub fn server_config(certs: Arc<Certs>, http2: bool) -> Result<ServerConfig, TlsError> {
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    config.ticketer = rustls::crypto::ring::Ticketer::new()?;
    Ok(config)
}

/// What an operator needs to know of the certificates, the same at
/// start-up, on reload and from `check-config`: each one served, with its
/// names and expiry date; a warning for each that expires within
/// [`EXPIRY_WARNING_DAYS`] and for each pair skipped; (is a warning, line).
pub fn certificate_notes(store: &CertStore) -> Vec<(bool, String)> {
    let now = unix_now();
    let mut notes = Vec::with_capacity(store.loaded.len() + store.skipped.len());
    for cert in &store.loaded {
        let days = cert.days_left(now);
        let soon = days < EXPIRY_WARNING_DAYS;
        let when = if soon {
            format!("expires {} (in {days} days: renew it)", cert.expires)
        } else {
            format!("expires {}", cert.expires)
        };
        notes.push((
            soon,
            format!(
                "certificate {}: serves {}, {when}",
                cert.path.display(),
                cert.names.join(" ")
            ),
        ));
    }
    for skipped in &store.skipped {
        notes.push((true, format!("certificate skipped: {skipped}")));
    }
    if let Some(warning) = &store.default_warning {
        notes.push((true, warning.clone()));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_cover_one_label() {
        let key = |_: &str| -> Arc<CertifiedKey> {
            let ck = rcgen::generate_simple_self_signed(vec!["x.test".to_owned()]).expect("cert");
            let der = PrivateKeyDer::try_from(ck.signing_key.serialize_der()).expect("key");
            Arc::new(
                CertifiedKey::from_der(vec![ck.cert.der().clone()], der, &provider())
                    .expect("pair"),
            )
        };
        let exact = HashMap::from([("a.test".into(), key("a"))]);
        let wildcard = HashMap::from([("w.test".into(), key("w"))]);
        assert!(lookup(&exact, &wildcard, "a.test").is_some());
        assert!(lookup(&exact, &wildcard, "A.Test.").is_some());
        assert!(lookup(&exact, &wildcard, "x.w.test").is_some());
        assert!(lookup(&exact, &wildcard, "X.W.TEST").is_some());
        assert!(lookup(&exact, &wildcard, "w.test").is_none());
        assert!(lookup(&exact, &wildcard, "y.x.w.test").is_none());
        assert!(lookup(&exact, &wildcard, ".w.test").is_none());
        assert!(lookup(&exact, &wildcard, "b.test").is_none());
    }
}
