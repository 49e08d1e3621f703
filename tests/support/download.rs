//! A download held in flight across a signal: opened and read in part,
//! then read to its end, with the byte count and digest to check it came
//! whole (or was cut) from the upstream's `/download` route.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use sha2::{Digest, Sha256};

use super::FIREFOX;

/// Opens a download of `size` bytes and reads its first `first` bytes;
/// the rest stays in flight.
pub async fn start_download(addr: SocketAddr, size: u64, first: u64) -> (Incoming, Sha256, u64) {
    let mut sender = super::h1_client(addr).await;
    let req = http::Request::get(format!("/download?bytes={size}"))
        .header("host", "example.test")
        .header("user-agent", FIREFOX)
        .body(http_body_util::Empty::<Bytes>::new())
        .expect("request");
    let res = sender.send_request(req).await.expect("response");
    assert_eq!(res.status(), 200);
    let mut body = res.into_body();
    let mut hasher = Sha256::new();
    let mut seen = 0u64;
    while seen < first {
        let frame = body.frame().await.expect("more body").expect("frame");
        if let Ok(data) = frame.into_data() {
            seen += data.len() as u64;
            hasher.update(&data);
        }
    }
    (body, hasher, seen)
}

/// Reads the rest of a download; the total and the digest.
pub async fn finish_download(
    mut body: Incoming,
    mut hasher: Sha256,
    mut seen: u64,
) -> (u64, String) {
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        if let Ok(data) = frame.into_data() {
            seen += data.len() as u64;
            hasher.update(&data);
        }
    }
    (seen, super::hex(&hasher.finalize()))
}
