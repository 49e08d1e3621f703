//! The upstream connections of crawlgate's own layer against a scripted
//! upstream on loopback: what reaches it, what comes back, and which
//! connections are kept.

use std::time::Duration;

use http::header::CONTENT_LENGTH;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::proxy::body::{BodyState, FedBody, RequestBody};
use crate::proxy::socket::Socket;

async fn upstream(max_idle: usize) -> (TcpListener, Arc<Pool>) {
    upstream_idle(max_idle, Duration::from_secs(30)).await
}

async fn upstream_idle(max_idle: usize, idle_timeout: Duration) -> (TcpListener, Arc<Pool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let authority: http::uri::Authority = addr.to_string().parse().expect("authority");
    let settings = PoolSettings {
        idle_timeout,
        max_idle,
    };
    let pool = Pool::new(&authority, None, Duration::from_secs(5), settings).expect("pool");
    (listener, Arc::new(pool))
}

fn get(path: &'static str) -> impl Fn(&mut Vec<u8>) + Copy {
    move |out: &mut Vec<u8>| {
        out.extend_from_slice(format!("GET {path} HTTP/1.1\r\nhost: up\r\n\r\n").as_bytes());
    }
}

/// Reads one request head (and nothing past it, byte by byte).
async fn read_head_of(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = stream.read_u8().await.expect("request head");
        head.push(byte);
    }
    String::from_utf8(head).expect("ascii")
}

/// Accepts a connection, reads a request head on it and writes `bytes`.
async fn answer(listener: &TcpListener, bytes: &[u8]) -> TcpStream {
    let (mut s, _) = listener.accept().await.expect("accept");
    read_head_of(&mut s).await;
    s.write_all(bytes).await.expect("answer");
    s
}

async fn body_of(res: Response<NativeBody>) -> Result<Vec<u8>, BodyError> {
    Ok(res.into_body().collect().await?.to_bytes().to_vec())
}

/// Whether a connection waits to be accepted, without waiting.
fn pending_connection(listener: TcpListener) -> bool {
    let listener = listener.into_std().expect("std");
    listener.accept().is_ok()
}

/// One connection carries a length-framed answer, then a chunked one,
/// then one with both a coding and a length (a smuggling shape): only the
/// last is not kept.
#[tokio::test]
async fn a_connection_is_kept_until_an_answer_is_framed_both_ways() {
    let (listener, pool) = upstream(4).await;
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        let mut heads = Vec::new();
        for answer in [
            &b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-site: one\r\n\r\nhello"[..],
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nt: 1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 99\r\n\r\n1\r\nx\r\n0\r\n\r\n",
        ] {
            heads.push(read_head_of(&mut s).await);
            s.write_all(answer).await.expect("answer");
        }
        (listener, heads)
    });
    let res = pool
        .send(false, get("/1"), None, Sending::None, false, None)
        .await
        .expect("first");
    assert_eq!(res.headers()["x-site"], "one");
    assert_eq!(body_of(res).await.expect("body"), b"hello");
    assert_eq!(pool.idle_count(), 1);
    let res = pool
        .send(false, get("/2"), None, Sending::None, false, None)
        .await
        .expect("second");
    assert_eq!(body_of(res).await.expect("body"), b"abcde");
    assert_eq!(pool.idle_count(), 1);
    let res = pool
        .send(false, get("/3"), None, Sending::None, false, None)
        .await
        .expect("third");
    // A length beside chunks is not passed on, and not trusted again.
    assert!(!res.headers().contains_key(CONTENT_LENGTH));
    assert_eq!(body_of(res).await.expect("body"), b"x");
    assert_eq!(pool.idle_count(), 0);
    let (listener, heads) = server.await.expect("server");
    assert!(heads[1].starts_with("GET /2 HTTP/1.1\r\n"), "{heads:?}");
    assert!(
        !pending_connection(listener),
        "a second connection was made"
    );
}

/// An interim `100` is skipped; a body without a length is read to the
/// close, and that connection is not kept.
#[tokio::test]
async fn an_interim_answer_is_skipped_and_a_body_read_to_the_close() {
    let (listener, pool) = upstream(4).await;
    tokio::spawn(async move {
        let _closed_when_done = answer(
            &listener,
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\nto the end",
        )
        .await;
    });
    let res = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect("answer");
    assert_eq!(res.status(), 200);
    assert_eq!(body_of(res).await.expect("body"), b"to the end");
    assert_eq!(pool.idle_count(), 0);
}

/// A connection the upstream closed without answering, pooled or new, is
/// a stale failure (the retry's case); one closed mid-answer is not.
#[tokio::test]
async fn a_reused_connection_closed_unanswered_is_stale() {
    let (listener, pool) = upstream(4).await;
    tokio::spawn(async move {
        let mut s = answer(&listener, b"HTTP/1.1 204 No Content\r\n\r\n").await;
        read_head_of(&mut s).await;
        drop(s);
        let (mut s, _) = listener.accept().await.expect("accept");
        read_head_of(&mut s).await;
        drop(s);
        let (mut s, _) = listener.accept().await.expect("accept");
        read_head_of(&mut s).await;
        s.write_all(b"HTTP/1.1 200")
            .await
            .expect("part of an answer");
    });
    let res = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect("first");
    assert_eq!(res.status(), 204);
    assert_eq!(pool.idle_count(), 1);
    let failure = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect_err("closed");
    assert!(failure.stale && !failure.connect, "{failure:?}");
    let failure = pool
        .send(true, get("/"), None, Sending::None, false, None)
        .await
        .expect_err("closed");
    assert!(failure.stale, "{failure:?}");
    assert!(failure.error.is::<ClosedEarly>(), "{failure:?}");
    let failure = pool
        .send(true, get("/"), None, Sending::None, false, None)
        .await
        .expect_err("cut");
    assert!(!failure.stale, "{failure:?}");
}

/// A pooled connection the upstream has closed since is seen as closed
/// and dropped at checkout.
#[tokio::test]
async fn a_pooled_connection_closed_since_is_not_taken() {
    let (listener, pool) = upstream(4).await;
    let (closed_tx, closed) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let s = answer(&listener, b"HTTP/1.1 204 No Content\r\n\r\n").await;
        drop(s);
        let _ = closed_tx.send(());
    });
    let res = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect("first");
    assert_eq!(res.status(), 204);
    closed.await.expect("closed");
    // The close reaches the socket's readiness when tokio's driver turns.
    let mut seen = false;
    for _ in 0..500 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let idle = pool.idle();
        // Seen closed, or already closed by the sweep that looks.
        if idle.conns.back().is_none_or(|i| !i.conn.is_open()) {
            seen = true;
            break;
        }
    }
    assert!(seen, "the closed connection still looks open");
    assert!(pool.checkout().is_none());
    assert_eq!(pool.idle_count(), 0);
}

/// Idle connections are closed without the pool being used again: one
/// the upstream closed at the next sweep, the others once idle for the
/// pool's idle timeout (on tokio's paused clock); then the sweep stops.
#[tokio::test]
async fn idle_connections_are_swept() {
    let idle_timeout = Duration::from_secs(10);
    let (listener, pool) = upstream_idle(4, idle_timeout).await;
    let (read_tx, read) = tokio::sync::oneshot::channel::<()>();
    let (closed_tx, closed) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(async move {
        let kept = answer(&listener, b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na").await;
        let gone = answer(&listener, b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nb").await;
        let _ = read.await;
        // The upstream's own keep-alive timeout.
        drop(gone);
        let _ = closed_tx.send(());
        kept
    });
    // Two exchanges at once, on two connections.
    let first = pool
        .send(false, get("/1"), None, Sending::None, false, None)
        .await
        .expect("first");
    let second = pool
        .send(false, get("/2"), None, Sending::None, false, None)
        .await
        .expect("second");
    assert_eq!(body_of(first).await.expect("body"), b"a");
    assert_eq!(body_of(second).await.expect("body"), b"b");
    assert_eq!(pool.idle_count(), 2);
    read_tx.send(()).expect("server");
    closed.await.expect("closed");

    tokio::time::pause();
    let start = Instant::now();
    while pool.idle_count() == 2 && start.elapsed() < idle_timeout / 2 {
        tokio::time::sleep(SWEEP_EVERY).await;
    }
    assert_eq!(pool.idle_count(), 1, "the closed one is swept first");
    let left = pool.idle().conns[0]
        .conn
        .stream
        .tcp()
        .local_addr()
        .expect("addr");
    tokio::time::sleep(idle_timeout).await;
    assert_eq!(pool.idle_count(), 0, "idle for the timeout");
    assert!(!pool.idle().sweeping);
    let mut kept = server.await.expect("server");
    assert_eq!(
        kept.peer_addr().expect("peer"),
        left,
        "the open one was kept"
    );
    let mut rest = Vec::new();
    kept.read_to_end(&mut rest)
        .await
        .expect("closed by the sweep");
    assert!(rest.is_empty());
}

/// A large body is read in pieces that grow past the first read's size
/// (but not past [`ReadSize::MAX`]), and comes whole and in order.
#[tokio::test]
async fn a_large_body_is_read_in_growing_pieces() {
    const LEN: usize = 4 << 20;
    let (listener, pool) = upstream(4).await;
    let pattern: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    let expected = pattern.clone();
    let (buffered_tx, buffered) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut s = answer(
            &listener,
            format!("HTTP/1.1 200 OK\r\ncontent-length: {LEN}\r\n\r\n").as_bytes(),
        )
        .await;
        // Enough waits in the socket for reads that fill their room.
        s.write_all(&pattern[..96 << 10]).await.expect("first part");
        let _ = buffered_tx.send(());
        s.write_all(&pattern[96 << 10..]).await.expect("rest");
        s
    });
    let res = pool
        .send(false, get("/big"), None, Sending::None, false, None)
        .await
        .expect("answer");
    buffered.await.expect("buffered");
    let mut body = res.into_body();
    let mut got = Vec::with_capacity(LEN);
    let mut largest = 0;
    while let Some(frame) = body.frame().await {
        let data = frame.expect("frame").into_data().expect("data");
        largest = largest.max(data.len());
        got.extend_from_slice(&data);
    }
    assert!(got == expected, "the body differs");
    assert!(largest > READ_BUF, "pieces stayed at {largest} bytes");
    assert!(largest <= ReadSize::MAX, "a piece of {largest} bytes");
    assert_eq!(pool.idle_count(), 1);
}

/// A `101` hands the connection over, with the bytes that came past its
/// head, and it is not pooled.
#[tokio::test]
async fn a_switch_hands_the_connection_over() {
    let (listener, pool) = upstream(4).await;
    let server = tokio::spawn(async move {
        let mut s = answer(
            &listener,
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nfirst",
        )
        .await;
        let mut got = [0u8; 4];
        s.read_exact(&mut got).await.expect("tunnelled bytes");
        got
    });
    let head = |out: &mut Vec<u8>| {
        out.extend_from_slice(
            b"GET /chat HTTP/1.1\r\nhost: up\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n",
        );
    };
    let mut res = pool
        .send(false, head, None, Sending::None, false, None)
        .await
        .expect("101");
    assert_eq!(res.status(), 101);
    assert_eq!(res.headers()["upgrade"], "websocket");
    let switched = res
        .extensions_mut()
        .remove::<Switched>()
        .expect("handed over");
    let mut own = switched.take().expect("once");
    assert!(switched.take().is_none());
    let mut prefix = [0u8; 5];
    own.read_exact(&mut prefix).await.expect("prefix");
    assert_eq!(&prefix, b"first");
    own.write_all(b"ping").await.expect("write");
    assert_eq!(&server.await.expect("server"), b"ping");
    assert_eq!(body_of(res).await.expect("no body"), b"");
    assert_eq!(pool.idle_count(), 0);
}

/// A body that a broken upstream sends after a `304` that announced a
/// length, once the connection is back in the pool (and before tokio's
/// driver has seen it), is not read as the next request's answer: that
/// request goes on a new connection.
#[tokio::test]
async fn late_bytes_after_a_304_are_not_taken_for_the_next_answer() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let authority: http::uri::Authority = addr.to_string().parse().expect("authority");
    let settings = PoolSettings {
        idle_timeout: Duration::from_secs(30),
        max_idle: 4,
    };
    let pool =
        Arc::new(Pool::new(&authority, None, Duration::from_secs(5), settings).expect("pool"));
    let (go_tx, go) = std::sync::mpsc::channel::<()>();
    let (sent_tx, sent) = std::sync::mpsc::channel::<()>();
    // A blocking upstream on a thread of its own: the test's runtime
    // does not turn between the late bytes and the next checkout.
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let head = |s: &mut std::net::TcpStream| {
            let mut head = Vec::new();
            let mut byte = [0u8];
            while !head.ends_with(b"\r\n\r\n") && s.read_exact(&mut byte).is_ok() {
                head.push(byte[0]);
            }
        };
        let (mut first, _) = listener.accept().expect("accept");
        head(&mut first);
        first
            .write_all(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 38\r\n\r\n")
            .expect("304");
        go.recv().expect("go");
        first
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nNO")
            .expect("late bytes");
        sent_tx.send(()).expect("sent");
        let (mut second, _) = listener.accept().expect("a second connection");
        head(&mut second);
        second
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
            .expect("answer");
        std::thread::sleep(Duration::from_secs(1));
        drop(first);
    });
    let res = pool
        .send(false, get("/1"), None, Sending::None, false, None)
        .await
        .expect("304");
    assert_eq!(res.status(), 304);
    assert_eq!(body_of(res).await.expect("no body"), b"");
    assert_eq!(pool.idle_count(), 1);
    go_tx.send(()).expect("upstream");
    // Blocks this runtime's only thread until the late bytes are sent.
    sent.recv().expect("late bytes sent");
    let res = pool
        .send(false, get("/2"), None, Sending::None, false, None)
        .await
        .expect("second");
    assert_eq!(body_of(res).await.expect("body"), b"OK");
}

/// An interim answer whose framing fields are faulty is skipped, and the
/// connection is not trusted with another request after the final one.
#[tokio::test]
async fn a_faulty_interim_answer_leaves_the_connection_untrusted() {
    let (listener, pool) = upstream(4).await;
    tokio::spawn(async move {
        let _held = answer(
            &listener,
            b"HTTP/1.1 100 Continue\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        )
        .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let res = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect("answer");
    assert_eq!(res.status(), 200);
    assert_eq!(body_of(res).await.expect("body"), b"ok");
    assert_eq!(pool.idle_count(), 0);
}

/// An answer that comes while the request body is still being sent is
/// read at once, and that connection is not kept.
#[tokio::test]
async fn an_answer_before_the_whole_body_is_read_and_not_kept() {
    let (listener, pool) = upstream(4).await;
    tokio::spawn(async move {
        let _held = answer(
            &listener,
            b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\n\r\n",
        )
        .await;
        // Held open: the client must not wait for the close.
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let (feed, body) = FedBody::channel(Some(1000));
    let body = RequestBody::new(body, Some(Arc::new(BodyState::new())), None);
    let head = |out: &mut Vec<u8>| {
        out.extend_from_slice(b"POST /up HTTP/1.1\r\nhost: up\r\ncontent-length: 1000\r\n\r\n");
    };
    let sending = pool.send(false, head, Some(body), Sending::Length(1000), false, None);
    let res = tokio::time::timeout(Duration::from_secs(10), sending)
        .await
        .expect("answered before the body ended")
        .expect("answer");
    assert_eq!(res.status(), 413);
    assert_eq!(body_of(res).await.expect("body"), b"");
    assert_eq!(pool.idle_count(), 0);
    drop(feed);
}

/// A body of unknown length goes chunked, each piece a chunk, and ends
/// with the last chunk; then the connection is kept.
#[tokio::test]
async fn a_body_of_unknown_length_is_sent_chunked() {
    let (listener, pool) = upstream(4).await;
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        let head = read_head_of(&mut s).await;
        let mut body = Vec::new();
        while !body.ends_with(b"0\r\n\r\n") {
            body.push(s.read_u8().await.expect("body"));
        }
        s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
            .await
            .expect("answer");
        (head, body)
    });
    let (feed, body) = FedBody::channel(None);
    let body = RequestBody::new(body, Some(Arc::new(BodyState::new())), None);
    let parts = {
        let req = http::Request::post("/up")
            .header("host", "up")
            .header("content-length", "11")
            .body(())
            .expect("request");
        req.into_parts().0
    };
    let head = |out: &mut Vec<u8>| write_head(out, &parts, Sending::Chunked);
    let feeding = async move {
        let mut feed = feed;
        assert!(feed.wanted().await);
        assert!(feed.send(Bytes::from_static(b"hello")).await);
        assert!(feed.send(Bytes::from_static(b" world")).await);
    };
    let (res, ()) = tokio::join!(
        pool.send(false, head, Some(body), Sending::Chunked, false, None),
        feeding
    );
    assert_eq!(res.expect("answer").status(), 204);
    let (head, body) = server.await.expect("server");
    assert!(head.contains("transfer-encoding: chunked\r\n"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    assert_eq!(body, b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    assert_eq!(pool.idle_count(), 1);
}

/// A broken head is an invalid response; a body cut short is an error,
/// never an end.
#[tokio::test]
async fn broken_answers_are_errors() {
    let (listener, pool) = upstream(4).await;
    tokio::spawn(async move {
        let s = answer(
            &listener,
            b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd",
        )
        .await;
        drop(s);
        let s = answer(
            &listener,
            b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc",
        )
        .await;
        drop(s);
        let _closed_when_done = answer(
            &listener,
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        )
        .await;
    });
    let failure = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect_err("two lengths");
    assert!(failure.error.is::<ResponseError>(), "{failure:?}");
    let res = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect("head");
    let err = body_of(res).await.expect_err("cut short");
    assert!(err.is::<ClosedEarly>(), "{err:?}");
    let res = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect("head");
    body_of(res).await.expect_err("a bad chunk size");
    assert_eq!(pool.idle_count(), 0);
}

/// Nothing listening: a connect failure.
#[tokio::test]
async fn a_dead_upstream_is_a_connect_failure() {
    let (listener, pool) = upstream(4).await;
    drop(listener);
    let failure = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect_err("dead");
    assert!(failure.connect && !failure.stale, "{failure:?}");
}

/// The head announces the framing the body is sent with.
#[test]
fn the_head_says_how_the_body_is_framed() {
    let parts = |cl: Option<&str>| {
        let mut req = http::Request::put("/p?q=1").header("host", "up");
        if let Some(cl) = cl {
            req = req.header("content-length", cl);
        }
        req.body(()).expect("request").into_parts().0
    };
    let written = |parts: &http::request::Parts, sending| {
        let mut out = Vec::new();
        write_head(&mut out, parts, sending);
        String::from_utf8(out).expect("ascii")
    };
    assert_eq!(
        written(&parts(Some("3")), Sending::Length(3)),
        "PUT /p?q=1 HTTP/1.1\r\nhost: up\r\ncontent-length: 3\r\n\r\n"
    );
    assert_eq!(
        written(&parts(None), Sending::Length(7)),
        "PUT /p?q=1 HTTP/1.1\r\nhost: up\r\ncontent-length: 7\r\n\r\n"
    );
    assert_eq!(
        written(&parts(Some("3")), Sending::Chunked),
        "PUT /p?q=1 HTTP/1.1\r\nhost: up\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    assert_eq!(
        written(&parts(Some("0")), Sending::None),
        "PUT /p?q=1 HTTP/1.1\r\nhost: up\r\ncontent-length: 0\r\n\r\n"
    );
}

/// The target goes in origin form, `/` first when the client's
/// absolute form had a query and no path (`http://h?q` leaves `?q`).
#[test]
fn the_target_goes_in_origin_form() {
    for (target, line) in [
        ("http://example.com?q=1", "GET /?q=1 HTTP/1.1\r\n"),
        ("http://example.com", "GET / HTTP/1.1\r\n"),
        ("http://example.com/a?b", "GET /a?b HTTP/1.1\r\n"),
        ("/a?b", "GET /a?b HTTP/1.1\r\n"),
    ] {
        let parts = http::Request::get(target)
            .body(())
            .expect("request")
            .into_parts()
            .0;
        let mut out = Vec::new();
        write_head(&mut out, &parts, Sending::None);
        let out = String::from_utf8(out).expect("ascii");
        assert!(out.starts_with(line), "{target}: {out:?}");
    }
}

/// An upstream that answers first and reads the body after (an echo)
/// gets the whole body: its write goes on after the answer's head.
#[tokio::test]
async fn the_body_goes_on_after_an_early_answer() {
    let (listener, pool) = upstream(4).await;
    tokio::spawn(async move {
        let mut s = answer(
            &listener,
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
        )
        .await;
        let mut body = [0u8; 10];
        s.read_exact(&mut body).await.expect("the body");
        s.write_all(b"a\r\n").await.expect("echo");
        s.write_all(&body).await.expect("echo");
        s.write_all(b"\r\n0\r\n\r\n").await.expect("echo");
    });
    let (feed, body) = FedBody::channel(Some(10));
    let body = RequestBody::new(body, Some(Arc::new(BodyState::new())), None);
    let head = |out: &mut Vec<u8>| {
        out.extend_from_slice(b"POST /echo HTTP/1.1\r\nhost: up\r\ncontent-length: 10\r\n\r\n");
    };
    let res = pool
        .send(false, head, Some(body), Sending::Length(10), false, None)
        .await
        .expect("answer");
    // The answer came before any of the body was given.
    let mut feed = feed;
    assert!(feed.wanted().await);
    assert!(feed.send(Bytes::from_static(b"01234")).await);
    assert!(feed.send(Bytes::from_static(b"56789")).await);
    let echoed = tokio::time::timeout(Duration::from_secs(10), body_of(res))
        .await
        .expect("echoed in time")
        .expect("body");
    assert_eq!(echoed, b"0123456789");
    assert_eq!(pool.idle_count(), 0);
}

/// A body longer or shorter than the length its head announced fails
/// instead of leaving the upstream to read the difference as a request.
#[tokio::test]
async fn a_body_not_of_its_length_fails() {
    for (given, announced) in [(&b"12345"[..], 3), (b"12", 3)] {
        let (listener, pool) = upstream(4).await;
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            read_head_of(&mut s).await;
            // Holds the connection open without answering.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest).await;
        });
        let body = http_body_util::Full::new(Bytes::from_static(given));
        let body = RequestBody::new(body, Some(Arc::new(BodyState::new())), None);
        let head = |out: &mut Vec<u8>| {
            out.extend_from_slice(b"PUT /x HTTP/1.1\r\nhost: up\r\ncontent-length: 3\r\n\r\n");
        };
        let sending = pool.send(
            false,
            head,
            Some(body),
            Sending::Length(announced),
            false,
            None,
        );
        let failure = tokio::time::timeout(Duration::from_secs(10), sending)
            .await
            .expect("failed in time")
            .expect_err("a body not of its length");
        assert!(
            failure.error.to_string().contains("its length"),
            "{failure:?}"
        );
    }
}

/// A body that has already failed when the request is sent sends nothing
/// upstream; one already there goes in the head's write.
#[tokio::test]
async fn what_the_body_has_ready_goes_with_the_head() {
    let (listener, pool) = upstream(4).await;
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got).await;
        got
    });
    let (feed, body) = FedBody::channel(None);
    feed.fail("the client went away".into()).await;
    let body = RequestBody::new(body, Some(Arc::new(BodyState::new())), None);
    let head = |out: &mut Vec<u8>| out.extend_from_slice(b"POST / HTTP/1.1\r\nhost: up\r\n\r\n");
    let failure = pool
        .send(false, head, Some(body), Sending::Chunked, false, None)
        .await
        .expect_err("the body failed");
    assert!(
        failure.error.to_string().contains("went away"),
        "{failure:?}"
    );
    assert_eq!(server.await.expect("server"), b"");
}

/// Given a table, the answer keeps its fields in its head's bytes,
/// which its body carries with the parsed head (interim answers left
/// out), the parsed fields go to the table, and its `HeaderMap` stays
/// empty; a field value a `HeaderMap` would refuse is refused alike (by
/// the parser). The table and the connection trade field lists: neither
/// allocates one again.
#[tokio::test]
async fn an_answer_left_as_bytes_carries_its_head() {
    let (listener, pool) = upstream(4).await;
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        read_head_of(&mut s).await;
        s.write_all(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-Site: one\r\ncontent-length: 2\r\n\r\nhi")
            .await
            .expect("answer");
        read_head_of(&mut s).await;
        s.write_all(b"HTTP/1.1 200 OK\r\nX-Bad: a\x7fb\r\ncontent-length: 0\r\n\r\n")
            .await
            .expect("answer");
        let _ = s.read_u8().await;
    });
    let table = Mutex::new(Vec::with_capacity(32));
    let res = pool
        .send(false, get("/"), None, Sending::None, false, Some(&table))
        .await
        .expect("answer");
    assert!(res.headers().is_empty(), "{:?}", res.headers());
    let raw = &b"HTTP/1.1 200 OK\r\nX-Site: one\r\ncontent-length: 2\r\n\r\n"[..];
    let (bytes, head) = res.body().head().expect("the head carried");
    assert_eq!(&bytes[..], raw);
    assert_eq!((head.status, head.len), (200, raw.len()));
    {
        let fields = table.lock().expect("table");
        let names: Vec<&[u8]> = fields.iter().map(|f| f.name.of(bytes)).collect();
        assert_eq!(names, [&b"X-Site"[..], b"content-length"]);
    }
    assert_eq!(body_of(res).await.expect("body"), b"hi");
    // The connection now has the table's list, whose room it keeps.
    let kept = pool.checkout().expect("kept");
    assert!(kept.fields.capacity() >= 32);
    pool.checkin(kept);
    let refused = pool
        .send(false, get("/"), None, Sending::None, false, Some(&table))
        .await;
    assert!(refused.is_err());
    // Without a table: a `HeaderMap`, and no head carried.
    let (listener, pool) = upstream(4).await;
    tokio::spawn(async move {
        let _open = answer(
            &listener,
            b"HTTP/1.1 200 OK\r\nX-Site: one\r\ncontent-length: 0\r\n\r\n",
        )
        .await;
    });
    let res = pool
        .send(false, get("/"), None, Sending::None, false, None)
        .await
        .expect("answer");
    assert_eq!(res.headers()["x-site"], "one");
    assert!(res.body().head().is_none());
}
