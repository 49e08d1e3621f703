//! `[ai]`: the site's AI-crawler policy, per kind of AI crawler.

use serde::Deserialize;

use super::{invalid, ConfigError};

/// `[ai]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAi {
    /// Crawlers collecting training data: `allow` or `disallow`.
    pub training: Option<String>,
    /// Crawlers indexing for AI search and answers.
    pub search: Option<String>,
    /// Fetchers acting for a person's request to an assistant.
    pub user_fetch: Option<String>,
    /// Answer 403 to a disallowed kind's requests, not only say so in
    /// robots.txt.
    pub enforce: Option<bool>,
}

/// The kinds of AI crawler a site owner may allow or refuse apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AiKind {
    /// Collecting content to train models.
    Training,
    /// Indexing for an AI search or answer engine.
    Search,
    /// Fetching a page because a person asked an assistant to.
    UserFetch,
}

impl AiKind {
    /// Every kind, in [`AiKind::as_str`] order.
    pub const ALL: [AiKind; 3] = [AiKind::Training, AiKind::Search, AiKind::UserFetch];

    /// `training`, `search` or `user_fetch`: the config key.
    pub fn as_str(self) -> &'static str {
        match self {
            AiKind::Training => "training",
            AiKind::Search => "search",
            AiKind::UserFetch => "user_fetch",
        }
    }
}

/// `[ai]`, validated: per kind, allowed (`Some(true)`), refused
/// (`Some(false)`) or not stated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AiConfig {
    /// Training crawlers.
    pub training: Option<bool>,
    /// AI search crawlers.
    pub search: Option<bool>,
    /// User-triggered fetchers.
    pub user_fetch: Option<bool>,
    /// 403 for a refused kind's requests.
    pub enforce: bool,
}

impl AiConfig {
    /// What was stated for `kind`.
    pub fn stated(&self, kind: AiKind) -> Option<bool> {
        match kind {
            AiKind::Training => self.training,
            AiKind::Search => self.search,
            AiKind::UserFetch => self.user_fetch,
        }
    }

    /// Whether `kind` may fetch (not stated: yes).
    pub fn allows(&self, kind: AiKind) -> bool {
        self.stated(kind).unwrap_or(true)
    }
}

/// `[ai]`: `None` when it states nothing.
pub(super) fn ai_config(raw: RawAi) -> Result<Option<AiConfig>, ConfigError> {
    let RawAi {
        training,
        search,
        user_fetch,
        enforce,
    } = raw;
    let allow = |key: &'static str, value: Option<String>| match value.as_deref() {
        None => Ok(None),
        Some("allow") => Ok(Some(true)),
        Some("disallow") => Ok(Some(false)),
        Some(other) => Err(invalid(
            key,
            format!("{other:?} is not \"allow\" or \"disallow\""),
        )),
    };
    let config = AiConfig {
        training: allow("ai.training", training)?,
        search: allow("ai.search", search)?,
        user_fetch: allow("ai.user_fetch", user_fetch)?,
        enforce: enforce.unwrap_or(false),
    };
    let stated =
        config.training.is_some() || config.search.is_some() || config.user_fetch.is_some();
    if config.enforce && !stated {
        return Err(invalid(
            "ai.enforce",
            "there is nothing to enforce: set training, search or user_fetch to \"disallow\"",
        ));
    }
    Ok(stated.then_some(config))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load;

    #[test]
    fn the_ai_policy_is_stated_or_absent() {
        assert!(load("").expect("valid").ai.is_none());
        assert!(load("[ai]").expect("valid").ai.is_none());
        let ai = load("[ai]\ntraining = \"disallow\"\nuser_fetch = \"allow\"\nenforce = true")
            .expect("valid")
            .ai
            .expect("stated");
        assert_eq!(
            (ai.training, ai.search, ai.user_fetch, ai.enforce),
            (Some(false), None, Some(true), true)
        );
        for (text, want) in [
            (
                "training = \"no\"",
                "ai.training: \"no\" is not \"allow\" or \"disallow\"",
            ),
            ("enforce = true", "ai.enforce: there is nothing to enforce"),
        ] {
            let err = load(&format!("[ai]\n{text}")).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
