//! The published range lists at run time: where each comes from, the last
//! good copy of each, and the table the request path reads.
//!
//! [`RangeStore`] is process-wide (it outlives reloads, like the metrics).
//! The request path reads one immutable [`RangeSet`] from it, an atomic
//! pointer load; a refresh or a reload builds a new set and swaps it. A
//! list is fetched from its official URL (or the URL or file the config
//! puts in its place) every `refresh`; a copy that parses replaces the
//! held one and is written to `state_dir`, where the next start finds it.
//! A copy that does not parse, is empty, or does not arrive changes
//! nothing but a metric and a log line: a good list is never replaced by a
//! bad one.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use ipnet::IpNet;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::Notify;

use super::fetch::Fetcher;
use super::Identity;
use super::{parse_ranges, Lists, Operators, PrefixTable};
use crate::metrics::{ListLabels, ListResultLabels, Metrics, VerifyLabels, VerifyMetrics};

/// Where one list is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Fetched over HTTP(S).
    Url(Box<str>),
    /// Read from a local file.
    File(PathBuf),
}

impl Source {
    /// A config value: an `http://` or `https://` URL, or else a path.
    pub fn parse(text: &str) -> Source {
        if text.starts_with("https://") || text.starts_with("http://") {
            Source::Url(text.into())
        } else {
            Source::File(PathBuf::from(text))
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Url(url) => f.write_str(url),
            Source::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// What the store is asked to hold: the operators, each list's source
/// (in [`Operators::lists`] order), and how to keep them.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The operators and their lists.
    pub operators: Arc<Operators>,
    /// Each list's source.
    pub sources: Vec<Source>,
    /// Per list, the copy of its local file read when this setup was
    /// built ([`read_local`]; `None` for a URL source): a file that is
    /// missing or malformed fails the load, so a setup always has them.
    pub local: Vec<Option<Arc<Vec<IpNet>>>>,
    /// Where the last good copies are kept (`None`: in memory only).
    pub state_dir: Option<PathBuf>,
    /// How often each list is fetched again.
    pub refresh: Duration,
    /// The client that fetches them.
    pub fetcher: Fetcher,
}

/// One snapshot for the request path.
#[derive(Debug)]
pub struct RangeSet {
    /// The operators the table's list bits refer to.
    pub operators: Arc<Operators>,
    /// Every loaded list's prefixes.
    pub table: PrefixTable,
    /// The lists that have data.
    pub loaded: Lists,
    /// Per operator, its verification counters in [`Identity::ALL`] order.
    counters: Vec<[Counter; 5]>,
}

impl RangeSet {
    fn new(
        operators: Arc<Operators>,
        table: PrefixTable,
        loaded: Lists,
        metrics: &VerifyMetrics,
    ) -> Self {
        // Each operator, then `none`: a signed request that claims none.
        let counters = operators
            .operators
            .iter()
            .map(|op| &*op.name)
            .chain(["none"])
            .map(|name| {
                Identity::ALL.map(|identity| {
                    metrics.verifications.get_or_create_owned(&VerifyLabels {
                        operator: name.into(),
                        result: identity.as_str(),
                    })
                })
            })
            .collect();
        Self {
            operators,
            table,
            loaded,
            counters,
        }
    }

    /// Counts one verification of a claim to `operator` (`None`: a signed
    /// request of no known operator), an atomic add.
    pub fn count(&self, operator: Option<usize>, identity: Identity) {
        let slot = Identity::ALL
            .iter()
            .position(|i| *i == identity)
            .unwrap_or(4);
        let row = operator.unwrap_or(self.operators.operators.len());
        if let Some(counters) = self.counters.get(row) {
            counters[slot].inc();
        }
    }
}

/// One list's last good copy and its state.
#[derive(Debug)]
struct Held {
    name: Box<str>,
    source: Source,
    nets: Option<Arc<Vec<IpNet>>>,
    /// When the held copy was fetched (or its state file written).
    updated: Option<SystemTime>,
    /// The last attempt, successful or not.
    attempted: Option<SystemTime>,
    /// The last attempt failed (logged once until it succeeds again).
    failing: bool,
    /// The held copy is the one read from `state_dir` (none newer yet).
    saved: bool,
}

#[derive(Debug)]
struct Inner {
    setup: Option<Setup>,
    held: Vec<Held>,
}

/// Why the store cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state folder cannot be created.
    #[error("verify.state_dir: cannot create {}: {source}", path.display())]
    StateDir {
        /// The folder.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

/// The process-wide range lists.
pub struct RangeStore {
    current: ArcSwap<RangeSet>,
    inner: Mutex<Inner>,
    wake: Notify,
    metrics: VerifyMetrics,
}

impl std::fmt::Debug for RangeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeStore")
            .field("current", &self.current.load())
            .finish_non_exhaustive()
    }
}

/// A failed list is tried again after this long (or `refresh`, if shorter).
const RETRY_AFTER: Duration = Duration::from_secs(300);

impl RangeStore {
    /// An empty store, counting into `metrics`.
    pub fn new(metrics: &Metrics) -> Self {
        Self {
            current: ArcSwap::from_pointee(RangeSet::new(
                Arc::new(Operators::embedded()),
                PrefixTable::default(),
                0,
                &metrics.verify(),
            )),
            inner: Mutex::new(Inner {
                setup: None,
                held: Vec::new(),
            }),
            wake: Notify::new(),
            metrics: metrics.verify(),
        }
    }

    /// The snapshot the request path reads.
    pub fn current(&self) -> arc_swap::Guard<Arc<RangeSet>> {
        self.current.load()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a new setup (at start and at each reload), keeping every
    /// held copy whose list and source did not change. A list new to the
    /// store starts from its copy in `state_dir`, if there is a good one;
    /// a local file is read again now. Blocking file I/O: call it off the event
    /// loop. `None` (verification off) drops everything. (The state
    /// folder was checked when the setup was built: [`create_state_dir`].)
    pub fn configure(&self, setup: Option<Setup>) {
        let Some(setup) = setup else {
            let mut inner = self.lock();
            inner.setup = None;
            inner.held.clear();
            drop(inner);
            self.publish();
            return;
        };
        let mut inner = self.lock();
        let mut old: HashMap<Box<str>, Held> =
            inner.held.drain(..).map(|h| (h.name.clone(), h)).collect();
        let mut held = Vec::with_capacity(setup.operators.lists.len());
        let now = SystemTime::now();
        let lists = setup.operators.lists.iter().zip(&setup.sources);
        for (i, (spec, source)) in lists.enumerate() {
            let mut h = match old.remove(&spec.name) {
                Some(h) if h.source == *source => h,
                _ => {
                    let mut h = Held {
                        name: spec.name.clone(),
                        source: source.clone(),
                        nets: None,
                        updated: None,
                        attempted: None,
                        failing: false,
                        saved: false,
                    };
                    if let Some(dir) = &setup.state_dir {
                        load_state_copy(dir, &mut h);
                    }
                    h
                }
            };
            // A local file is read at every load: a reload is how an
            // operator says "I changed it" (a bad file failed the load).
            if let Some(Some(nets)) = setup.local.get(i) {
                self.count_fetch(&h.name, "ok");
                h.nets = Some(Arc::clone(nets));
                h.updated = Some(now);
                h.attempted = Some(now);
                h.failing = false;
                h.saved = false;
            }
            held.push(h);
        }
        inner.held = held;
        inner.setup = Some(setup);
        drop(inner);
        self.publish();
        self.wake.notify_one();
    }

    /// Builds the snapshot from the held copies and swaps it in.
    fn publish(&self) {
        let inner = self.lock();
        let Some(setup) = &inner.setup else {
            self.current.store(Arc::new(RangeSet::new(
                Arc::new(Operators::embedded()),
                PrefixTable::default(),
                0,
                &self.metrics,
            )));
            return;
        };
        let mut loaded: Lists = 0;
        // Borrowed, not copied: the table is built from the held copies.
        let lists: Vec<&[IpNet]> = inner
            .held
            .iter()
            .enumerate()
            .map(|(i, h)| match &h.nets {
                Some(nets) => {
                    loaded |= 1 << i;
                    nets.as_slice()
                }
                None => &[],
            })
            .collect();
        let set = RangeSet::new(
            Arc::clone(&setup.operators),
            PrefixTable::new(&lists),
            loaded,
            &self.metrics,
        );
        drop(inner);
        self.current.store(Arc::new(set));
        self.update_gauges(SystemTime::now());
    }

    /// Handles one fetched or read copy: a good one replaces the held copy
    /// (and is saved to `state_dir` when given); a bad one is counted, and
    /// its reason returned the first time in a row it fails (the caller
    /// logs those together).
    fn take(
        &self,
        held: &mut Held,
        outcome: Result<Vec<u8>, String>,
        state_dir: Option<&Path>,
        now: SystemTime,
    ) -> Taken {
        held.attempted = Some(now);
        let parsed = outcome.and_then(|body| {
            parse_ranges(&body)
                .map(|nets| (nets, body))
                .map_err(|e| format!("refused: {e}"))
        });
        let counter = |result: &'static str| self.count_fetch(&held.name, result);
        match parsed {
            Ok((nets, body)) => {
                counter("ok");
                if held.failing {
                    tracing::info!(list = %held.name, source = %held.source, prefixes = nets.len(), "verify: range list loaded again");
                }
                held.failing = false;
                held.saved = false;
                held.nets = Some(Arc::new(nets));
                held.updated = Some(now);
                if let Some(dir) = state_dir {
                    if let Err(e) = save_state_copy(dir, &held.name, &body) {
                        tracing::warn!(list = %held.name, dir = %dir.display(), error = %e, "verify: cannot keep the list's copy on disk");
                    }
                }
                Taken::Loaded
            }
            Err(why) => {
                counter(if why.starts_with("refused") {
                    "malformed"
                } else {
                    "error"
                });
                let first = !held.failing;
                held.failing = true;
                if !first {
                    return Taken::StillFailing;
                }
                Taken::Failed(Failure {
                    list: held.name.clone(),
                    source: held.source.clone(),
                    why,
                    kept: held.nets.is_some(),
                })
            }
        }
    }

    /// Counts one fetch or read of `list` with `result`.
    fn count_fetch(&self, list: &str, result: &'static str) {
        self.metrics
            .fetches
            .get_or_create(&ListResultLabels {
                list: list.to_owned(),
                result,
            })
            .inc();
    }

    /// Fetches or reads every list that is due at `now`; returns how many
    /// changed.
    pub async fn refresh_due(&self, now: SystemTime) -> usize {
        let (due, state_dir, client, retry) = {
            let inner = self.lock();
            let Some(setup) = &inner.setup else {
                return 0;
            };
            let retry = RETRY_AFTER.min(setup.refresh);
            let due: Vec<(usize, Box<str>, Source)> = inner
                .held
                .iter()
                .enumerate()
                .filter(|(_, h)| is_due(h, setup.refresh, retry, now))
                .map(|(i, h)| (i, h.name.clone(), h.source.clone()))
                .collect();
            (due, setup.state_dir.clone(), setup.fetcher.clone(), retry)
        };
        if due.is_empty() {
            return 0;
        }
        tracing::debug!(
            lists = due.len(),
            "verify: fetching the range lists that are due"
        );
        let mut tasks = tokio::task::JoinSet::new();
        for (i, name, source) in due {
            let client = client.clone();
            tasks.spawn(async move {
                let outcome = match &source {
                    Source::Url(url) => client.get(url).await,
                    Source::File(path) => {
                        let path = path.clone();
                        tokio::task::spawn_blocking(move || std::fs::read(path))
                            .await
                            .map_err(|e| e.to_string())
                            .and_then(|read| read.map_err(|e| e.to_string()))
                    }
                };
                (i, name, source, outcome)
            });
        }
        let mut changed = 0;
        let mut failed = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let Ok((i, name, source, outcome)) = joined else {
                continue;
            };
            let mut inner = self.lock();
            // A reload may have changed the lists meanwhile: only a copy
            // of the same list from the same source is taken.
            let state = state_dir.as_deref();
            if let Some(h) = inner.held.get_mut(i) {
                if h.name == name && h.source == source {
                    match self.take(h, outcome, state, now) {
                        Taken::Loaded => changed += 1,
                        Taken::Failed(why) => failed.push(why),
                        Taken::StillFailing => {}
                    }
                }
            }
        }
        if !failed.is_empty() {
            failed.sort_by(|a, b| a.list.cmp(&b.list));
            log_failed(&failed, retry);
        }
        if changed > 0 {
            self.publish();
        }
        changed
    }

    /// Keeps the lists fresh until the task is dropped: fetches what is
    /// due, then waits for the next check (a minute, or `refresh` if
    /// shorter) or a new setup.
    pub async fn run(self: Arc<Self>) {
        loop {
            self.refresh_due(SystemTime::now()).await;
            let tick = {
                let inner = self.lock();
                inner.setup.as_ref().map_or(Duration::from_secs(60), |s| {
                    s.refresh.min(Duration::from_secs(60))
                })
            };
            tokio::select! {
                () = tokio::time::sleep(tick) => {}
                () = self.wake.notified() => {}
            }
            self.update_gauges(SystemTime::now());
        }
    }

    /// Sets each list's age and size gauges as of `now`.
    pub fn update_gauges(&self, now: SystemTime) {
        let inner = self.lock();
        self.metrics.age.clear();
        self.metrics.prefixes.clear();
        for h in &inner.held {
            let (Some(nets), Some(updated)) = (&h.nets, h.updated) else {
                continue;
            };
            let labels = ListLabels {
                list: h.name.to_string(),
            };
            let age = now.duration_since(updated).unwrap_or_default().as_secs();
            self.metrics
                .age
                .get_or_create(&labels)
                .set(i64::try_from(age).unwrap_or(i64::MAX));
            self.metrics
                .prefixes
                .get_or_create(&labels)
                .set(i64::try_from(nets.len()).unwrap_or(i64::MAX));
        }
    }

    /// How many lists hold the copy read from `state_dir` (for the
    /// start-up log: a local file or a fetch is not a saved copy).
    pub fn saved_copies(&self) -> usize {
        self.lock()
            .held
            .iter()
            .filter(|h| h.saved && h.nets.is_some())
            .count()
    }

    /// Each list's name, whether it has a copy, and that copy's age (for
    /// the start-up log and tests).
    pub fn status(&self, now: SystemTime) -> Vec<(Box<str>, Option<Duration>)> {
        self.lock()
            .held
            .iter()
            .map(|h| {
                let age = h
                    .nets
                    .as_ref()
                    .and(h.updated)
                    .map(|u| now.duration_since(u).unwrap_or_default());
                (h.name.clone(), age)
            })
            .collect()
    }
}

/// What one copy did to a list.
enum Taken {
    /// It replaced the held copy.
    Loaded,
    /// It was refused, the first time in a row.
    Failed(Failure),
    /// Refused again (already reported).
    StillFailing,
}

/// A list that just stopped updating.
#[derive(Debug)]
struct Failure {
    list: Box<str>,
    source: Source,
    why: String,
    /// It still has its last good copy.
    kept: bool,
}

/// The lists that just stopped updating in one round, as one short
/// warning: how many, how many have no copy at all (their robots stay
/// unverified; the others keep their last good copy), when they are tried
/// again and where each one's reason is. An offline host, where every list
/// fails at once, says so in one line, not in one per list; each list's
/// source and reason go to debug level (and its failures are counted in
/// `crawlgate_verify_list_fetches_total`).
fn log_failed(failed: &[Failure], retry: Duration) {
    for f in failed {
        tracing::debug!(
            list = %f.list,
            source = %f.source,
            error = %f.why,
            last_good_copy = f.kept,
            "verify: range list not updated",
        );
    }
    let without = failed.iter().filter(|f| !f.kept).count();
    let what = match failed {
        [one] => format!("range list {} not updated", one.list),
        _ => format!("{} range lists not updated", failed.len()),
    };
    tracing::warn!(
        "verify: {what} ({without} without any copy: their robots stay unverified); \
         tried again every {}; why: RUST_LOG=crawlgate::verify=debug, or \
         crawlgate_verify_list_fetches_total",
        humantime::format_duration(retry),
    );
}

fn is_due(h: &Held, refresh: Duration, retry: Duration, now: SystemTime) -> bool {
    let since = |t: Option<SystemTime>| t.map(|t| now.duration_since(t).unwrap_or_default());
    match (since(h.updated), since(h.attempted)) {
        // Never tried (a state copy alone counts as tried at its age).
        (None, None) => true,
        (updated, attempted) => {
            let fresh = updated.is_some_and(|age| age < refresh);
            let tried_recently = attempted.is_some_and(|age| age < retry);
            !fresh && !tried_recently
        }
    }
}

/// The state copy of a list: `<dir>/<list>.json`.
fn state_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

fn load_state_copy(dir: &Path, held: &mut Held) {
    let path = state_path(dir, &held.name);
    let Ok(body) = std::fs::read(&path) else {
        return;
    };
    match parse_ranges(&body) {
        Ok(nets) => {
            held.nets = Some(Arc::new(nets));
            held.updated = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            held.attempted = held.updated;
            held.saved = true;
        }
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "verify: ignoring an unusable saved copy");
        }
    }
}

/// Writes `body` as the list's state copy: a temporary file beside it,
/// synced, then renamed over it, so a reader sees the old or the new copy.
fn save_state_copy(dir: &Path, name: &str, body: &[u8]) -> std::io::Result<()> {
    let target = state_path(dir, name);
    let temp = dir.join(format!(".{name}.json.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(body)?;
        file.sync_all()?;
        std::fs::rename(&temp, &target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Creates `dir` if needed, after the load checked that it can be
/// ([`crate::live::check_dir_creatable`]): the side effect that
/// `check-config` leaves out.
pub fn create_state_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(dir).map_err(|source| StoreError::StateDir {
        path: dir.to_owned(),
        source,
    })
}

/// Why a list's local file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LocalListError {
    /// It cannot be read (missing, a folder, not ours to read).
    #[error("{}: {}", path.display(), describe_io(error))]
    Read {
        /// The file.
        path: PathBuf,
        /// The failure (in the message; not a `source`, which would
        /// print it twice).
        error: std::io::Error,
    },
    /// It is not a usable range list: `FILE:LINE: problem`.
    #[error("{}: {error}", crate::config::Location(path, *line))]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The line of the problem, when known.
        line: Option<usize>,
        /// The problem.
        error: super::RangeError,
    },
}

/// `no such file` for a missing file, else the error as the system says it.
fn describe_io(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        _ => err.to_string(),
    }
}

/// Reads and parses a list's local file (`[verify.ranges.<operator>]
/// <list> = "path"`): at every load, so that a missing or malformed file
/// fails the start, `check-config` and a reload alike.
pub fn read_local(path: &Path) -> Result<Vec<IpNet>, LocalListError> {
    let body = std::fs::read(path).map_err(|error| LocalListError::Read {
        path: path.to_owned(),
        error,
    })?;
    parse_ranges(&body).map_err(|error| {
        let line = match &error {
            super::RangeError::Shape(e) if e.line() > 0 => Some(e.line()),
            super::RangeError::Prefix { text, .. } => {
                let quoted = format!("\"{text}\"");
                body.windows(quoted.len())
                    .position(|w| w == quoted.as_bytes())
                    .map(|at| body[..at].iter().filter(|&&b| b == b'\n').count() + 1)
            }
            _ => None,
        };
        LocalListError::Malformed {
            path: path.to_owned(),
            line,
            error,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(updated: Option<u64>, attempted: Option<u64>) -> Held {
        let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        Held {
            name: "x.y".into(),
            source: Source::Url("https://example.com/x.json".into()),
            nets: updated.map(|_| Arc::new(Vec::new())),
            updated: updated.map(at),
            attempted: attempted.map(at),
            failing: false,
            saved: false,
        }
    }

    #[test]
    fn a_list_is_due_when_stale_and_not_tried_lately() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
        let refresh = Duration::from_secs(43_200);
        let retry = Duration::from_secs(300);
        let cases = [
            (held(None, None), true, "never tried"),
            (held(Some(99_000), Some(99_000)), false, "fresh"),
            (held(Some(50_000), Some(50_000)), true, "older than refresh"),
            (held(Some(50_000), Some(99_900)), false, "failed 100 s ago"),
            (
                held(None, Some(99_900)),
                false,
                "never loaded, failed 100 s ago",
            ),
            (
                held(None, Some(99_000)),
                true,
                "never loaded, failed long ago",
            ),
        ];
        for (h, want, what) in cases {
            assert_eq!(is_due(&h, refresh, retry, now), want, "{what}");
        }
    }

    #[test]
    fn sources() {
        assert_eq!(
            Source::parse("https://a.example/x.json"),
            Source::Url("https://a.example/x.json".into())
        );
        assert_eq!(
            Source::parse("lists/x.json"),
            Source::File("lists/x.json".into())
        );
    }

    #[test]
    fn state_copies_are_replaced_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        save_state_copy(
            dir.path(),
            "a.b",
            b"{\"prefixes\":[{\"ipv4Prefix\":\"192.0.2.0/24\"}]}",
        )
        .expect("saved");
        let mut h = held(None, None);
        h.name = "a.b".into();
        load_state_copy(dir.path(), &mut h);
        assert_eq!(h.nets.as_deref().map(Vec::len), Some(1));
        assert!(h.updated.is_some(), "its age is the file's");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["a.b.json"], "no temporary file is left");
    }
}
