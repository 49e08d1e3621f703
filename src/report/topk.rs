//! The most frequent keys of a stream in bounded memory: a lossy counter.
//!
//! Keys are counted exactly while there are fewer than twice the
//! capacity; when the table fills, the lower half by count is dropped
//! and the highest count dropped becomes the error bound of every key
//! counted after (a key dropped and seen again may have missed that many).
//! A key that is truly among the most frequent stays; its count is a
//! lower bound, off by at most its `error`.

use std::collections::HashMap;

use super::model::Count;

/// Fixed seeds: the same input gives the same report.
pub(crate) fn hasher() -> ahash::RandomState {
    ahash::RandomState::with_seeds(0x6372_6177, 0x6c67_6174, 0x6520_7265, 0x706f_7274)
}

/// The top keys of a stream, each with a value of its own (`T`).
#[derive(Clone, Debug)]
pub struct TopK<T> {
    capacity: usize,
    map: HashMap<Box<[u8]>, Slot<T>, ahash::RandomState>,
    /// The highest count dropped so far.
    floor: u64,
}

#[derive(Clone, Debug)]
struct Slot<T> {
    count: u64,
    error: u64,
    value: T,
}

impl<T: Default> TopK<T> {
    /// Keeps at least the `capacity` most frequent keys.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            map: HashMap::with_hasher(hasher()),
            floor: 0,
        }
    }

    /// Counts `key` once; its value, to update.
    pub fn add(&mut self, key: &[u8]) -> &mut T {
        if !self.map.contains_key(key) {
            if self.map.len() >= 2 * self.capacity {
                self.prune();
            }
            self.map.insert(
                key.into(),
                Slot {
                    count: 0,
                    error: self.floor,
                    value: T::default(),
                },
            );
        }
        match self.map.get_mut(key) {
            Some(slot) => {
                slot.count += 1;
                &mut slot.value
            }
            // Inserted just above.
            None => unreachable!("a key inserted is found"),
        }
    }

    /// Drops the lower half by count.
    fn prune(&mut self) {
        let mut counts: Vec<u64> = self.map.values().map(|s| s.count).collect();
        let cut = counts.len() - self.capacity;
        let (_, &mut threshold, _) = counts.select_nth_unstable(cut);
        // Keep the keys above the threshold, and of those at it only as
        // many as fit.
        let mut room = self.capacity - self.map.values().filter(|s| s.count > threshold).count();
        let mut dropped = 0;
        self.map.retain(|_, s| {
            let keep = s.count > threshold
                || (s.count == threshold && room > 0 && {
                    room -= 1;
                    true
                });
            if !keep {
                dropped = dropped.max(s.count);
            }
            keep
        });
        self.floor = self.floor.max(dropped);
    }

    /// The `n` most frequent keys, most first (ties by key), as text.
    pub fn top(&self, n: usize) -> Vec<Count> {
        self.top_with(n, |_| true)
    }

    /// The `n` most frequent keys whose value passes `keep`.
    pub fn top_with(&self, n: usize, keep: impl Fn(&T) -> bool) -> Vec<Count> {
        let mut all: Vec<(&[u8], &Slot<T>)> = self
            .map
            .iter()
            .filter(|(_, s)| keep(&s.value))
            .map(|(k, s)| (&**k, s))
            .collect();
        all.sort_unstable_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
        all.into_iter()
            .take(n)
            .map(|(key, slot)| Count {
                key: String::from_utf8_lossy(key).into_owned(),
                requests: slot.count,
                error: slot.error,
            })
            .collect()
    }

    /// Each key's value, for sums over what is kept.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.map.values().map(|s| &s.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_while_small() {
        let mut top = TopK::<()>::new(4);
        for key in ["a", "b", "a", "c", "a", "b"] {
            top.add(key.as_bytes());
        }
        let got: Vec<(String, u64, u64)> = top
            .top(2)
            .into_iter()
            .map(|c| (c.key, c.requests, c.error))
            .collect();
        assert_eq!(got, [("a".into(), 3, 0), ("b".into(), 2, 0)]);
    }

    #[test]
    fn heavy_keys_survive_a_long_tail_in_bounded_memory() {
        let mut top = TopK::<()>::new(8);
        for i in 0..100_000u32 {
            // Three heavy keys among a tail of keys seen once.
            let key = match i % 10 {
                0..=2 => b"heavy-1".to_vec(),
                3..=4 => b"heavy-2".to_vec(),
                5 => b"heavy-3".to_vec(),
                _ => format!("tail-{i}").into_bytes(),
            };
            top.add(&key);
            assert!(top.map.len() <= 16);
        }
        let best = top.top(3);
        let keys: Vec<&str> = best.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["heavy-1", "heavy-2", "heavy-3"]);
        assert_eq!(best[0].requests, 30_000);
        assert_eq!(best[0].error, 0, "never dropped");
    }
}
