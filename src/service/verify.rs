//! Crawler verification as a request meets it: a Web Bot Auth signature,
//! then the operator a robot's User-Agent claims, checked by its IP ranges
//! and, when they cannot tell, by reverse DNS; counted per operator, and a
//! spoofed claim logged (rate-limited). The verdicts themselves are
//! [`crate::verify`]'s.

use std::net::IpAddr;
use std::sync::Arc;

use crate::config::AiKind;
use crate::logging::LogLimiter;
use crate::state::Worker;
use crate::verify::signature::{self, SignatureChecker, Signed};
use crate::verify::store::RangeStore;
use crate::verify::{by_dns, by_ranges, Claim, DnsAnswer, Identity, Operators, Step};

/// Whether [`verify_request`] has anything to do: a signature to check
/// (signatures on, and the request carries one) or a robot's claim. When
/// not, it would say `(None, None)`, and its future (several KiB, copied
/// into place when made) is not made at all: a browser's request pays
/// nothing for verification.
pub(super) fn asks_verification(
    worker: &Worker,
    headers: &http::HeaderMap,
    robot: Option<&[u8]>,
) -> bool {
    robot.is_some() || signature_to_check(worker, headers).is_some()
}

/// The worker's signature checker, when signatures are on and `headers`
/// carry one to check.
fn signature_to_check<'w>(
    worker: &'w Worker,
    headers: &http::HeaderMap,
) -> Option<&'w SignatureChecker> {
    worker
        .signatures
        .as_ref()
        .filter(|_| signature::is_candidate(headers))
}

/// What verification says of a request: its Web Bot Auth signature, when
/// it carries one (a browser never does), then the crawler claim of a
/// robot's User-Agent `robot`; and the kind of AI crawler it claims to be.
/// A valid signature verifies the request when it claims no operator or
/// the operator it claims lists the signing agent; an invalid one makes
/// it spoofed; a directory not had in time settles nothing.
pub(super) async fn verify_request(
    store: &RangeStore,
    worker: &Worker,
    request: &signature::Request<'_>,
    robot: Option<&[u8]>,
    client: &(dyn Fn() -> IpAddr + Sync),
) -> (Option<Identity>, Option<AiKind>) {
    if let Some(checker) = signature_to_check(worker, request.headers) {
        let now = crate::clock::unix_now();
        let signed = checker.check(request, now).await;
        let set = store.current();
        let claim = robot.and_then(|ua| set.operators.claim(ua));
        match signed {
            Signed::Valid { agent } => {
                let signer = set.operators.operator_of_agent(&agent);
                match claim {
                    Some(c) if Some(c.operator) != signer => {
                        // Signed by somebody else than the operator it
                        // names: the claim is judged on its own.
                    }
                    _ => {
                        let identity = Identity::Verified(crate::verify::Method::Signature);
                        set.count(signer, identity);
                        return (Some(identity), claim.and_then(|c| c.ai));
                    }
                }
            }
            Signed::Invalid(why) => {
                set.count(claim.map(|c| c.operator), Identity::Spoofed);
                if let Some(suppressed) = SPOOFED.admit() {
                    tracing::warn!(
                        client = %client(),
                        why,
                        suppressed,
                        "spoofed crawler: a Web Bot Auth signature that does not verify",
                    );
                }
                // The AI kind its User-Agent claims still counts: a
                // refused kind is refused whoever claims it.
                return (Some(Identity::Spoofed), claim.and_then(|c| c.ai));
            }
            Signed::Unknown => {}
        }
    }
    match robot {
        Some(ua) => match verify_claim(store, worker, ua, client).await {
            Some((identity, ai)) => (Some(identity), ai),
            None => (None, None),
        },
        None => (None, None),
    }
}

/// What verification says of a robot's User-Agent `ua` from `client` (the
/// address, asked only once the User-Agent claims an operator), and the
/// kind of AI crawler it claims to be: `None` when it claims no operator.
/// Counted per operator and result; a spoofed claim is logged
/// (rate-limited).
async fn verify_claim(
    store: &RangeStore,
    worker: &Worker,
    ua: &[u8],
    client: &(dyn Fn() -> IpAddr + Sync),
) -> Option<(Identity, Option<AiKind>)> {
    let (step, operators, claim, client) = {
        let set = store.current();
        let claim = set.operators.claim(ua)?;
        let client = client();
        let found = set.table.lookup(client);
        let step = by_ranges(&claim, found, set.loaded, worker.dns.is_some());
        match step {
            Step::Done(identity) => {
                set.count(Some(claim.operator), identity);
                if identity == Identity::Spoofed {
                    log_spoofed(&set.operators, claim, ua, client, "ip ranges");
                }
                return Some((identity, claim.ai));
            }
            // Kept past the await: the set's operators, not the guard.
            Step::AskDns => (step, Arc::clone(&set.operators), claim, client),
        }
    };
    debug_assert_eq!(step, Step::AskDns);
    let answer = match &worker.dns {
        Some(dns) => dns.check(client).await,
        None => DnsAnswer::Failed,
    };
    let identity = by_dns(&answer, &operators.operators[claim.operator].dns);
    store.current().count(Some(claim.operator), identity);
    if identity == Identity::Spoofed {
        log_spoofed(&operators, claim, ua, client, "reverse DNS");
    }
    Some((identity, claim.ai))
}

static SPOOFED: LogLimiter = LogLimiter::new(5);

fn log_spoofed(operators: &Operators, claim: Claim, ua: &[u8], client: IpAddr, method: &str) {
    if let Some(suppressed) = SPOOFED.admit() {
        tracing::warn!(
            client = %client,
            operator = &*operators.operators[claim.operator].name,
            claims = operators.claimed_token(ua).unwrap_or("?"),
            by = method,
            suppressed,
            "spoofed crawler: the User-Agent claims an operator whose own method says otherwise",
        );
    }
}
