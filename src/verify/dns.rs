//! Reverse then forward DNS for a client address, bounded in time and in
//! concurrency, cached per address for the records' TTL.
//!
//! A request waits at most `dns_timeout` for an answer; the lookup itself
//! goes on in its own task and fills the cache, so the crawler's next
//! request is settled at once. Concurrent requests from one address share
//! one lookup; past `dns_max_inflight` lookups a request proceeds
//! unverified without starting another. What the answer means for a claim
//! is [`super::by_dns`]'s business: this module only asks.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::flight::Flights;
use super::DnsAnswer;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{Name, RData};
use hickory_resolver::TokioResolver;

/// How long an answer is kept at least and at most, whatever the TTL.
const MIN_TTL: Duration = Duration::from_secs(30);
const MAX_TTL: Duration = Duration::from_secs(86_400);
/// How long a failure (timeout, server failure) is remembered: a short
/// while, so that a flood from one address does not flood the resolver.
const FAILED_TTL: Duration = Duration::from_secs(10);
/// The longest one lookup (reverse and forward) runs in the background.
const LOOKUP_DEADLINE: Duration = Duration::from_secs(5);
/// Addresses whose answers are kept.
const CACHE_ENTRIES: usize = 65_536;

/// The answers by address, kept by the process across reloads and shared
/// by every worker's checker.
pub type Answers = Flights<IpAddr, DnsAnswer>;

/// An empty answer cache for `setup` (its wait and its bound on lookups).
pub fn answer_cache(setup: &DnsSetup) -> Arc<Answers> {
    Arc::new(Flights::new(CACHE_ENTRIES, setup.max_inflight, setup.wait))
}

/// The DNS checker of one worker (each has its own resolver, whose
/// sockets live on that worker's event loop) over the shared cache.
#[derive(Clone)]
pub struct DnsChecker {
    resolver: TokioResolver,
    answers: Arc<Answers>,
    setup: DnsSetup,
}

impl std::fmt::Debug for DnsChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsChecker")
            .field("setup", &self.setup)
            .finish_non_exhaustive()
    }
}

/// How to build the resolver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsSetup {
    /// The server; `None`: the system's (`/etc/resolv.conf`).
    pub server: Option<SocketAddr>,
    /// The longest a request waits.
    pub wait: Duration,
    /// Lookups in flight at once, at most.
    pub max_inflight: usize,
}

/// The resolver cannot be set up.
#[derive(Debug, thiserror::Error)]
#[error("verify.resolver: {0}")]
pub struct DnsSetupError(String);

impl DnsChecker {
    /// A checker over `answers` (the process's cache, see
    /// [`answer_cache`]).
    pub fn new(setup: DnsSetup, answers: Arc<Answers>) -> Result<Self, DnsSetupError> {
        Ok(Self {
            resolver: resolver(&setup)?,
            answers,
            setup,
        })
    }

    /// Whether `other` has this one's settings and cache (a worker that
    /// had it keeps its resolver).
    pub fn same_as(&self, other: &Self) -> bool {
        self.setup == other.setup && Arc::ptr_eq(&self.answers, &other.answers)
    }

    /// A copy for another worker: its own resolver, the same cache.
    pub fn for_worker(&self) -> Result<Self, DnsSetupError> {
        Ok(Self {
            resolver: resolver(&self.setup)?,
            answers: Arc::clone(&self.answers),
            setup: self.setup.clone(),
        })
    }

    /// The answer for `ip`: cached, or looked up, waiting at most the
    /// configured time (then [`DnsAnswer::Failed`], while the lookup goes
    /// on and fills the cache).
    pub async fn check(&self, ip: IpAddr) -> DnsAnswer {
        let resolver = self.resolver.clone();
        let looked_up = || async move {
            tokio::time::timeout(LOOKUP_DEADLINE, lookup(&resolver, ip))
                .await
                .unwrap_or((DnsAnswer::Failed, FAILED_TTL))
        };
        self.answers
            .get(&ip, looked_up)
            .await
            .unwrap_or(DnsAnswer::Failed)
    }
}

fn resolver(setup: &DnsSetup) -> Result<TokioResolver, DnsSetupError> {
    let provider = TokioRuntimeProvider::default();
    let mut builder = match setup.server {
        Some(server) => {
            let mut udp = ConnectionConfig::udp();
            udp.port = server.port();
            let mut tcp = ConnectionConfig::tcp();
            tcp.port = server.port();
            let ns = NameServerConfig::new(server.ip(), true, vec![udp, tcp]);
            TokioResolver::builder_with_config(
                ResolverConfig::from_parts(None, Vec::new(), vec![ns]),
                provider,
            )
        }
        None => TokioResolver::builder(provider)
            .map_err(|e| DnsSetupError(format!("the system's resolver configuration: {e}")))?,
    };
    let options: &mut ResolverOpts = builder.options_mut();
    // One try per server within the background deadline; answers are
    // cached here, per address, so the resolver's own cache stays small.
    options.timeout = Duration::from_secs(2);
    options.attempts = 1;
    options.cache_size = 1024;
    options.use_hosts_file = hickory_resolver::config::ResolveHosts::Never;
    builder.build().map_err(|e| DnsSetupError(e.to_string()))
}

/// PTR of `ip`, then the forward records of that name (A for IPv4, AAAA
/// for IPv6): the answer and how long it holds.
async fn lookup(resolver: &TokioResolver, ip: IpAddr) -> (DnsAnswer, Duration) {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let reverse = match resolver.reverse_lookup(Name::from(ip)).await {
        Ok(found) => found,
        Err(e) if e.is_no_records_found() || e.is_nx_domain() => {
            return (DnsAnswer::NoName, ttl_between(None));
        }
        Err(_) => return (DnsAnswer::Failed, FAILED_TTL),
    };
    let ptr = reverse.answers().iter().find_map(|r| match &r.data {
        RData::PTR(ptr) => Some((ptr.0.clone(), r.ttl)),
        _ => None,
    });
    let Some((name, ptr_ttl)) = ptr else {
        return (DnsAnswer::NoName, ttl_between(None));
    };
    let text = name.to_ascii();
    let looked_up = match ip {
        IpAddr::V4(_) => resolver.ipv4_lookup(name).await,
        IpAddr::V6(_) => resolver.ipv6_lookup(name).await,
    };
    let forward = looked_up.map(|l| {
        let ttl = l.answers().iter().map(|r| r.ttl).min();
        let back = l.answers().iter().any(|r| match (&r.data, ip) {
            (RData::A(a), IpAddr::V4(v4)) => a.0 == v4,
            (RData::AAAA(a), IpAddr::V6(v6)) => a.0 == v6,
            _ => false,
        });
        (back, ttl)
    });
    let (resolves_back, forward_ttl) = match forward {
        Ok(found) => found,
        Err(e) if e.is_no_records_found() || e.is_nx_domain() => (false, None),
        Err(_) => return (DnsAnswer::Failed, FAILED_TTL),
    };
    let ttl = forward_ttl.map_or(ptr_ttl, |f| f.min(ptr_ttl));
    (
        DnsAnswer::Name {
            name: text,
            resolves_back,
        },
        ttl_between(Some(ttl)),
    )
}

fn ttl_between(ttl: Option<u32>) -> Duration {
    match ttl {
        Some(s) => Duration::from_secs(u64::from(s)).clamp(MIN_TTL, MAX_TTL),
        // A negative answer: as long as the shortest positive one.
        None => MIN_TTL.max(Duration::from_secs(300)),
    }
}
