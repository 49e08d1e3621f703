//! Signed requests (Web Bot Auth): HTTP Message Signatures (RFC 9421) that
//! an agent makes with a key published in its key directory.
//!
//! A request is a candidate only when it carries `Signature`,
//! `Signature-Agent` and a `Signature-Input` tagged `web-bot-auth`; a
//! browser never does, so it pays one header lookup. For a candidate, the
//! signature work is the maintained `web-bot-auth` crate's; crawlgate adds
//! what the drafts require of a verifier: the signature must cover
//! `@authority` and `signature-agent`, be within its `created`..`expires`
//! window, and be made with a key of the directory its `Signature-Agent`
//! names. The directory (`/.well-known/http-message-signatures-directory`
//! of that https origin) is fetched only over HTTPS, only on a `200`, with
//! no redirects, and cached per directory URL; keys are looked up in it by
//! their id, so a key of another directory never verifies.
//!
//! Like DNS, a request waits for a directory at most the configured time;
//! the fetch goes on and fills the cache for the agent's next request.

use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderMap;
use http::{Method, Uri};
use web_bot_auth::components::{
    CoveredComponent, DerivedComponent, HTTPField, HTTPFieldParameters,
};
use web_bot_auth::keyring::{JSONWebKeySet, KeyRing};
use web_bot_auth::message_signatures::SignedMessage;
use web_bot_auth::{SignatureAgentLink, WebBotAuthVerifier};

use super::fetch::Fetcher;
use super::flight::Flights;

/// Where an agent's keys are published, below its origin.
pub const DIRECTORY_PATH: &str = "/.well-known/http-message-signatures-directory";
/// How far a `created` time may be in the future (clock skew).
const SKEW_SECS: i64 = 60;
/// How long a fetched directory is used.
const DIRECTORY_TTL: Duration = Duration::from_secs(3600);
/// How long a failed fetch is remembered.
const FAILED_TTL: Duration = Duration::from_secs(60);
/// The largest directory accepted.
const MAX_DIRECTORY_BYTES: usize = 64 << 10;
/// Directories kept.
const CACHE_ENTRIES: usize = 1024;

/// What a signed request's signature says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signed {
    /// Valid, made with a key of the directory at this https origin's
    /// host (lower case).
    Valid {
        /// The agent's host, e.g. `chatgpt.com`.
        agent: String,
    },
    /// Not valid, and why.
    Invalid(&'static str),
    /// The agent's directory could not be had in time: nothing certain.
    Unknown,
}

/// Whether the request carries a Web Bot Auth signature to check: the
/// three headers, the input tagged `web-bot-auth`.
pub fn is_candidate(headers: &HeaderMap) -> bool {
    headers.contains_key("signature-agent")
        && headers.contains_key("signature")
        && headers
            .get_all("signature-input")
            .iter()
            .any(|v| contains_ignore_case(v.as_bytes(), b"web-bot-auth"))
}

fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// A request as the signature's covered components see it.
#[derive(Debug)]
pub struct Request<'a> {
    /// The method.
    pub method: &'a Method,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// The authority the client asked for (target or Host).
    pub authority: &'a str,
    /// The request-target.
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
}

impl SignedMessage for Request<'_> {
    fn lookup_component(&self, component: &CoveredComponent) -> Vec<String> {
        let path = self.uri.path();
        let query = self.uri.query();
        match component {
            CoveredComponent::HTTP(HTTPField { name, parameters }) => {
                let values: Vec<String> = self
                    .headers
                    .get_all(name.as_str())
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .map(|v| v.trim().to_owned())
                    .collect();
                match parameters.0.as_slice() {
                    [] => values,
                    // A member of a dictionary field (`"signature-agent";key="sig1"`).
                    [HTTPFieldParameters::Key(key)] => {
                        dictionary_member(&values, key).into_iter().collect()
                    }
                    // `sf`, `bs`, `req`, `tr`: not needed by Web Bot Auth.
                    _ => Vec::new(),
                }
            }
            CoveredComponent::Derived(derived) => match derived {
                DerivedComponent::Authority { req: false } => {
                    vec![self.authority.to_ascii_lowercase()]
                }
                DerivedComponent::Method { req: false } => vec![self.method.as_str().to_owned()],
                DerivedComponent::Scheme { req: false } => vec![self.scheme.to_owned()],
                DerivedComponent::Path { req: false } => vec![path.to_owned()],
                DerivedComponent::Query { req: false } => {
                    vec![format!("?{}", query.unwrap_or(""))]
                }
                DerivedComponent::RequestTarget { req: false } => {
                    vec![self
                        .uri
                        .path_and_query()
                        .map_or("/", |pq| pq.as_str())
                        .to_owned()]
                }
                DerivedComponent::TargetUri { req: false } => {
                    let pq = self.uri.path_and_query().map_or("/", |pq| pq.as_str());
                    vec![format!(
                        "{}://{}{pq}",
                        self.scheme,
                        self.authority.to_ascii_lowercase()
                    )]
                }
                _ => Vec::new(),
            },
        }
    }
}

/// The serialized value of dictionary member `key` across a field's lines.
fn dictionary_member(values: &[String], key: &str) -> Option<String> {
    let joined = values.join(", ");
    let dict = sfv::Parser::new(&joined).parse_dictionary().ok()?;
    dict.into_iter()
        .find(|(k, _)| k.as_str() == key)
        .and_then(|(_, member)| match member {
            sfv::ListEntry::Item(item) => {
                use sfv::SerializeValue;
                Some(item.serialize_value())
            }
            sfv::ListEntry::InnerList(_) => None,
        })
}

/// The key directories by URL, kept by the process across reloads and
/// shared by every worker's checker.
pub type Directories = Flights<Box<str>, Option<Arc<KeyRing>>>;

/// An empty directory cache: a request waits at most `wait`, with at most
/// `max_inflight` fetches at once.
pub fn directory_cache(wait: Duration, max_inflight: usize) -> Arc<Directories> {
    Arc::new(Flights::new(CACHE_ENTRIES, max_inflight, wait))
}

/// The signature checker of one worker (its own HTTPS client) over the
/// shared directory cache.
#[derive(Clone, Debug)]
pub struct SignatureChecker {
    fetcher: Fetcher,
    directories: Arc<Directories>,
    agents: Arc<Agents>,
}

/// Whose key directories crawlgate fetches: a request names the URL, so
/// this is what keeps a client from making crawlgate fetch from anywhere
/// it likes (an address inside the site's network, say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Agents {
    /// These agents only (`host` or `host:port`, lower case): the crawler
    /// operators' (`signature` in `rules/crawlers.toml`) and the config's.
    Listed(Vec<Box<str>>),
    /// Any https agent whose host is a name or a public address.
    Public,
}

impl Agents {
    /// Whether the directory of the agent at `authority` may be fetched.
    pub fn allow(&self, authority: &http::uri::Authority) -> bool {
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        match self {
            Agents::Listed(agents) => agents.iter().any(|a| {
                a.eq_ignore_ascii_case(authority.as_str()) || a.eq_ignore_ascii_case(host)
            }),
            Agents::Public => match host.parse::<std::net::IpAddr>() {
                Ok(ip) => is_public(ip),
                Err(_) => !host.eq_ignore_ascii_case("localhost") && host.contains('.'),
            },
        }
    }
}

/// Not loopback, private, link-local, unspecified, documentation or
/// otherwise reserved.
fn is_public(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64
                || v4.octets()[0] >= 240)
        }
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public(std::net::IpAddr::V4(v4)),
            None => {
                let first = v6.segments()[0];
                !(v6.is_loopback()
                    || v6.is_unspecified()
                    || (first & 0xfe00) == 0xfc00
                    || (first & 0xffc0) == 0xfe80
                    || first == 0x2001 && v6.segments()[1] == 0x0db8)
            }
        },
    }
}

impl SignatureChecker {
    /// A checker fetching the directories of `agents` with `fetcher` into
    /// `directories` (the process's cache, see [`directory_cache`]).
    pub fn new(fetcher: Fetcher, agents: Agents, directories: Arc<Directories>) -> Self {
        Self {
            fetcher,
            directories,
            agents: Arc::new(agents),
        }
    }

    /// A copy for another worker: its own client, the same cache.
    pub fn for_worker(&self) -> Self {
        Self {
            fetcher: self.fetcher.for_worker(),
            directories: Arc::clone(&self.directories),
            agents: Arc::clone(&self.agents),
        }
    }

    /// Checks the request's signature at Unix time `now`.
    pub async fn check(&self, request: &Request<'_>, now: i64) -> Signed {
        let (verifier, directory, keyid) = match prepare(request, now) {
            Ok(ready) => ready,
            Err(why) => return Signed::Invalid(why),
        };
        let allowed = Uri::try_from(directory.as_ref())
            .ok()
            .and_then(|u| u.authority().cloned())
            .is_some_and(|a| self.agents.allow(&a));
        if !allowed {
            // Not an agent whose keys crawlgate fetches: nothing certain.
            return Signed::Unknown;
        }
        let Some(keyring) = self.directory(&directory).await else {
            return Signed::Unknown;
        };
        // Keys are found by id in the agent's own directory only.
        if keyring.get(&keyid).is_none() {
            return Signed::Invalid("the key is not in the agent's directory");
        }
        match verifier.verify(&keyring, Some(keyid)) {
            Ok(_) => Signed::Valid {
                agent: Uri::try_from(directory.as_ref())
                    .ok()
                    .and_then(|u| u.host().map(str::to_ascii_lowercase))
                    .unwrap_or_default(),
            },
            Err(_) => Signed::Invalid("the signature does not verify"),
        }
    }

    /// The keys of the directory at `url`: cached, or fetched, waiting at
    /// most the configured time.
    async fn directory(&self, url: &str) -> Option<Arc<KeyRing>> {
        let fetcher = self.fetcher.clone();
        let owned: Box<str> = url.into();
        let target = owned.clone();
        let fetch = || async move {
            let keys = fetch_directory(&fetcher, &target).await;
            let ttl = if keys.is_some() {
                DIRECTORY_TTL
            } else {
                FAILED_TTL
            };
            (keys, ttl)
        };
        self.directories.get(&owned, fetch).await.flatten()
    }
}

/// Everything that needs no network: the signature parsed, its covered
/// components and time window checked, its agent's directory URL and key
/// id found.
fn prepare(
    request: &Request<'_>,
    now: i64,
) -> Result<(WebBotAuthVerifier, Box<str>, String), &'static str> {
    let verifier = WebBotAuthVerifier::parse(request).map_err(|_| {
        "no usable web-bot-auth signature (tag, keyid, created, expires and covered components)"
    })?;
    let label = verifier.get_parsed_label();
    let components = &label.base.components;
    let covers_authority = components.keys().any(|c| {
        matches!(
            c,
            CoveredComponent::Derived(DerivedComponent::Authority { req: false })
        )
    });
    let covers_agent = components.keys().any(|c| {
        matches!(c, CoveredComponent::HTTP(HTTPField { name, .. }) if name == "signature-agent")
    });
    if !(covers_authority && covers_agent) {
        return Err("the signature does not cover @authority and signature-agent");
    }
    let details = &label.base.parameters.details;
    let (Some(created), Some(expires)) = (details.created, details.expires) else {
        return Err("no created or expires");
    };
    if created > now + SKEW_SECS {
        return Err("the signature is not valid yet");
    }
    if expires < now {
        return Err("the signature has expired");
    }
    let keyid = details.keyid.clone().ok_or("no keyid")?;
    let directory = verifier
        .get_signature_agents()
        .iter()
        .find_map(|agent| match agent {
            SignatureAgentLink::External(url) => directory_url(url),
            // A key carried by the request itself proves nothing.
            SignatureAgentLink::Inline(_) => None,
        })
        .ok_or("the Signature-Agent is not an https URL")?;
    Ok((verifier, directory, keyid))
}

/// The directory URL of an agent URL: its https origin's well-known path
/// (an agent URL that already names it is taken as it is).
pub fn directory_url(agent: &str) -> Option<Box<str>> {
    let uri: Uri = agent.parse().ok()?;
    if uri.scheme_str() != Some("https") {
        return None;
    }
    let authority = uri.authority()?;
    if authority.as_str().contains('@') {
        return None;
    }
    Some(format!("https://{authority}{DIRECTORY_PATH}").into())
}

/// Fetches and reads a key directory (`{"keys": [JWK, …]}`); `None` when
/// it cannot be had or holds no usable key.
async fn fetch_directory(fetcher: &Fetcher, url: &str) -> Option<Arc<KeyRing>> {
    let body = match fetcher.get_exact(url, MAX_DIRECTORY_BYTES).await {
        Ok(body) => body,
        Err(e) => {
            tracing::debug!(directory = url, error = %e, "verify: key directory not fetched");
            return None;
        }
    };
    let jwks: JSONWebKeySet = serde_json::from_slice(&body).ok()?;
    let mut keyring = KeyRing::default();
    let _ = keyring.import_jwks(jwks);
    Some(Arc::new(keyring))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_carry_all_three_headers_and_the_tag() {
        let signed = crate::testing::header_map(&[
            ("signature", "sig1=:AAAA:"),
            (
                "signature-input",
                "sig1=(\"@authority\");tag=\"web-bot-auth\"",
            ),
            ("signature-agent", "\"https://agent.example\""),
        ]);
        assert!(is_candidate(&signed));
        for missing in ["signature", "signature-input", "signature-agent"] {
            let mut headers = signed.clone();
            headers.remove(missing);
            assert!(!is_candidate(&headers), "{missing}");
        }
        let mut other_tag = signed.clone();
        other_tag.insert(
            "signature-input",
            http::HeaderValue::from_static("sig1=(\"@authority\");tag=\"other\""),
        );
        assert!(!is_candidate(&other_tag));
        assert!(!is_candidate(&HeaderMap::new()));
    }

    #[test]
    fn only_listed_or_public_agents_are_fetched() {
        let authority = |a: &str| a.parse::<http::uri::Authority>().expect("authority");
        let listed = Agents::Listed(vec!["chatgpt.com".into(), "127.0.0.1:8443".into()]);
        assert!(listed.allow(&authority("chatgpt.com")));
        assert!(listed.allow(&authority("ChatGPT.com:443")));
        assert!(listed.allow(&authority("127.0.0.1:8443")));
        assert!(!listed.allow(&authority("127.0.0.1:9443")));
        assert!(!listed.allow(&authority("agent.example")));
        let public = Agents::Public;
        for ok in ["agent.example", "203.0.114.7", "[2a00:1450::1]"] {
            assert!(public.allow(&authority(ok)), "{ok}");
        }
        for refused in [
            "localhost",
            "intranet",
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "[::1]",
            "[fd00::1]",
            "[fe80::1]",
            "[::ffff:10.0.0.1]",
        ] {
            assert!(!public.allow(&authority(refused)), "{refused}");
        }
    }

    #[test]
    fn directories_are_https_origins_only() {
        let cases = [
            (
                "https://chatgpt.com",
                Some("https://chatgpt.com/.well-known/http-message-signatures-directory"),
            ),
            (
                "https://agent.example:8443/bot",
                Some("https://agent.example:8443/.well-known/http-message-signatures-directory"),
            ),
            ("http://agent.example", None),
            ("https://user@agent.example", None),
            ("agent.example", None),
        ];
        for (agent, want) in cases {
            assert_eq!(directory_url(agent).as_deref(), want, "{agent}");
        }
    }
}
