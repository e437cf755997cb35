//! The app's users at the relay: a relay started with a shared secret or a JWKS requires a
//! token before AUTH. Each refusal is tried as a client would meet it (no token, a forged or
//! expired one, another audience or issuer, a key the token does not list, another user's key,
//! a key id the JWKS lacks, the algorithm-confusion trick), and the happy path syncs end to end.

mod common;

use cairn_relay::client::{self, ConnectError};
use cairn_relay::{AuthConfig, Limits, Relay, RelayConfig};
use cairn_sync::{Identity, ScopeId};
use common::*;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use std::path::Path;

const SECRET: &[u8] = b"the app server's secret, 32 bytes or more";
const AUD: &str = "cairn-relay";
const ISS: &str = "https://app.example";
/// A test-only RSA key (PKCS#1 PEM); its public half goes into the JWKS.
const RSA_PEM: &[u8] = include_bytes!("fixtures/test-rsa-key.pem");

async fn relay_with(dir: &Path, auth: AuthConfig) -> Relay {
    Relay::start(RelayConfig {
        listen: "127.0.0.1:0".parse().expect("invariant: valid address"),
        data: dir.to_path_buf(),
        postgres: None,
        limits: Limits::default(),
        auth: Some(auth),
    })
    .await
    .expect("relay starts")
}

fn now_s() -> i64 {
    (now() / 1000) as i64
}

/// Claims for `sub`, valid for an hour, for the configured audience and issuer.
fn claims(sub: &str) -> serde_json::Value {
    json!({ "sub": sub, "exp": now_s() + 3600, "aud": AUD, "iss": ISS })
}

fn sign(header: Header, claims: &serde_json::Value, key: &EncodingKey) -> String {
    jsonwebtoken::encode(&header, claims, key).expect("invariant: test token encodes")
}

fn hs256(claims: &serde_json::Value) -> String {
    sign(
        Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(SECRET).expect("secret"),
    )
}

/// An Ed25519 key for tokens (PKCS#8 DER: a fixed 16-byte prefix, then the seed).
fn ed_key(seed: u8) -> EncodingKey {
    let mut der = hex_bytes("302e020100300506032b657004220420");
    der.extend_from_slice(&[seed; 32]);
    EncodingKey::from_ed_der(&der)
}

fn hex_bytes(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
        .collect()
}

fn with_kid(alg: Algorithm, kid: &str) -> Header {
    let mut h = Header::new(alg);
    h.kid = Some(kid.into());
    h
}

/// Connects with `token` as `identity`: the relay's key, or its refusal.
async fn try_connect(url: &str, identity: &Identity, token: Option<&str>) -> Result<(), String> {
    match client::connect(url, identity, token).await {
        Ok(_) => Ok(()),
        Err(ConnectError::Refused(r)) => {
            assert!(r.fatal, "token refusals are fatal: {r:?}");
            Err(r.code)
        }
        Err(e) => panic!("no refusal, but {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_required_checked_and_bind_keys_to_users() {
    let dir = temp_dir("tokens");
    let auth = || {
        AuthConfig::secret(SECRET)
            .expect("secret")
            .audience(AUD)
            .issuer(ISS)
    };
    let relay = relay_with(&dir, auth()).await;
    let url = relay.url();
    let alice_key = key(1);

    // Refusals, each on a fresh connection as a client would meet it.
    assert_eq!(
        try_connect(&url, &alice_key, None).await,
        Err("TOKEN_REQUIRED".into())
    );
    assert_eq!(
        try_connect(&url, &alice_key, Some("not a token")).await,
        Err("BAD_TOKEN".into())
    );
    let forged = sign(
        Header::new(Algorithm::HS256),
        &claims("alice"),
        &EncodingKey::from_secret(b"another secret, also 32 bytes long").expect("secret"),
    );
    assert_eq!(
        try_connect(&url, &alice_key, Some(&forged)).await,
        Err("BAD_TOKEN".into())
    );
    let expired = hs256(&json!({ "sub": "alice", "exp": now_s() - 3600, "aud": AUD, "iss": ISS }));
    assert_eq!(
        try_connect(&url, &alice_key, Some(&expired)).await,
        Err("TOKEN_EXPIRED".into())
    );
    let early = hs256(
        &json!({ "sub": "alice", "exp": now_s() + 7200, "nbf": now_s() + 3600, "aud": AUD, "iss": ISS }),
    );
    assert_eq!(
        try_connect(&url, &alice_key, Some(&early)).await,
        Err("BAD_TOKEN".into())
    );
    let no_exp = hs256(&json!({ "sub": "alice", "aud": AUD, "iss": ISS }));
    assert_eq!(
        try_connect(&url, &alice_key, Some(&no_exp)).await,
        Err("BAD_TOKEN".into())
    );
    let other_aud =
        hs256(&json!({ "sub": "alice", "exp": now_s() + 60, "aud": "another-app", "iss": ISS }));
    assert_eq!(
        try_connect(&url, &alice_key, Some(&other_aud)).await,
        Err("BAD_TOKEN".into())
    );
    let other_iss = hs256(
        &json!({ "sub": "alice", "exp": now_s() + 60, "aud": AUD, "iss": "https://evil.example" }),
    );
    assert_eq!(
        try_connect(&url, &alice_key, Some(&other_iss)).await,
        Err("BAD_TOKEN".into())
    );
    // `alg: none` with no signature: never accepted.
    let unsigned = format!(
        "{}.{}.",
        base64url(br#"{"alg":"none","typ":"JWT"}"#),
        base64url(claims("alice").to_string().as_bytes())
    );
    assert_eq!(
        try_connect(&url, &alice_key, Some(&unsigned)).await,
        Err("BAD_TOKEN".into())
    );
    // A token that lists the user's keys: another key is FORBIDDEN.
    let listed = {
        let mut c = claims("alice");
        c["cairn_keys"] = json!([cairn_relay::frame::hex(&alice_key.id().0)]);
        hs256(&c)
    };
    assert_eq!(
        try_connect(&url, &key(9), Some(&listed)).await,
        Err("FORBIDDEN".into())
    );

    // Alice authenticates with her key: it is hers from now on.
    assert_eq!(try_connect(&url, &alice_key, Some(&listed)).await, Ok(()));
    // Mallory, a real user of the app with a valid token, cannot take alice's key.
    let mallory = hs256(&claims("mallory"));
    assert_eq!(
        try_connect(&url, &alice_key, Some(&mallory)).await,
        Err("FORBIDDEN".into())
    );
    assert_eq!(try_connect(&url, &key(5), Some(&mallory)).await, Ok(()));

    // The happy path: alice and bob sync through the relay with their tokens.
    let scope = ScopeId::new(alice_key.id(), "todo/list=shared");
    let bob_token = hs256(&claims("bob"));
    let alice =
        client::SyncPeer::spawn_failover(app(1), key(1), vec![url.clone()], Some(listed.clone()));
    let bob = client::SyncPeer::spawn_failover(
        app(2),
        key(2),
        vec![url.clone()],
        Some(bob_token.clone()),
    );
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id()]);
        write(r, &scope, 1, "from alice");
    });
    wait_until("bob syncs", || converged(&[&alice, &bob])).await;
    bob.with(|r| write(r, &scope, 2, "from bob"));
    wait_until("alice syncs", || converged(&[&alice, &bob])).await;
    assert_verified(&[&alice, &bob]);
    assert!(alice.refusals().is_empty() && bob.refusals().is_empty());
    alice.stop().await;
    bob.stop().await;

    // The binding is in the relay's store: after a restart, mallory still cannot take it.
    relay.shutdown().await.expect("clean shutdown");
    let relay = relay_with(&dir, auth()).await;
    let url = relay.url();
    assert_eq!(
        try_connect(&url, &alice_key, Some(&mallory)).await,
        Err("FORBIDDEN".into())
    );
    assert_eq!(
        try_connect(&url, &key(2), Some(&mallory)).await,
        Err("FORBIDDEN".into())
    );
    assert_eq!(
        try_connect(&url, &alice_key, Some(&hs256(&claims("alice")))).await,
        Ok(())
    );
    assert_eq!(try_connect(&url, &key(2), Some(&bob_token)).await, Ok(()));
    relay.shutdown().await.expect("clean shutdown");
}

fn base64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_with_two_keys_checks_each_token_with_the_key_its_kid_names() {
    let rsa = EncodingKey::from_rsa_pem(RSA_PEM).expect("test RSA key");
    let ed = ed_key(7);
    let mut rsa_jwk = Jwk::from_encoding_key(&rsa, Algorithm::RS256).expect("jwk");
    rsa_jwk.common.key_id = Some("rsa-1".into());
    let mut ed_jwk = Jwk::from_encoding_key(&ed, Algorithm::EdDSA).expect("jwk");
    ed_jwk.common.key_id = Some("ed-1".into());
    let jwks = serde_json::to_string(&JwkSet {
        keys: vec![rsa_jwk.clone(), ed_jwk],
    })
    .expect("jwks");
    let dir = temp_dir("jwks");
    let path = dir.join("jwks.json");
    std::fs::write(&path, &jwks).expect("write jwks");
    let relay = relay_with(&dir, AuthConfig::jwks_file(&path).expect("jwks loads")).await;
    let url = relay.url();
    let c = claims("carol");

    let rs256 = sign(with_kid(Algorithm::RS256, "rsa-1"), &c, &rsa);
    assert_eq!(try_connect(&url, &key(3), Some(&rs256)).await, Ok(()));
    let eddsa = sign(with_kid(Algorithm::EdDSA, "ed-1"), &c, &ed);
    assert_eq!(try_connect(&url, &key(3), Some(&eddsa)).await, Ok(()));

    // A kid the JWKS lacks; the right key under the wrong kid; another Ed25519 key.
    let unknown = sign(with_kid(Algorithm::EdDSA, "ed-2"), &c, &ed);
    assert_eq!(
        try_connect(&url, &key(3), Some(&unknown)).await,
        Err("BAD_TOKEN".into())
    );
    let wrong_kid = sign(with_kid(Algorithm::EdDSA, "rsa-1"), &c, &ed);
    assert_eq!(
        try_connect(&url, &key(3), Some(&wrong_kid)).await,
        Err("BAD_TOKEN".into())
    );
    let other_key = sign(with_kid(Algorithm::EdDSA, "ed-1"), &c, &ed_key(8));
    assert_eq!(
        try_connect(&url, &key(3), Some(&other_key)).await,
        Err("BAD_TOKEN".into())
    );
    // Algorithm confusion: HS256 keyed with the public RSA modulus, which anyone knows.
    let jsonwebtoken::jwk::AlgorithmParameters::RSA(p) = &rsa_jwk.algorithm else {
        panic!("an RSA jwk");
    };
    let confused = sign(
        with_kid(Algorithm::HS256, "rsa-1"),
        &c,
        &EncodingKey::from_secret(p.n.as_bytes()).expect("secret"),
    );
    assert_eq!(
        try_connect(&url, &key(3), Some(&confused)).await,
        Err("BAD_TOKEN".into())
    );
    // A JWKS holding a shared secret is refused at start.
    let oct = r#"{"keys":[{"kty":"oct","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"}]}"#;
    let e = AuthConfig::jwks(oct).expect_err("a secret in a JWKS");
    assert_eq!(e.code(), "INVALID_INPUT");
    relay.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_without_tokens_ignores_one() {
    let dir = temp_dir("no-tokens");
    let relay = start_relay(&dir, Limits::default()).await;
    assert_eq!(
        try_connect(&relay.url(), &key(1), Some("whatever the app sends")).await,
        Ok(())
    );
    relay.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_takes_its_secret_audience_and_issuer_from_flags() {
    let dir = temp_dir("token-flags");
    let secret = dir.join("relay-secret");
    let mut bytes = SECRET.to_vec();
    bytes.push(b'\n'); // as `echo ... > file` writes it
    std::fs::write(&secret, bytes).expect("write secret");
    let data = dir.join("data");
    let (mut child, addr) = spawn_relay_binary(&[
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--data".as_ref(),
        data.as_os_str(),
        "--auth-secret".as_ref(),
        secret.as_os_str(),
        "--auth-audience".as_ref(),
        AUD.as_ref(),
        "--auth-issuer".as_ref(),
        ISS.as_ref(),
    ] as &[&std::ffi::OsStr]);
    let url = format!("ws://{addr}/");
    assert_eq!(
        try_connect(&url, &key(1), None).await,
        Err("TOKEN_REQUIRED".into())
    );
    assert_eq!(
        try_connect(&url, &key(1), Some(&hs256(&claims("alice")))).await,
        Ok(())
    );
    let other_aud = hs256(&json!({ "sub": "alice", "exp": now_s() + 60, "aud": "x", "iss": ISS }));
    assert_eq!(
        try_connect(&url, &key(1), Some(&other_aud)).await,
        Err("BAD_TOKEN".into())
    );
    child.kill().expect("kill");
    child.wait().expect("reaped");

    // A secret too short to resist guessing is refused at start.
    std::fs::write(&secret, b"short").expect("write secret");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-relay"))
        .args(["--listen", "127.0.0.1:0", "--data"])
        .arg(&data)
        .arg("--auth-secret")
        .arg(&secret)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 32 bytes"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_token_or_one_after_auth_is_malformed() {
    use cairn_relay::client::Incoming;
    use cairn_relay::frame::auth_message;
    use cairn_relay::Frame;
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as Ws;
    let dir = temp_dir("token-twice");
    let relay = relay_with(&dir, AuthConfig::secret(SECRET).expect("secret")).await;
    let mut s = client::open(&relay.url()).await.expect("open");
    let (nonce, relay_id, _) = client::challenge(&mut s).await.expect("challenge");
    let token = Frame::Token {
        token: hs256(&claims("alice")),
    }
    .encode();
    s.send(Ws::Binary(token.clone().into()))
        .await
        .expect("send");
    s.send(Ws::Binary(token.clone().into()))
        .await
        .expect("send");
    match client::recv(&mut s).await {
        Incoming::Refusal(r) => assert_eq!((r.code.as_str(), r.fatal), ("MALFORMED", false)),
        other => panic!("{other:?}"),
    }
    let alice = key(1);
    let sig = alice.sign(&auth_message(&nonce, &relay_id));
    let auth = Frame::Auth {
        key: alice.id(),
        sig,
    };
    s.send(Ws::Binary(auth.encode().into()))
        .await
        .expect("send");
    match s.next().await {
        Some(Ok(Ws::Binary(b))) => {
            assert_eq!(Frame::decode(&b), Ok(Frame::Welcome { key: alice.id() }))
        }
        other => panic!("expected WELCOME, got {other:?}"),
    }
    s.send(Ws::Binary(token.into())).await.expect("send");
    loop {
        match client::recv(&mut s).await {
            Incoming::Sync(_) => continue, // the relay's HELLO
            Incoming::Refusal(r) => {
                assert_eq!((r.code.as_str(), r.fatal), ("MALFORMED", false));
                break;
            }
            Incoming::Closed => panic!("closed"),
        }
    }
    relay.shutdown().await.expect("clean shutdown");
}
