//! What the upstream is told of a crawler: a proxy's overrides with an
//! admin port, and the class and verification headers a forwarded request
//! carried.

use super::{forwarded_for, Proxy, Recorded, Upstream};

/// The verdict the upstream was told of a GET of `path` from `client` as
/// `ua`, forwarded with 200.
pub async fn verdict(
    proxy: &Proxy,
    upstream: &Upstream,
    client: &str,
    ua: &str,
    path: &str,
) -> Option<String> {
    let (res, seen) = forwarded_for(proxy, upstream, client, ua, path, "").await;
    assert_eq!(res.status, 200, "{client} {ua} {path}");
    told(&seen).1
}

/// The upstream's view of one request: (class header, verified header).
pub fn told(seen: &Option<Recorded>) -> (Option<String>, Option<String>) {
    let seen = seen.as_ref().expect("forwarded");
    (
        seen.header("x-crawler-class").map(str::to_owned),
        seen.header("x-crawler-verified").map(str::to_owned),
    )
}
