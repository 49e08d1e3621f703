//! One worker thread's own state: what cannot be shared between event
//! loops (an upstream connection pool, a resolver, an HTTPS client),
//! derived from the snapshot in effect and rebuilt, on the worker's own
//! thread, when a reload has swapped it.

use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use crate::proxy::Upstream;
use crate::verify::dns::DnsChecker;
use crate::verify::signature::SignatureChecker;

use super::Snapshot;

/// The one swap: the snapshot in effect, read by every worker, replaced
/// whole by a reload.
pub type Current = ArcSwap<Snapshot>;

/// A worker's state for one snapshot.
#[derive(Debug)]
pub struct Worker {
    /// The snapshot it was derived from.
    pub snapshot: Arc<Snapshot>,
    /// The upstream, with this worker's connection pool.
    pub upstream: Upstream,
    /// This worker's resolver over the process's answer cache, when
    /// reverse DNS is on (and a resolver could be built).
    pub dns: Option<DnsChecker>,
    /// This worker's client for key directories over the process's
    /// cache, when signatures are on.
    pub signatures: Option<SignatureChecker>,
}

impl Worker {
    /// A worker's first state.
    pub fn new(snapshot: Arc<Snapshot>) -> Self {
        let verify = snapshot.verify.as_ref();
        Self {
            upstream: snapshot.upstream.with_own_pool(),
            // A resolver that cannot be built again (the system's
            // configuration vanished) leaves that worker without DNS.
            dns: verify
                .and_then(|v| v.dns.as_ref())
                .and_then(|d| d.for_worker().ok()),
            signatures: signatures(&snapshot),
            snapshot,
        }
    }

    /// This worker's state for `snapshot`, keeping its pool where the
    /// upstream did not change (see [`Upstream::keeping_pool_of`]) and its
    /// resolver where the resolver's settings did not.
    fn follow(&self, snapshot: Arc<Snapshot>) -> Self {
        let template = snapshot.verify.as_ref().and_then(|v| v.dns.as_ref());
        let dns = match (template, &self.dns) {
            (Some(wanted), Some(had)) if wanted.same_as(had) => Some(had.clone()),
            (Some(wanted), _) => wanted.for_worker().ok(),
            (None, _) => None,
        };
        Self {
            upstream: snapshot.upstream.keeping_pool_of(&self.upstream),
            dns,
            signatures: signatures(&snapshot),
            snapshot,
        }
    }
}

/// The worker's own signature client, when the snapshot verifies
/// signatures (a client is never shared between event loops).
fn signatures(snapshot: &Snapshot) -> Option<SignatureChecker> {
    let checker = snapshot.verify.as_ref()?.signatures.as_ref()?;
    Some(checker.for_worker())
}

/// Where a worker finds its state: the current snapshot, and its own
/// state derived from it.
#[derive(Debug)]
pub struct WorkerSlot {
    current: Arc<Current>,
    own: Mutex<Arc<Worker>>,
}

impl WorkerSlot {
    /// A worker's slot over `current`, its state derived at once.
    pub fn new(current: Arc<Current>) -> Self {
        let own = Worker::new(current.load_full());
        Self {
            current,
            own: Mutex::new(Arc::new(own)),
        }
    }

    /// The worker's state for the snapshot in effect, derived again when
    /// a reload has swapped it since the last request.
    pub fn get(&self) -> Arc<Worker> {
        let snapshot = self.current.load();
        let mut own = self.own.lock().unwrap_or_else(PoisonError::into_inner);
        if !Arc::ptr_eq(&own.snapshot, &snapshot) {
            let next = own.follow(arc_swap::Guard::into_inner(snapshot));
            *own = Arc::new(next);
        }
        Arc::clone(&own)
    }

    /// The snapshot in effect.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }
}
