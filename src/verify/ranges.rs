//! The operators' published IP ranges and the table a request's address
//! is looked up in.
//!
//! Google, Bing, OpenAI, Apple, Perplexity, Common Crawl and others publish
//! the addresses their crawlers use as JSON files of one common shape:
//!
//! ```json
//! {"creationTime": "…", "prefixes": [{"ipv4Prefix": "66.249.64.0/27"}, {"ipv6Prefix": "2001:4860:4801:10::/64"}]}
//! ```
//!
//! [`parse_ranges`] reads one (extra fields are ignored; an empty or
//! malformed file is an error, so a good list is never replaced by a bad
//! one), and [`PrefixTable`] holds every list at once as sorted, disjoint
//! address segments, each with the set of lists that contain it: a lookup
//! is one binary search, allocates nothing, and never scans the prefixes.

use std::net::IpAddr;
#[cfg(test)]
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use serde::Deserialize;

/// Why a range file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RangeError {
    /// Not JSON of the expected shape.
    #[error("not a range file ({{\"prefixes\": [{{\"ipv4Prefix\": …}}]}}): {0}")]
    Shape(#[from] serde_json::Error),
    /// A prefix that is not an address range.
    #[error("entry {index}: {text:?} is not an address prefix like 192.0.2.0/24")]
    Prefix {
        /// Its position in `prefixes`, from 0.
        index: usize,
        /// As written.
        text: String,
    },
    /// An entry with neither an `ipv4Prefix` nor an `ipv6Prefix`.
    #[error("entry {0}: no ipv4Prefix or ipv6Prefix")]
    Missing(usize),
    /// No prefixes at all.
    #[error("no prefixes: an empty list never replaces a good one")]
    Empty,
}

#[derive(Deserialize)]
struct RangeFile {
    prefixes: Vec<RangeEntry>,
}

#[derive(Deserialize)]
struct RangeEntry {
    #[serde(rename = "ipv4Prefix")]
    ipv4: Option<String>,
    #[serde(rename = "ipv6Prefix")]
    ipv6: Option<String>,
}

/// The prefixes of one range file.
pub fn parse_ranges(json: &[u8]) -> Result<Vec<IpNet>, RangeError> {
    let file: RangeFile = serde_json::from_slice(json)?;
    if file.prefixes.is_empty() {
        return Err(RangeError::Empty);
    }
    file.prefixes
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            let text = entry
                .ipv4
                .or(entry.ipv6)
                .ok_or(RangeError::Missing(index))?;
            text.trim()
                .parse::<IpNet>()
                .map(|net| net.trunc())
                .map_err(|_| RangeError::Prefix { index, text })
        })
        .collect()
}

/// A set of lists, one bit per list (at most [`PrefixTable::MAX_LISTS`]).
pub type Lists = u64;

/// Every list's prefixes as sorted, disjoint segments per address family.
#[derive(Clone, Debug, Default)]
pub struct PrefixTable {
    v4: Vec<Segment<u32>>,
    v6: Vec<Segment<u128>>,
}

/// Addresses `start..=end`, in the lists of `lists`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment<T> {
    start: T,
    end: T,
    lists: Lists,
}

impl PrefixTable {
    /// The most lists a table holds.
    pub const MAX_LISTS: usize = 64;

    /// The table of `lists` (list `i` is bit `i`); lists past
    /// [`Self::MAX_LISTS`] are left out.
    pub fn new<L: AsRef<[IpNet]>>(lists: &[L]) -> Self {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (i, nets) in lists.iter().take(Self::MAX_LISTS).enumerate() {
            let bit = 1 << i;
            for net in nets.as_ref() {
                match net {
                    IpNet::V4(n) => {
                        v4.push((u32::from(n.network()), u32::from(n.broadcast()), bit))
                    }
                    IpNet::V6(n) => {
                        v6.push((u128::from(n.network()), u128::from(n.broadcast()), bit))
                    }
                }
            }
        }
        Self {
            v4: segments(v4),
            v6: segments(v6),
        }
    }

    /// The lists that contain `ip` (0: none). An IPv4 address mapped into
    /// IPv6 (`::ffff:a.b.c.d`) is looked up as IPv4.
    pub fn lookup(&self, ip: IpAddr) -> Lists {
        match ip {
            IpAddr::V4(v4) => find(&self.v4, u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => find(&self.v4, u32::from(v4)),
                None => find(&self.v6, u128::from(v6)),
            },
        }
    }

    /// Segments held, both families (for tests and metrics).
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    /// Whether the table holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The segment containing `ip`, by binary search on the starts.
fn find<T: Copy + Ord>(segments: &[Segment<T>], ip: T) -> Lists {
    let after = segments.partition_point(|s| s.start <= ip);
    match after.checked_sub(1).map(|i| segments[i]) {
        Some(s) if ip <= s.end => s.lists,
        _ => 0,
    }
}

/// Ranges (start, end, list bit), overlapping or not, as sorted disjoint
/// segments with the union of the lists over each: a sweep over every
/// range boundary.
fn segments<T>(ranges: Vec<(T, T, Lists)>) -> Vec<Segment<T>>
where
    T: Copy + Ord + Bound,
{
    // Boundaries: a range adds its bit at `start` and removes it after
    // `end`. Counting per bit handles ranges of one list that overlap.
    let mut events: Vec<(T, bool, Lists)> = Vec::with_capacity(ranges.len() * 2);
    for &(start, end, bit) in &ranges {
        events.push((start, true, bit));
        if let Some(after) = end.next() {
            events.push((after, false, bit));
        }
    }
    events.sort_unstable_by_key(|e| e.0);
    let mut counts = [0u32; PrefixTable::MAX_LISTS];
    let mut out: Vec<Segment<T>> = Vec::new();
    let mut i = 0;
    while i < events.len() {
        let at = events[i].0;
        while i < events.len() && events[i].0 == at {
            let (_, opens, bit) = events[i];
            let slot = bit.trailing_zeros() as usize;
            if opens {
                counts[slot] += 1;
            } else {
                counts[slot] -= 1;
            }
            i += 1;
        }
        let lists = counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .fold(0, |acc, (slot, _)| acc | (1 << slot));
        // The segment runs to just before the next boundary (or the end of
        // the address space).
        let end = events.get(i).and_then(|e| e.0.prev()).unwrap_or(T::MAX);
        if let Some(last) = out.last_mut() {
            if last.lists == lists && last.end.next() == Some(at) {
                last.end = end;
                continue;
            }
        }
        if lists != 0 {
            out.push(Segment {
                start: at,
                end,
                lists,
            });
        }
    }
    out
}

/// Stepping through an address space.
trait Bound: Sized {
    const MAX: Self;
    fn next(self) -> Option<Self>;
    fn prev(self) -> Option<Self>;
}

impl Bound for u32 {
    const MAX: Self = u32::MAX;
    fn next(self) -> Option<Self> {
        self.checked_add(1)
    }
    fn prev(self) -> Option<Self> {
        self.checked_sub(1)
    }
}

impl Bound for u128 {
    const MAX: Self = u128::MAX;
    fn next(self) -> Option<Self> {
        self.checked_add(1)
    }
    fn prev(self) -> Option<Self> {
        self.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    fn v6(text: &str) -> IpAddr {
        IpAddr::V6(text.parse::<Ipv6Addr>().expect("an IPv6 address"))
    }

    fn nets(texts: &[&str]) -> Vec<IpNet> {
        texts.iter().map(|t| t.parse().expect("net")).collect()
    }

    #[test]
    fn the_common_shape_parses_with_extra_fields() {
        let json = br#"{"creationTime": "2026-12-01T10:00:00.000000", "syncToken": "1",
            "prefixes": [{"ipv4Prefix": "66.249.64.0/27"}, {"ipv6Prefix": "2001:4860:4801:10::/64", "note": "x"},
                         {"ipv4Prefix": "66.249.64.33/27"}]}"#;
        let got = parse_ranges(json).expect("valid");
        assert_eq!(
            got,
            nets(&[
                "66.249.64.0/27",
                "2001:4860:4801:10::/64",
                "66.249.64.32/27"
            ]),
            "host bits are cleared"
        );
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "not a range file"),
            (b"<html>", "not a range file"),
            (br#"{"prefixes": []}"#, "no prefixes"),
            (br#"{"creationTime": "x"}"#, "not a range file"),
            (
                br#"{"prefixes": [{"ipv4Prefix": "66.249.64.0/33"}]}"#,
                "entry 0: \"66.249.64.0/33\"",
            ),
            (
                br#"{"prefixes": [{"ipv4Prefix": "1.2.3.0/24"}, {"other": 1}]}"#,
                "entry 1: no ipv4Prefix",
            ),
        ];
        for (json, want) in cases {
            let err = parse_ranges(json).expect_err("refused").to_string();
            assert!(
                err.contains(want),
                "{}: {err}",
                String::from_utf8_lossy(json)
            );
        }
    }

    #[test]
    fn lookups_find_every_list_that_holds_an_address() {
        let table = PrefixTable::new(&[
            nets(&["66.249.64.0/19", "2001:4860:4801::/48"]),
            nets(&["66.249.66.0/24", "157.55.39.0/24"]),
            nets(&["157.55.39.128/25", "157.55.39.0/26"]),
        ]);
        let cases = [
            (v4(66, 249, 63, 255), 0),
            (v4(66, 249, 64, 0), 0b001),
            (v4(66, 249, 66, 1), 0b011),
            (v4(66, 249, 95, 255), 0b001),
            (v4(66, 249, 96, 0), 0),
            (v4(157, 55, 39, 1), 0b110),
            (v4(157, 55, 39, 64), 0b010),
            (v4(157, 55, 39, 200), 0b110),
            (v4(157, 55, 40, 0), 0),
            (v6("2001:4860:4801::1"), 0b001),
            (v6("2001:4860:4802::1"), 0),
            (v6("::ffff:66.249.66.9"), 0b011),
            (v4(0, 0, 0, 0), 0),
            (v4(255, 255, 255, 255), 0),
        ];
        for (ip, want) in cases {
            assert_eq!(table.lookup(ip), want, "{ip}");
        }
    }

    #[test]
    fn segments_merge_and_reach_the_ends_of_the_space() {
        // Adjacent prefixes of one list become one segment; the whole
        // space and its last address work.
        let table =
            PrefixTable::new(&[nets(&["10.0.0.0/9", "10.128.0.0/9", "255.255.255.255/32"])]);
        assert_eq!(table.v4.len(), 2, "{:?}", table.v4);
        assert_eq!(table.lookup(v4(10, 200, 0, 1)), 1);
        assert_eq!(table.lookup(v4(255, 255, 255, 255)), 1);
        let all = PrefixTable::new(&[nets(&["0.0.0.0/0", "::/0"])]);
        assert_eq!(all.lookup(v4(8, 8, 8, 8)), 1);
        assert_eq!(all.lookup(v6("ffff::1")), 1);
        assert!(PrefixTable::new::<Vec<IpNet>>(&[]).is_empty());
    }

    /// Against a linear scan of the prefixes, on many addresses.
    #[test]
    fn the_table_agrees_with_a_linear_scan() {
        let lists: Vec<Vec<IpNet>> = (0..5u8)
            .map(|l| {
                (0..40u8)
                    .map(|i| {
                        let len = 16 + (u32::from(i) * 7 + u32::from(l)) % 17;
                        format!("{}.{}.{}.0/{len}", 10 + l % 3, i.wrapping_mul(37), i)
                            .parse::<IpNet>()
                            .expect("net")
                            .trunc()
                    })
                    .collect()
            })
            .collect();
        let table = PrefixTable::new(&lists);
        for a in 10..13u8 {
            for b in (0..=255u8).step_by(3) {
                for c in (0..=255u8).step_by(17) {
                    let ip = v4(a, b, c, 7);
                    let want = lists
                        .iter()
                        .enumerate()
                        .filter(|(_, nets)| nets.iter().any(|n| n.contains(&ip)))
                        .fold(0, |acc, (i, _)| acc | (1 << i));
                    assert_eq!(table.lookup(ip), want, "{ip}");
                }
            }
        }
    }
}
