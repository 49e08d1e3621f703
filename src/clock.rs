//! Clocks: the wall clock in Unix seconds, and clocks kept in atomics:
//! milliseconds since an epoch, and when something last moved
//! (`Progress`), shared between the task that moves data and the one
//! that waits for quiet.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Milliseconds since `epoch`: the clock of [`Progress`] and the
/// HTTP/2 stream bookkeeping, kept in atomics.
pub(crate) fn millis_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// When something last moved, and a wait for a quiet period: the clock of
/// the response timeout (an upload's data) and of a tunnel's idle timeout
/// (bytes either way). Lock-free, so that the writer and the waiter may
/// sit in different tasks.
#[derive(Debug)]
pub(crate) struct Progress {
    epoch: Instant,
    /// Milliseconds after `epoch` of the last movement (0: none yet).
    last: AtomicU64,
}

impl Progress {
    /// A clock whose quiet period starts now.
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// Something moved.
    pub(crate) fn touch(&self) {
        self.last.store(millis_since(self.epoch), Ordering::Relaxed);
    }

    /// Completes once nothing has moved for `timeout`.
    pub(crate) async fn quiet_for(&self, timeout: Duration) {
        loop {
            let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
            let due = self.epoch + last + timeout;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due).await;
        }
    }
}
