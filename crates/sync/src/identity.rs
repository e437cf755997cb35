//! A replica's identity: an Ed25519 key pair made from injected secure randomness. The public key
//! is the author id. Export/import moves an identity to another device.

use crate::error::{Error, Result};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use rand_core::CryptoRngCore;
use std::fmt;

/// An author id: an Ed25519 public key, compared bytewise (the LWW tie-break).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct AuthorId(pub [u8; 32]);

impl Ord for AuthorId {
    /// Bytewise, as eight bytes at a time read big-endian compare: the same order as the
    /// array's, without a call to `memcmp` (chains are found by author in search trees, on
    /// every local commit).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let word = |a: &[u8; 32], i: usize| {
            u64::from_be_bytes(a[i..i + 8].try_into().expect("invariant: 8 bytes"))
        };
        for i in [0, 8, 16, 24] {
            match word(&self.0, i).cmp(&word(&other.0, i)) {
                std::cmp::Ordering::Equal => {}
                o => return o,
            }
        }
        std::cmp::Ordering::Equal
    }
}

impl PartialOrd for AuthorId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for AuthorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.0[..4] {
            write!(f, "{b:02x}")?;
        }
        f.write_str("…")
    }
}

impl AuthorId {
    /// The id as 64 lower-case hex digits (how applications show and exchange it).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    /// Parses 64 hex digits.
    pub fn from_hex(s: &str) -> Option<AuthorId> {
        if s.len() != 64 || !s.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(AuthorId(out))
    }
    pub fn verifying_key(&self) -> Result<VerifyingKey> {
        VerifyingKey::from_bytes(&self.0)
            .map_err(|_| Error::Malformed("author id is not an Ed25519 public key".into()))
    }

    /// Checks one signature by this author.
    pub fn verify(&self, message: &[u8], sig: &[u8; 64]) -> bool {
        match self.verifying_key() {
            Ok(k) => k.verify(message, &Signature::from_bytes(sig)).is_ok(),
            Err(_) => false,
        }
    }
}

/// Export format: `"cairn-key" || u8 version = 1 || secret(32)` then BLAKE3 of the former, first 4
/// bytes, as a typo check.
const EXPORT_TAG: &[u8] = b"cairn-key";
const EXPORT_VERSION: u8 = 1;

pub struct Identity {
    key: SigningKey,
    id: AuthorId,
}

impl Identity {
    /// A new key pair. `rng` must be a cryptographically secure generator (the host passes
    /// `OsRng`, which is `crypto.getRandomValues` in a browser).
    pub fn generate(rng: &mut impl CryptoRngCore) -> Identity {
        Identity::from_secret(SigningKey::generate(rng).to_bytes())
    }

    pub fn from_secret(secret: [u8; 32]) -> Identity {
        let key = SigningKey::from_bytes(&secret);
        let id = AuthorId(key.verifying_key().to_bytes());
        Identity { key, id }
    }

    pub fn id(&self) -> AuthorId {
        self.id
    }

    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }

    /// The secret key with a version and a checksum. Whoever holds these bytes can write as
    /// this author: the host must keep them as it keeps the database.
    pub fn export(&self) -> Vec<u8> {
        let mut out = EXPORT_TAG.to_vec();
        out.push(EXPORT_VERSION);
        out.extend_from_slice(&self.key.to_bytes());
        let check = blake3::hash(&out);
        out.extend_from_slice(&check.as_bytes()[..4]);
        out
    }

    pub fn import(bytes: &[u8]) -> Result<Identity> {
        let body_len = EXPORT_TAG.len() + 1 + 32;
        if bytes.len() != body_len + 4 || !bytes.starts_with(EXPORT_TAG) {
            return Err(Error::Malformed("not an exported cairn key".into()));
        }
        if bytes[EXPORT_TAG.len()] != EXPORT_VERSION {
            return Err(Error::Malformed(format!(
                "exported key version {} is not supported (expected {EXPORT_VERSION})",
                bytes[EXPORT_TAG.len()]
            )));
        }
        let (body, check) = bytes.split_at(body_len);
        if &blake3::hash(body).as_bytes()[..4] != check {
            return Err(Error::Malformed("exported key checksum mismatch".into()));
        }
        let mut secret = [0u8; 32];
        secret.copy_from_slice(&body[EXPORT_TAG.len() + 1..]);
        Ok(Identity::from_secret(secret))
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity({:?})", self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn author_ids_compare_as_their_bytes() {
        // The LWW tie-break and every search tree keyed by author rely on bytewise order.
        let mut ids = Vec::new();
        for i in 0..32 {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut a = [0x80u8; 32];
                a[i] = v;
                ids.push(AuthorId(a));
                let mut b = [0u8; 32];
                b[i..].fill(v);
                ids.push(AuthorId(b));
            }
        }
        for a in &ids {
            for b in &ids {
                assert_eq!(a.cmp(b), a.0.cmp(&b.0), "{a:?} {b:?}");
                assert_eq!(a.partial_cmp(b), Some(a.0.cmp(&b.0)));
            }
        }
    }

    #[test]
    fn export_import_round_trip_and_refusals() {
        let a = Identity::from_secret([7; 32]);
        let bytes = a.export();
        let b = Identity::import(&bytes).expect("invariant: own export imports");
        assert_eq!(a.id(), b.id());
        let sig = b.sign(b"x");
        assert!(a.id().verify(b"x", &sig));
        assert!(!a.id().verify(b"y", &sig));
        let mut bad = bytes.clone();
        bad[12] ^= 1;
        assert!(Identity::import(&bad).is_err());
        let mut v2 = bytes.clone();
        v2[EXPORT_TAG.len()] = 2;
        assert!(Identity::import(&v2).is_err());
        assert!(Identity::import(&bytes[..10]).is_err());
    }
}
