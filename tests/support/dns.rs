//! A DNS server on loopback that the test controls: the reverse and
//! forward answers it gives, how late, and how often it was asked, for the
//! tests of crawler verification by DNS.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, PTR};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::net::UdpSocket;
use tokio::time::sleep;

/// What the loopback DNS server answers.
#[derive(Default)]
pub struct Zone {
    /// Address → reverse name.
    pub ptr: HashMap<IpAddr, String>,
    /// Name (lower case, no trailing dot) → its addresses.
    pub addrs: HashMap<String, Vec<IpAddr>>,
    /// Addresses whose reverse answer comes this late.
    pub slow: HashMap<IpAddr, Duration>,
    /// Reverse queries seen, per address.
    pub asked: HashMap<IpAddr, usize>,
}

/// A DNS server on loopback UDP answering from a [`Zone`]: PTR, A and
/// AAAA, NXDOMAIN for anything it does not hold.
pub struct DnsServer {
    pub addr: SocketAddr,
    zone: Arc<Mutex<Zone>>,
}

impl DnsServer {
    pub async fn start(zone: Zone) -> Self {
        let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.expect("bind udp"));
        let addr = socket.local_addr().expect("addr");
        let zone = Arc::new(Mutex::new(zone));
        let shared = Arc::clone(&zone);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                    return;
                };
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let (reply, delay) = answer(&shared, &query);
                let socket = Arc::clone(&socket);
                tokio::spawn(async move {
                    sleep(delay).await;
                    if let Ok(bytes) = reply.to_vec() {
                        let _ = socket.send_to(&bytes, from).await;
                    }
                });
            }
        });
        Self { addr, zone }
    }

    pub fn asked(&self, ip: &str) -> usize {
        let ip: IpAddr = ip.parse().expect("ip");
        self.zone
            .lock()
            .expect("zone")
            .asked
            .get(&ip)
            .copied()
            .unwrap_or(0)
    }
}

fn answer(zone: &Mutex<Zone>, query: &Message) -> (Message, Duration) {
    let mut zone = zone.lock().expect("zone");
    let mut reply = Message::response(query.metadata.id, query.metadata.op_code);
    reply.metadata.message_type = MessageType::Response;
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.metadata.authoritative = true;
    let mut delay = Duration::ZERO;
    let mut found = false;
    if let Some(q) = query.queries.first() {
        reply.add_query(q.clone());
        let name = q.name().clone();
        let text = name.to_ascii().trim_end_matches('.').to_ascii_lowercase();
        match q.query_type() {
            RecordType::PTR => {
                let hit = zone
                    .ptr
                    .iter()
                    .find(|(ip, _)| Name::from(**ip) == name)
                    .map(|(ip, ptr)| (*ip, ptr.clone()));
                if let Some((ip, ptr)) = hit {
                    *zone.asked.entry(ip).or_default() += 1;
                    delay = zone.slow.get(&ip).copied().unwrap_or_default();
                    let target: Name = format!("{ptr}.").parse().expect("ptr name");
                    reply.add_answer(Record::from_rdata(name, 300, RData::PTR(PTR(target))));
                    found = true;
                }
            }
            RecordType::A | RecordType::AAAA => {
                for ip in zone.addrs.get(&text).cloned().unwrap_or_default() {
                    let rdata = match (q.query_type(), ip) {
                        (RecordType::A, IpAddr::V4(v4)) => RData::A(A(v4)),
                        (RecordType::AAAA, IpAddr::V6(v6)) => RData::AAAA(AAAA(v6)),
                        _ => continue,
                    };
                    reply.add_answer(Record::from_rdata(name.clone(), 300, rdata));
                    found = true;
                }
                if !found && zone.addrs.contains_key(&text) {
                    // The name exists, without this record type.
                    return (reply, delay);
                }
            }
            _ => {}
        }
    }
    if !found {
        reply.metadata.response_code = ResponseCode::NXDomain;
    }
    (reply, delay)
}
