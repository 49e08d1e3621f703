//! Requests signed the Web Bot Auth way, as a test signer makes them: an
//! Ed25519 agent key with its JWK and id, and the Signature-Agent,
//! Signature-Input and Signature headers of RFC 9421, written out by hand.

/// An Ed25519 agent key as a test signer holds it: the key, its JWK and
/// its id (the JWK's RFC 7638 thumbprint).
pub struct AgentKey {
    pub key: ed25519_dalek::SigningKey,
    pub jwk: String,
    pub id: String,
}

impl AgentKey {
    /// The key whose 32-byte seed is `seed` repeated.
    pub fn new(seed: u8) -> Self {
        use base64::Engine;
        use sha2::Digest;
        let key = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
        let x =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
        // The thumbprint's input: the required members, sorted, no spaces.
        let canonical = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(canonical.as_bytes()));
        let jwk = format!(r#"{{"kty":"OKP","crv":"Ed25519","x":"{x}"}}"#);
        Self { key, jwk, id }
    }
}

/// What a test signer signs: the covered components, the time window, the
/// tag, and the Signature-Agent header's URL.
#[derive(Clone)]
pub struct Signing<'a> {
    pub key: &'a AgentKey,
    pub authority: &'a str,
    pub agent: String,
    pub components: &'a [&'a str],
    pub window: (i64, i64),
    pub tag: &'a str,
}

impl Signing<'_> {
    /// The headers of a request signed per RFC 9421 and the web-bot-auth
    /// draft, written out by hand (an implementation apart from the one
    /// crawlgate verifies with).
    pub fn headers(&self) -> String {
        use base64::Engine;
        use ed25519_dalek::Signer;
        let agent_header = format!("\"{}\"", self.agent);
        let covered: Vec<String> = self.components.iter().map(|c| format!("\"{c}\"")).collect();
        let params = format!(
            "({});created={};expires={};keyid=\"{}\";alg=\"ed25519\";nonce=\"n0nce\";tag=\"{}\"",
            covered.join(" "),
            self.window.0,
            self.window.1,
            self.key.id,
            self.tag
        );
        let mut base = String::new();
        for c in self.components {
            let value = match *c {
                "@authority" => self.authority.to_owned(),
                "signature-agent" => agent_header.clone(),
                other => panic!("no value for {other}"),
            };
            base.push_str(&format!("\"{c}\": {value}\n"));
        }
        base.push_str(&format!("\"@signature-params\": {params}"));
        let signature = self.key.key.sign(base.as_bytes());
        let signature = base64::engine::general_purpose::STANDARD.encode(signature.to_bytes());
        format!(
            "Signature-Agent: {agent_header}\r\nSignature-Input: sig1={params}\r\nSignature: sig1=:{signature}:\r\n"
        )
    }
}
