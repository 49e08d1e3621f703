//! Arbitrary bytes, split arbitrarily, through crawlgate's HTTP/1.1 head
//! parser, the chunked body reader and the upstream head writer.
//!
//! The first byte of the input picks how the rest arrives (in pieces of
//! 1 to 64 bytes, by a seed), as reads from a socket would. Checked:
//! nothing panics; a head read in pieces is the head read whole and is
//! never refused early; a chunked body gives the same verdict and the same
//! end in pieces as whole; a head that parses is written upstream as one
//! head that parses again, with the same method and target.
#![no_main]

use crawlgate::classify::UaClass;
use crawlgate::http1::{chunked::Chunked, parse_request, parse_response, BodyFraming};
use crawlgate::proxy::head::{write_request_head, HeadRewrite};
use crawlgate::proxy::ClientInfo;
use http::header::HeaderName;
use libfuzzer_sys::fuzz_target;

const MAX: usize = 8 * 1024;

mod pieces;
use pieces::pieces;

fuzz_target!(|input: &[u8]| {
    let Some((&seed, data)) = input.split_first() else {
        return;
    };
    let mut fields = Vec::new();
    let whole = parse_request(data, MAX, 64, &mut fields);

    // The head arriving in pieces: partial until it is whole.
    let mut scratch = Vec::new();
    for end in pieces(seed, data.len()) {
        match parse_request(&data[..end], MAX, 64, &mut scratch) {
            Ok(None) => continue,
            got => {
                match (&got, &whole) {
                    (Ok(Some(a)), Ok(Some(b))) => assert_eq!(a, b),
                    (Err(_), Err(_)) => {}
                    // A head complete within the prefix is complete whole.
                    _ => panic!("pieces {got:?} whole {whole:?}"),
                }
                break;
            }
        }
    }

    if let Ok(Some(head)) = whole {
        assert_eq!(scratch, fields);
        // Written upstream: one head that parses, same method and target.
        let client = ClientInfo {
            peer: "2001:db8::1".parse().expect("ip"),
            port: 80,
            scheme: "http",
            class: UaClass::Bot,
            robot: None,
        };
        let mut out = Vec::new();
        write_request_head(
            &mut out,
            data,
            &head,
            &fields,
            &HeadRewrite {
                host: b"upstream:8080",
                client: &client,
                trusted: seed & 1 == 1,
                port: b"80",
                class_header: &HeaderName::from_static("x-crawler"),
                robot_class_header: &HeaderName::from_static("x-crawler-class"),
                verified_header: &HeaderName::from_static("x-crawler-verified"),
                upgrade: (seed & 2 == 2).then_some(&b"websocket"[..]),
                chunked: head.body == BodyFraming::Chunked,
            },
        );
        let mut sent = Vec::new();
        match parse_request(&out, MAX * 2, 256, &mut sent) {
            Ok(Some(again)) => {
                assert_eq!(again.len, out.len());
                assert_eq!(again.method.of(&out), head.method.of(data));
                assert_eq!(again.body, head.body);
            }
            other => panic!(
                "written head refused: {other:?}\n{:?}",
                String::from_utf8_lossy(&out)
            ),
        }

        // The body after the head, if chunked: same verdict in pieces.
        if head.body == BodyFraming::Chunked {
            let body = &data[head.len..];
            let whole = Chunked::new().feed(body);
            let mut reader = Chunked::new();
            let mut at = 0;
            let mut split = Ok(0);
            for end in pieces(seed.rotate_left(3), body.len()) {
                if end <= at {
                    continue;
                }
                match reader.feed(&body[at..end]) {
                    Ok(progress) => {
                        at += progress.consumed;
                        split = Ok(at);
                        if progress.done {
                            break;
                        }
                    }
                    Err(err) => {
                        split = Err(err);
                        break;
                    }
                }
            }
            match (whole, split) {
                (Ok(w), Ok(s)) => assert_eq!(w.consumed, s),
                (Err(a), Err(b)) => assert_eq!(a, b),
                (w, s) => panic!("whole {w:?} pieces {s:?}"),
            }
        }
    }
    let _ = parse_response(data, seed & 4 == 4, MAX, 64, &mut fields);
});
