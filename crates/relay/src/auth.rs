//! The app's users at the relay (docs/relay.md sec. 2-4): a relay started with `--auth-secret`
//! or `--auth-jwks` requires a JWT in a TOKEN frame before AUTH. The token names the app's user
//! (`sub`) and may limit the device keys that user may authenticate as (`cairn_keys`); the
//! relay binds each device key to the first user that authenticated with it (in its store, so
//! the binding survives restarts and is shared by relays on one database).
//!
//! Signatures and the time claims are checked by `jsonwebtoken`; the algorithms accepted are
//! those of the configured key's family only, so a public RSA or Ed25519 key can never be used
//! as an HMAC secret (the classic algorithm-confusion attack), and `none` is never accepted.

use crate::error::{Error, Result};
use crate::frame::Code;
use cairn_sync::AuthorId;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use std::path::Path;

/// Longest token accepted, in bytes: a JWT with a few keys is far below it.
pub const MAX_TOKEN: usize = 16 * 1024;
/// Seconds of clock difference tolerated on `exp` and `nbf` between the app server and the relay.
pub const LEEWAY_S: u64 = 30;

/// How tokens are checked: the keys, and the audience and issuer they must name (if set).
#[derive(Clone)]
pub struct AuthConfig {
    keys: Vec<Key>,
    audience: Option<String>,
    issuer: Option<String>,
}

#[derive(Clone)]
struct Key {
    /// The JWKS `kid`; `None` for the shared secret.
    kid: Option<String>,
    /// The JWKS `alg`, when the key names one: then only that algorithm.
    alg: Option<Algorithm>,
    key: DecodingKey,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key material.
        f.debug_struct("AuthConfig")
            .field("keys", &self.keys.len())
            .field("audience", &self.audience)
            .field("issuer", &self.issuer)
            .finish()
    }
}

/// The user a valid token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The token's `sub`: the app's user id.
    pub sub: String,
    /// The token's `cairn_keys`: the only device keys this connection may authenticate as.
    /// `None` when the claim is absent (any key not bound to another user).
    pub keys: Option<Vec<AuthorId>>,
}

impl User {
    /// Whether the token allows authenticating as `key`.
    pub fn allows(&self, key: &AuthorId) -> bool {
        self.keys.as_ref().is_none_or(|ks| ks.contains(key))
    }
}

/// A refused token: the code sent to the client and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    pub code: Code,
    pub message: String,
}

fn bad(message: impl Into<String>) -> TokenError {
    TokenError {
        code: Code::BadToken,
        message: message.into(),
    }
}

#[derive(serde::Deserialize)]
struct Claims {
    sub: Option<String>,
    #[serde(default)]
    cairn_keys: Option<Vec<String>>,
}

impl AuthConfig {
    /// An HS256 shared secret: the bytes of the file, less a trailing line break.
    pub fn secret_file(path: &Path) -> Result<AuthConfig> {
        let bytes = std::fs::read(path)
            .map_err(|e| Error::InvalidInput(format!("--auth-secret {}: {e}", path.display())))?;
        let mut s = bytes.as_slice();
        while let Some(rest) = s.strip_suffix(b"\n").or_else(|| s.strip_suffix(b"\r")) {
            s = rest;
        }
        AuthConfig::secret(s)
    }

    pub fn secret(secret: &[u8]) -> Result<AuthConfig> {
        // Shorter secrets can be guessed offline from one token.
        if secret.len() < 32 {
            return Err(Error::InvalidInput(
                "--auth-secret: the secret must be at least 32 bytes".into(),
            ));
        }
        let key = DecodingKey::from_secret(secret)
            .map_err(|e| Error::InvalidInput(format!("--auth-secret: {e}")))?;
        Ok(AuthConfig {
            keys: vec![Key {
                kid: None,
                alg: Some(Algorithm::HS256),
                key,
            }],
            audience: None,
            issuer: None,
        })
    }

    /// A JWKS file (RFC 7517 `{"keys": [...]}`) of public keys: RSA (RS*/PS*), Ed25519 (EdDSA),
    /// P-256/P-384 (ES*).
    pub fn jwks_file(path: &Path) -> Result<AuthConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::InvalidInput(format!("--auth-jwks {}: {e}", path.display())))?;
        AuthConfig::jwks(&text)
    }

    pub fn jwks(json: &str) -> Result<AuthConfig> {
        let set: JwkSet = serde_json::from_str(json)
            .map_err(|e| Error::InvalidInput(format!("--auth-jwks: not a JWKS: {e}")))?;
        let mut keys = Vec::new();
        for jwk in &set.keys {
            if let jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_) = jwk.algorithm {
                return Err(Error::InvalidInput(
                    "--auth-jwks holds public keys only; a shared secret goes in --auth-secret"
                        .into(),
                ));
            }
            let key = DecodingKey::from_jwk(jwk).map_err(|e| {
                Error::InvalidInput(format!(
                    "--auth-jwks: key {:?}: {e}",
                    jwk.common.key_id.as_deref().unwrap_or("(no kid)")
                ))
            })?;
            let alg = match jwk.common.key_algorithm {
                None => None,
                Some(a) => Some(
                    a.to_string()
                        .parse::<Algorithm>()
                        .map_err(|e| Error::InvalidInput(format!("--auth-jwks: alg {a}: {e}")))?,
                ),
            };
            keys.push(Key {
                kid: jwk.common.key_id.clone(),
                alg,
                key,
            });
        }
        if keys.is_empty() {
            return Err(Error::InvalidInput("--auth-jwks: no keys".into()));
        }
        Ok(AuthConfig {
            keys,
            audience: None,
            issuer: None,
        })
    }

    /// Tokens must name `aud` in their `aud` claim.
    pub fn audience(mut self, aud: impl Into<String>) -> AuthConfig {
        self.audience = Some(aud.into());
        self
    }

    /// Tokens must carry `iss` as their `iss` claim.
    pub fn issuer(mut self, iss: impl Into<String>) -> AuthConfig {
        self.issuer = Some(iss.into());
        self
    }

    /// Checks a token: signature (by the key its `kid` names, or any key when it names none),
    /// `exp` (required) and `nbf`, the audience and issuer if configured, and `sub`.
    pub fn check(&self, token: &str) -> std::result::Result<User, TokenError> {
        if token.len() > MAX_TOKEN {
            return Err(bad(format!("token of {} bytes", token.len())));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| bad(format!("not a JWT: {e}")))?;
        let candidates: Vec<&Key> = match &header.kid {
            Some(kid) if self.keys.iter().any(|k| k.kid.is_some()) => {
                let found: Vec<&Key> = self
                    .keys
                    .iter()
                    .filter(|k| k.kid.as_deref() == Some(kid))
                    .collect();
                if found.is_empty() {
                    return Err(bad(format!("no key with kid {kid:?}")));
                }
                found
            }
            _ => self.keys.iter().collect(),
        };
        let mut last = bad("no key of the token's algorithm");
        for k in candidates {
            let family = k.key.family();
            if header.alg.family() != family || k.alg.is_some_and(|a| a != header.alg) {
                continue;
            }
            let mut v = match k.alg {
                Some(a) => Validation::new(a),
                None => Validation::new_for_family(family),
            };
            v.leeway = LEEWAY_S;
            v.validate_nbf = true;
            v.set_required_spec_claims(&["exp", "sub"]);
            match &self.audience {
                Some(a) => {
                    v.set_audience(&[a]);
                    v.required_spec_claims.insert("aud".into());
                }
                None => v.validate_aud = false,
            }
            if let Some(i) = &self.issuer {
                v.set_issuer(&[i]);
                v.required_spec_claims.insert("iss".into());
            }
            match jsonwebtoken::decode::<Claims>(token, &k.key, &v) {
                Ok(data) => return user(data.claims),
                Err(e) => {
                    last = match e.kind() {
                        ErrorKind::ExpiredSignature => TokenError {
                            code: Code::TokenExpired,
                            message: "the token has expired".into(),
                        },
                        ErrorKind::ImmatureSignature => bad("the token is not valid yet (nbf)"),
                        ErrorKind::InvalidAudience => bad("the token is for another audience"),
                        ErrorKind::InvalidIssuer => bad("the token is from another issuer"),
                        ErrorKind::InvalidSignature => bad("the token's signature does not verify"),
                        ErrorKind::MissingRequiredClaim(c) => {
                            bad(format!("the token has no {c:?} claim"))
                        }
                        _ => bad(format!("bad token: {e}")),
                    };
                    // Only a bad signature may mean "another key": anything else was decided
                    // by a key that verified the signature.
                    if !matches!(e.kind(), ErrorKind::InvalidSignature) {
                        return Err(last);
                    }
                }
            }
        }
        Err(last)
    }
}

fn user(claims: Claims) -> std::result::Result<User, TokenError> {
    let sub = claims
        .sub
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad("the token's sub is empty"))?;
    let keys = match claims.cairn_keys {
        None => None,
        Some(hexes) => Some(
            hexes
                .iter()
                .map(|h| {
                    parse_key(h)
                        .ok_or_else(|| bad(format!("cairn_keys: {h:?} is not a 64-digit hex key")))
                })
                .collect::<std::result::Result<Vec<_>, _>>()?,
        ),
    };
    Ok(User { sub, keys })
}

/// A 32-byte key from 64 hex digits (either case).
pub fn parse_key(h: &str) -> Option<AuthorId> {
    let b = h.as_bytes();
    if b.len() != 64 || !b.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(AuthorId(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_64_hex_digits_and_nothing_else() {
        let k = "ab".repeat(32);
        assert_eq!(parse_key(&k), Some(AuthorId([0xab; 32])));
        assert_eq!(parse_key(&k.to_uppercase()), Some(AuthorId([0xab; 32])));
        // `from_str_radix` alone would take a sign: "+f" is not a hex byte.
        assert_eq!(parse_key(&format!("+f{}", "00".repeat(31))), None);
        assert_eq!(parse_key(&"ab".repeat(31)), None);
        assert_eq!(parse_key(&format!("{}zz", "00".repeat(31))), None);
    }

    #[test]
    fn a_short_secret_and_a_jwks_without_keys_are_refused() {
        assert_eq!(
            AuthConfig::secret(b"short").map(|_| ()).unwrap_err().code(),
            "INVALID_INPUT"
        );
        assert!(AuthConfig::jwks(r#"{"keys":[]}"#).is_err());
        assert!(AuthConfig::jwks("not json").is_err());
    }
}
