//! Test certificates (rcgen) and TLS clients: a CA, leaf certificates
//! written in the layouts crawlgate reads, and clients that report which
//! certificate the server presented.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A test certificate authority.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub der: CertificateDer<'static>,
    pub pem: String,
}

/// A leaf certificate and its key, PEM.
pub struct Leaf {
    /// Leaf then CA, as a full chain file holds them.
    pub chain_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl Ca {
    pub fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "crawlgate test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("CA");
        Self {
            der: cert.der().clone(),
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `names`, valid from yesterday for a year.
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let now = crawlgate::clock::unix_now();
        self.leaf_valid(names, now - 86_400, now + 365 * 86_400)
    }

    /// A certificate for `names` valid between two Unix times.
    pub fn leaf_valid(&self, names: &[&str], not_before: i64, not_after: i64) -> Leaf {
        let names: Vec<String> = names.iter().map(|&n| n.to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        params.not_before = rcgen_time(not_before);
        params.not_after = rcgen_time(not_after);
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        Leaf {
            chain_pem: format!("{}{}", cert.pem(), self.pem),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// A TLS acceptor serving `leaf`.
    pub fn acceptor(leaf: &Leaf) -> tokio_rustls::TlsAcceptor {
        let chain = rustls_pki_types::CertificateDer::pem_slice_iter(leaf.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("chain");
        let key =
            rustls_pki_types::PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).expect("key");
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server config");
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }

    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.der.clone()).expect("CA root");
        roots
    }
}

fn rcgen_time(unix: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(unix).expect("a time")
}

/// Writes `NAME.crt` (or another extension) and `NAME.key` in `dir`.
pub fn write_flat(dir: &Path, file: &str, leaf: &Leaf) {
    let cert = dir.join(file);
    std::fs::write(&cert, &leaf.chain_pem).expect("write cert");
    std::fs::write(cert.with_extension("key"), &leaf.key_pem).expect("write key");
}

/// Writes certbot's `live/DOMAIN/fullchain.pem` + `privkey.pem`.
pub fn write_certbot(dir: &Path, domain: &str, leaf: &Leaf) {
    let live = dir.join("live").join(domain);
    std::fs::create_dir_all(&live).expect("mkdir");
    std::fs::write(live.join("fullchain.pem"), &leaf.chain_pem).expect("write cert");
    std::fs::write(live.join("privkey.pem"), &leaf.key_pem).expect("write key");
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client trusting only `roots`, offering `alpn`.
pub fn client_config(roots: RootCertStore, alpn: &[&[u8]]) -> ClientConfig {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// A client that accepts any certificate (to see what a server presents
/// to a client that sends no SNI).
pub fn client_config_any(alpn: &[&[u8]]) -> ClientConfig {
    let mut config = client_config(RootCertStore::empty(), alpn);
    config
        .dangerous()
        .set_certificate_verifier(Arc::new(AcceptAny(provider())));
    config
}

#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Connects and completes a handshake; `sni = None` sends no SNI.
pub async fn handshake(
    addr: SocketAddr,
    config: ClientConfig,
    sni: Option<&str>,
) -> Result<TlsStream<TcpStream>, std::io::Error> {
    let mut config = config;
    config.enable_sni = sni.is_some();
    let name = match sni {
        Some(name) => ServerName::try_from(name.to_owned()).expect("server name"),
        None => ServerName::IpAddress(addr.ip().into()),
    };
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

/// The end-entity certificate the server presented.
pub fn presented(stream: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .expect("a server certificate")
        .clone()
        .into_owned()
}

/// A response with its body read whole.
pub struct Got {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    pub version: http::Version,
}

impl Got {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends requests over one TLS connection with whatever protocol ALPN
/// chose (h2 or HTTP/1.1).
pub enum Client {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Client {
    pub async fn connect(stream: TlsStream<TcpStream>) -> Self {
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(stream);
        if h2 {
            let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .expect("h2 handshake");
            tokio::spawn(conn);
            Client::H2(send)
        } else {
            let (send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .expect("h1 handshake");
            tokio::spawn(conn);
            Client::H1(send)
        }
    }

    /// `req`'s URI must be absolute for h2 (it becomes :authority) and is
    /// turned into origin form plus Host for HTTP/1.1.
    pub async fn send(&mut self, mut req: Request<Full<Bytes>>) -> Got {
        let res: Response<hyper::body::Incoming> = match self {
            Client::H2(send) => {
                *req.version_mut() = http::Version::HTTP_2;
                send.send_request(req).await.expect("h2 response")
            }
            Client::H1(send) => {
                let uri = req.uri().clone();
                if let Some(authority) = uri.authority() {
                    let value = http::HeaderValue::from_str(authority.as_str()).expect("host");
                    req.headers_mut().insert(http::header::HOST, value);
                }
                let pq = uri.path_and_query().map_or("/", |pq| pq.as_str());
                *req.uri_mut() = pq.parse().expect("origin form");
                send.ready().await.expect("connection ready");
                send.send_request(req).await.expect("h1 response")
            }
        };
        let (parts, body) = res.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        Got {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
            version: parts.version,
        }
    }
}
