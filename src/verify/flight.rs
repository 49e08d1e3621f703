//! Network answers the request path may wait for only briefly: cached for
//! as long as each answer holds, one lookup per key at a time, a bound on
//! lookups in flight, and a wait that ends at the configured time while
//! the lookup goes on and fills the cache. DNS answers and Web Bot Auth
//! key directories both go through it.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

/// What one receiver of a lookup in flight sees: nothing yet, or the answer.
type Pending<V> = watch::Receiver<Option<V>>;

/// Answers by key, shared by every worker.
pub struct Flights<K, V> {
    cache: quick_cache::sync::Cache<K, (V, Instant)>,
    inflight: Mutex<HashMap<K, Pending<V>>>,
    permits: Arc<Semaphore>,
    wait: Duration,
}

impl<K, V> std::fmt::Debug for Flights<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flights")
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl<K, V> Flights<K, V>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// Up to `entries` answers kept, `max_inflight` lookups at once, a
    /// request waiting at most `wait`.
    pub fn new(entries: usize, max_inflight: usize, wait: Duration) -> Self {
        Self {
            cache: quick_cache::sync::Cache::new(entries),
            inflight: Mutex::new(HashMap::new()),
            permits: Arc::new(Semaphore::new(max_inflight)),
            wait,
        }
    }

    /// The answer for `key`: cached and still valid, or from the lookup in
    /// flight for it, or from a new `lookup` (which answers with how long
    /// its answer holds). `None` when no answer came within the wait, or
    /// when the bound on lookups was reached.
    pub async fn get<F, Fut>(self: &Arc<Self>, key: &K, lookup: F) -> Option<V>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = (V, Duration)> + Send + 'static,
    {
        if let Some((answer, until)) = self.cache.get(key) {
            if until > Instant::now() {
                return Some(answer);
            }
        }
        let mut receiver = {
            let mut inflight = self
                .inflight
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match inflight.get(key) {
                Some(receiver) => receiver.clone(),
                None => {
                    let permit = Arc::clone(&self.permits).try_acquire_owned().ok()?;
                    let (sender, receiver) = watch::channel(None);
                    inflight.insert(key.clone(), receiver.clone());
                    let this = Arc::clone(self);
                    let key = key.clone();
                    let looked_up = lookup();
                    tokio::spawn(async move {
                        let (answer, ttl) = looked_up.await;
                        this.cache
                            .insert(key.clone(), (answer.clone(), Instant::now() + ttl));
                        this.inflight
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .remove(&key);
                        let _ = sender.send(Some(answer));
                        drop(permit);
                    });
                    receiver
                }
            }
        };
        let answered = async {
            loop {
                if let Some(answer) = receiver.borrow_and_update().clone() {
                    return Some(answer);
                }
                if receiver.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(self.wait, answered)
            .await
            .ok()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn one_lookup_per_key_cached_for_its_ttl_and_waits_are_bounded() {
        let flights: Arc<Flights<u32, &'static str>> =
            Arc::new(Flights::new(16, 2, Duration::from_millis(200)));
        let calls = Arc::new(AtomicUsize::new(0));
        let slow = |delay_ms: u64, answer: &'static str| {
            let calls = Arc::clone(&calls);
            move || async move {
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                (answer, Duration::from_secs(60))
            }
        };
        assert_eq!(flights.get(&1, slow(10, "a")).await, Some("a"));
        assert_eq!(flights.get(&1, slow(10, "b")).await, Some("a"), "cached");
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        // Past the wait: no answer now, the answer later, one lookup.
        assert_eq!(flights.get(&2, slow(1000, "late")).await, None);
        assert_eq!(
            flights.get(&2, slow(1000, "other")).await,
            None,
            "joins the one in flight"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(flights.get(&2, slow(1000, "x")).await, Some("late"));
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        // The bound: two slow lookups in flight, a third key gets nothing.
        assert_eq!(flights.get(&3, slow(5000, "c")).await, None);
        assert_eq!(flights.get(&4, slow(5000, "d")).await, None);
        assert_eq!(flights.get(&5, slow(10, "e")).await, None, "over the bound");
        assert_eq!(calls.load(Ordering::SeqCst), 4);

        // An answer expires with its TTL.
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert_eq!(flights.get(&1, slow(10, "fresh")).await, Some("fresh"));
    }
}
