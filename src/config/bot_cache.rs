//! `[bot_cache]`: the robots-only cache's size and lifetimes, and the
//! robot classes that never use it.

use std::time::Duration;

use serde::Deserialize;

use super::{byte_size, distinct_class_names, duration, invalid, ConfigError};

/// `[bot_cache]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBotCache {
    /// Switch the cache off while keeping its settings.
    pub enabled: Option<bool>,
    /// How long an entry is fresh; turns the cache on.
    pub ttl: Option<String>,
    /// Bytes the cache holds at most ("64MiB").
    pub size: Option<String>,
    /// Largest response body kept ("1MiB").
    pub max_item: Option<String>,
    /// How long past `ttl` an entry may stand in for an error.
    pub max_stale: Option<String>,
    /// Robot classes that always see the live site: never answered from
    /// the cache, never filling it.
    pub live_classes: Option<Vec<String>>,
}

/// `[bot_cache]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotCacheConfig {
    /// How long an entry is served as fresh.
    pub ttl: Duration,
    /// Bytes the cache holds at most.
    pub size: u64,
    /// Largest response body kept, in bytes.
    pub max_item: u64,
    /// How long past its freshness an entry may still stand in for an
    /// error.
    pub max_stale: Duration,
    /// Robot classes that never read the cache nor fill it, as written
    /// (the rules load checks them against its class table); `None`: the
    /// default, [`BotCacheConfig::DEFAULT_LIVE_CLASSES`], those of them the
    /// rules have.
    pub live_classes: Option<Vec<Box<str>>>,
}

impl BotCacheConfig {
    /// The default `live_classes`: uptime monitors, which must see an
    /// outage as it is, and server-to-server callbacks (webhooks, payment
    /// notices), which must reach the site. (The classes `[shed] order`
    /// leaves out by default.)
    pub const DEFAULT_LIVE_CLASSES: [&'static str; 2] = ["monitor", "service"];

    /// Whether a cache of `self` holds what one of `other` would: the
    /// same size and lifetimes (`live_classes` only says who may use it).
    pub fn same_store(&self, other: &Self) -> bool {
        (self.ttl, self.size, self.max_item, self.max_stale)
            == (other.ttl, other.size, other.max_item, other.max_stale)
    }
}

/// `size` must be at least this many times `max_item`.
pub const SIZE_PER_ITEM: u64 = 32;

/// `[bot_cache]`: `None` unless `ttl` is set and `enabled` is not false.
pub(super) fn bot_cache_config(raw: RawBotCache) -> Result<Option<BotCacheConfig>, ConfigError> {
    let RawBotCache {
        enabled,
        ttl,
        size,
        max_item,
        max_stale,
        live_classes,
    } = raw;
    let ttl_set = ttl.is_some();
    let size = byte_size("bot_cache.size", size, "64MiB")?;
    let config = BotCacheConfig {
        ttl: duration("bot_cache.ttl", ttl, "10m")?,
        size,
        // By default 1 MiB, or less in a small cache.
        max_item: match max_item {
            Some(text) => byte_size("bot_cache.max_item", Some(text), "")?,
            None => (1 << 20).min(size / SIZE_PER_ITEM).max(1),
        },
        max_stale: duration("bot_cache.max_stale", max_stale, "1d")?,
        live_classes: match live_classes {
            None => None,
            Some(names) => {
                distinct_class_names("bot_cache.live_classes", &names)?;
                Some(names.into_iter().map(String::into_boxed_str).collect())
            }
        },
    };
    if config.size < 1024 * 1024 || config.size > 1 << 40 {
        return Err(invalid(
            "bot_cache.size",
            format!("{} bytes is outside 1MiB to 1TiB", config.size),
        ));
    }
    if config.max_item.saturating_mul(SIZE_PER_ITEM) > config.size {
        return Err(invalid(
            "bot_cache.max_item",
            format!(
                "{} bytes is over {} bytes, 1/{SIZE_PER_ITEM} of bot_cache.size ({} bytes)",
                config.max_item,
                config.size / SIZE_PER_ITEM,
                config.size
            ),
        ));
    }
    if !ttl_set {
        return Ok(None);
    }
    Ok(enabled.unwrap_or(true).then_some(config))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load;
    use std::time::Duration;

    #[test]
    fn the_bot_cache_is_on_only_with_a_ttl() {
        assert!(load("").expect("valid").bot_cache.is_none());
        assert!(load("[bot_cache]\nsize = \"8MiB\"")
            .expect("valid")
            .bot_cache
            .is_none());
        let on = load("[bot_cache]\nttl = \"10m\"")
            .expect("valid")
            .bot_cache
            .expect("on");
        assert_eq!(on.ttl, Duration::from_secs(600));
        assert_eq!(on.size, 64 * 1024 * 1024);
        assert_eq!(on.max_item, 1024 * 1024);
        assert_eq!(on.max_stale, Duration::from_secs(86_400));
        assert_eq!(on.live_classes, None);
        let custom = load("[bot_cache]\nttl = \"30s\"\nsize = \"512 MiB\"\nmax_item = \"4MiB\"\nmax_stale = \"2h\"")
            .expect("valid")
            .bot_cache
            .expect("on");
        assert_eq!((custom.size, custom.max_item), (512 << 20, 4 << 20));
        let none = load("[bot_cache]\nttl = \"1m\"\nlive_classes = []")
            .expect("valid")
            .bot_cache
            .expect("on");
        assert_eq!(none.live_classes, Some(Vec::new()));
        let one = load("[bot_cache]\nttl = \"10m\"\nlive_classes = [\"monitor\"]")
            .expect("valid")
            .bot_cache
            .expect("on");
        assert!(one.same_store(&on) && one != on);
        assert!(load("[bot_cache]\nttl = \"10m\"\nenabled = false")
            .expect("valid")
            .bot_cache
            .is_none());
        for (text, want) in [
            ("ttl = \"0s\"", "bot_cache.ttl: must be greater"),
            (
                "ttl = \"1m\"\nsize = \"lots\"",
                "bot_cache.size: \"lots\" is not a size",
            ),
            (
                "ttl = \"1m\"\nsize = \"100KiB\"",
                "bot_cache.size: 102400 bytes is outside",
            ),
            (
                "ttl = \"1m\"\nmax_item = \"0\"",
                "bot_cache.max_item: must be greater",
            ),
            (
                "ttl = \"1m\"\nsize = \"8MiB\"\nmax_item = \"1MiB\"",
                "bot_cache.max_item: 1048576 bytes is over 262144 bytes, 1/32 of bot_cache.size (8388608 bytes)",
            ),
            (
                "ttl = \"1m\"\nlive_classes = [\"monitor\", \"monitor\"]",
                "bot_cache.live_classes: \"monitor\" is empty or named twice",
            ),
            (
                "ttl = \"1m\"\nlive_classes = [\"\"]",
                "bot_cache.live_classes: \"\" is empty or named twice",
            ),
            (
                "ttl = \"1m\"\nlive_classes = \"monitor\"",
                "bot_cache.live_classes: invalid type",
            ),
            (
                "ttl = \"1m\"\ncapacity = 1",
                "bot_cache.capacity: unknown field",
            ),
        ] {
            let err = load(&format!("[bot_cache]\n{text}")).expect_err(text);
            assert!(err.starts_with(want), "{text}: {err}");
        }
    }
}
