//! `[verify]`: checking that a robot is the crawler it claims to be.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use http::header::HeaderName;
use http::uri::Uri;
use serde::Deserialize;

use super::{duration, invalid, ConfigError};

/// `[verify]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVerify {
    /// Verification on (the default) or off.
    pub enabled: Option<bool>,
    /// How often each range list is fetched again ("12h").
    pub refresh: Option<String>,
    /// Where the last good copy of each list is kept.
    pub state_dir: Option<PathBuf>,
    /// Reverse-then-forward DNS for the operators that document it.
    pub dns: Option<bool>,
    /// The DNS server (`IP` or `IP:port`); the system's by default.
    pub resolver: Option<String>,
    /// The longest a request waits for DNS.
    pub dns_timeout: Option<String>,
    /// DNS lookups in flight at once, at most.
    pub dns_max_inflight: Option<u32>,
    /// What to do with a spoofed claim: `log` (default) or `block`.
    pub spoofed: Option<String>,
    /// The header telling the upstream the verdict.
    pub header: Option<String>,
    /// Lists replaced by a local file or another URL, per operator.
    pub ranges:
        Option<std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>>,
    /// Verify Web Bot Auth signatures.
    pub signatures: Option<bool>,
    /// Agents whose key directories may be fetched, beyond the operators'.
    pub signature_agents: Option<Vec<String>>,
    /// The longest a request waits for an agent's key directory.
    pub directory_timeout: Option<String>,
    /// Extra root certificates (PEM) for fetching lists and directories.
    pub ca_file: Option<PathBuf>,
}

/// What to do with a request whose crawler claim is spoofed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spoofed {
    /// Treat it as the unknown robot it is, and log it.
    Log,
    /// Answer 403 on every URL.
    Block,
}

/// `[verify]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyConfig {
    /// How often each list is fetched again.
    pub refresh: Duration,
    /// Where the last good copies are kept.
    pub state_dir: Option<PathBuf>,
    /// Reverse-then-forward DNS on.
    pub dns: bool,
    /// The DNS server; `None`: the system's (`/etc/resolv.conf`).
    pub resolver: Option<SocketAddr>,
    /// The longest a request waits for DNS.
    pub dns_timeout: Duration,
    /// DNS lookups in flight at once, at most.
    pub dns_max_inflight: usize,
    /// What a spoofed claim gets.
    pub spoofed: Spoofed,
    /// The verdict's header to the upstream.
    pub header: HeaderName,
    /// `(operator, list) → source` replacing official URLs.
    pub ranges: Vec<(String, String, String)>,
    /// Web Bot Auth signatures verified.
    pub signatures: bool,
    /// Agents (`host` or `host:port`, lower case) whose directories may be
    /// fetched beyond the operators' (`rules/crawlers.toml`); `None`: any
    /// https agent on a public address.
    pub signature_agents: Option<Vec<String>>,
    /// The longest a request waits for an agent's key directory.
    pub directory_timeout: Duration,
    /// Extra root certificates for the lists' and directories' fetches.
    pub ca_file: Option<PathBuf>,
}

/// `[verify]`: on unless `enabled = false`.
pub(super) fn verify_config(raw: RawVerify) -> Result<Option<VerifyConfig>, ConfigError> {
    let RawVerify {
        enabled,
        refresh,
        state_dir,
        dns,
        resolver,
        dns_timeout,
        dns_max_inflight,
        spoofed,
        header,
        ranges,
        signatures,
        signature_agents,
        directory_timeout,
        ca_file,
    } = raw;
    let refresh = duration("verify.refresh", refresh, "12h")?;
    if refresh < Duration::from_secs(1) || refresh > Duration::from_secs(30 * 86_400) {
        return Err(invalid("verify.refresh", "must be between 1s and 30 days"));
    }
    let dns_timeout = duration("verify.dns_timeout", dns_timeout, "200ms")?;
    if dns_timeout > Duration::from_secs(5) {
        return Err(invalid(
            "verify.dns_timeout",
            "must be at most 5s: a request waits this long at worst",
        ));
    }
    let resolver = match resolver {
        None => None,
        Some(text) => Some(
            text.parse::<SocketAddr>()
                .or_else(|_| {
                    text.parse::<std::net::IpAddr>()
                        .map(|ip| SocketAddr::new(ip, 53))
                })
                .map_err(|_| {
                    invalid(
                        "verify.resolver",
                        format!("{text:?} is not an address like 127.0.0.1 or 127.0.0.1:5353"),
                    )
                })?,
        ),
    };
    let dns_max_inflight = match dns_max_inflight.unwrap_or(64) {
        0 => {
            return Err(invalid(
                "verify.dns_max_inflight",
                "must be greater than zero",
            ))
        }
        n => n as usize,
    };
    let spoofed = match spoofed.as_deref().unwrap_or("log") {
        "log" => Spoofed::Log,
        "block" => Spoofed::Block,
        other => {
            return Err(invalid(
                "verify.spoofed",
                format!("{other:?} is not \"log\" or \"block\""),
            ))
        }
    };
    let header = header.unwrap_or_else(|| "x-crawler-verified".to_owned());
    let header = HeaderName::from_bytes(header.as_bytes())
        .map_err(|_| invalid("verify.header", format!("{header:?} is not a header name")))?;
    let mut overrides = Vec::new();
    for (operator, lists) in ranges.unwrap_or_default() {
        for (list, source) in lists {
            let source = source.trim().to_owned();
            if source.is_empty() || source.chars().any(char::is_control) {
                return Err(invalid(
                    "verify.ranges",
                    format!("{operator}.{list}: {source:?} is not a path or URL"),
                ));
            }
            let is_url = source.starts_with("http://") || source.starts_with("https://");
            if is_url && source.parse::<Uri>().is_err() {
                return Err(invalid(
                    "verify.ranges",
                    format!("{operator}.{list}: {source:?} is not a URL"),
                ));
            }
            overrides.push((operator.clone(), list, source));
        }
    }
    let directory_timeout = duration("verify.directory_timeout", directory_timeout, "500ms")?;
    if directory_timeout > Duration::from_secs(5) {
        return Err(invalid(
            "verify.directory_timeout",
            "must be at most 5s: a request waits this long at worst",
        ));
    }
    let config = VerifyConfig {
        refresh,
        state_dir,
        dns: dns.unwrap_or(true),
        resolver,
        dns_timeout,
        dns_max_inflight,
        spoofed,
        header,
        ranges: overrides,
        signatures: signatures.unwrap_or(true),
        signature_agents: match signature_agents {
            None => Some(Vec::new()),
            Some(list) if list.iter().any(|a| a == "*") => None,
            Some(list) => Some(
                list.into_iter()
                    .map(|agent| {
                        let agent = agent.trim().to_ascii_lowercase();
                        let valid = !agent.is_empty()
                            && agent
                                .parse::<http::uri::Authority>()
                                .is_ok_and(|a| a.as_str() == agent && !agent.contains('@'));
                        if valid {
                            Ok(agent)
                        } else {
                            Err(invalid(
                                "verify.signature_agents",
                                format!("{agent:?} is not a host or host:port (or \"*\")"),
                            ))
                        }
                    })
                    .collect::<Result<_, _>>()?,
            ),
        },
        directory_timeout,
        ca_file,
    };
    Ok(enabled.unwrap_or(true).then_some(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::load;

    #[test]
    fn verification_is_on_by_default_and_its_values_are_checked() {
        let on = load("").expect("valid").verify.expect("on by default");
        assert_eq!(on.refresh, Duration::from_secs(12 * 3600));
        assert_eq!(on.dns_timeout, Duration::from_millis(200));
        assert!(on.dns && on.resolver.is_none() && on.state_dir.is_none());
        assert_eq!(
            (on.spoofed, on.header.as_str()),
            (Spoofed::Log, "x-crawler-verified")
        );
        assert!(load("[verify]\nenabled = false")
            .expect("valid")
            .verify
            .is_none());
        let custom = load("[verify]\nresolver = \"127.0.0.1\"\nspoofed = \"block\"\n[verify.ranges.google]\ncommon-crawlers = \"https://lists.example/g.json\"")
            .expect("valid")
            .verify
            .expect("on");
        assert_eq!(custom.resolver, Some("127.0.0.1:53".parse().expect("addr")));
        assert_eq!(custom.spoofed, Spoofed::Block);
        assert_eq!(
            on.signature_agents,
            Some(Vec::new()),
            "the operators' agents only"
        );
        let any = load("[verify]\nsignature_agents = [\"*\"]")
            .expect("valid")
            .verify
            .expect("on");
        assert_eq!(any.signature_agents, None);
        let listed = load("[verify]\nsignature_agents = [\"Agent.example:8443\"]")
            .expect("valid")
            .verify
            .expect("on");
        assert_eq!(
            listed.signature_agents,
            Some(vec!["agent.example:8443".to_owned()])
        );
        assert_eq!(
            custom.ranges,
            [(
                "google".to_owned(),
                "common-crawlers".to_owned(),
                "https://lists.example/g.json".to_owned()
            )]
        );
        for (text, want) in [
            ("refresh = \"0s\"", "verify.refresh: must be greater"),
            ("refresh = \"60d\"", "verify.refresh: must be between"),
            (
                "dns_timeout = \"10s\"",
                "verify.dns_timeout: must be at most 5s",
            ),
            (
                "resolver = \"dns.example\"",
                "verify.resolver: \"dns.example\" is not an address",
            ),
            (
                "dns_max_inflight = 0",
                "verify.dns_max_inflight: must be greater",
            ),
            ("spoofed = \"drop\"", "verify.spoofed: \"drop\" is not"),
            ("header = \"X Verified\"", "verify.header: "),
            (
                "[verify.ranges.google]\ncommon-crawlers = \"\"",
                "verify.ranges: google.common-crawlers: \"\"",
            ),
            ("colour = 1", "verify.colour: unknown field `colour`"),
        ] {
            let err = load(&format!("[verify]\n{text}")).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
