//! Attestations (docs/sync.md sec. 8): a scope's owner signs the digest of the scope's rows at
//! a set of heads, so that rows a peer sends in a snapshot are checked against signed data, and
//! compaction drops history only where such a signature stands for what it did.

use std::collections::BTreeMap;

use crate::error::{Error, Reason, Result};
use crate::identity::{AuthorId, Identity};
use crate::merge::{MemoryRows, RowKey, RowState};
use crate::scope::ScopeId;
use crate::wire::{Hash, Reader, Writer};

const ATTEST_TAG: &[u8] = b"cairn-sync attest v1";
const ROWS_TAG: &[u8] = b"cairn-sync rows v1";
const FORMAT: u8 = 1;

/// The heads an attestation names: per author, the seq and hash of its chain's sealed head in
/// the scope.
pub type ScopeHeads = BTreeMap<AuthorId, (u64, Hash)>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    pub scope: ScopeId,
    /// The owner's clock when it signed: of two attestations of a scope, the newer has the
    /// greater `hlc` (then the greater signature).
    pub hlc: u64,
    pub heads: ScopeHeads,
    pub digest: Hash,
    pub sig: [u8; 64],
}

impl Attestation {
    fn message(scope: &ScopeId, hlc: u64, heads: &ScopeHeads, digest: &Hash) -> Vec<u8> {
        let mut w = Writer::new();
        w.raw(ATTEST_TAG);
        scope.encode(&mut w);
        w.u64le(hlc);
        w.u64le(heads.len() as u64);
        for (a, (seq, hash)) in heads {
            w.raw(&a.0);
            w.u64le(*seq);
            w.raw(hash);
        }
        w.raw(digest);
        w.buf
    }

    /// Signs, as `owner`, the scope's rows `digest` at `heads`. The scope must be `owner`'s.
    pub fn sign(
        owner: &Identity,
        scope: ScopeId,
        hlc: u64,
        heads: ScopeHeads,
        digest: Hash,
    ) -> Attestation {
        debug_assert_eq!(scope.owner, owner.id(), "invariant: only an owner attests");
        let sig = owner.sign(&Self::message(&scope, hlc, &heads, &digest));
        Attestation {
            scope,
            hlc,
            heads,
            digest,
            sig,
        }
    }

    /// Whether the scope's owner signed it.
    pub fn check(&self) -> Result<()> {
        let msg = Self::message(&self.scope, self.hlc, &self.heads, &self.digest);
        if self.scope.owner.verify(&msg, &self.sig) {
            Ok(())
        } else {
            Err(Error::reject(
                Reason::BadSignature,
                "attestation not signed by the scope owner",
            ))
        }
    }

    /// Whether `self` supersedes `other` (both of one scope).
    pub fn newer_than(&self, other: &Attestation) -> bool {
        (self.hlc, self.sig) > (other.hlc, other.sig)
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u8(FORMAT);
        self.scope.encode(w);
        w.u64le(self.hlc);
        w.varint(self.heads.len() as u64);
        for (a, (seq, hash)) in &self.heads {
            w.raw(&a.0);
            w.varint(*seq);
            w.raw(hash);
        }
        w.raw(&self.digest);
        w.raw(&self.sig);
    }

    pub fn decode(r: &mut Reader) -> Result<Attestation> {
        if r.u8()? != FORMAT {
            return Err(Error::Malformed("unknown attestation format".into()));
        }
        let scope = ScopeId::decode(r)?;
        let hlc = r.u64le()?;
        let n = r.count(65, 1 << 20)?;
        let mut heads = ScopeHeads::new();
        for _ in 0..n {
            let a = AuthorId(r.array()?);
            let seq = r.varint()?;
            let hash = r.array()?;
            if seq == 0 || heads.insert(a, (seq, hash)).is_some() {
                return Err(Error::Malformed(
                    "attestation head repeated or empty".into(),
                ));
            }
        }
        let digest = r.array()?;
        let sig = r.array()?;
        Ok(Attestation {
            scope,
            hlc,
            heads,
            digest,
            sig,
        })
    }
}

/// The digest an attestation signs: the rows given (all of one scope), in the order of table
/// then pk encoding.
pub fn rows_digest<'a>(rows: impl IntoIterator<Item = (&'a RowKey, &'a RowState)>) -> Hash {
    let mut sorted: Vec<_> = rows.into_iter().collect();
    sorted.sort_unstable_by(|a, b| (&a.0.table, &a.0.pk).cmp(&(&b.0.table, &b.0.pk)));
    let mut h = blake3::Hasher::new();
    h.update(ROWS_TAG);
    let mut w = Writer::new();
    for (k, row) in sorted {
        w.buf.clear();
        w.bytes(k.table.as_bytes());
        w.raw(&k.pk);
        row.encode(&mut w);
        h.update(&w.buf);
    }
    *h.finalize().as_bytes()
}

/// The rows of `scope` in `rows`.
pub(crate) fn scope_rows<'a>(
    rows: &'a MemoryRows,
    scope: &'a ScopeId,
) -> impl Iterator<Item = (&'a RowKey, &'a RowState)> + 'a {
    rows.iter().filter(move |(k, _)| k.scope == *scope)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Reader;

    #[test]
    fn a_changed_byte_breaks_the_signature_or_the_format() {
        let owner = Identity::from_secret([7; 32]);
        let scope = ScopeId::new(owner.id(), "notes");
        let mut heads = ScopeHeads::new();
        heads.insert(owner.id(), (4, [9; 32]));
        let a = Attestation::sign(&owner, scope, 1234, heads, [5; 32]);
        a.check().unwrap();
        let mut w = Writer::new();
        a.encode(&mut w);
        let bytes = w.buf;
        let back = Attestation::decode(&mut Reader::new(&bytes)).unwrap();
        assert_eq!(back, a);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            let mut r = Reader::new(&b);
            if let Ok(x) = Attestation::decode(&mut r) {
                assert!(
                    r.finish().is_err() || x.check().is_err(),
                    "a flip at byte {i} still verifies"
                );
            }
        }
    }

    #[test]
    fn the_digest_does_not_depend_on_the_order_rows_are_given() {
        let owner = Identity::from_secret([3; 32]);
        let scope = ScopeId::new(owner.id(), "t");
        let mut rows = MemoryRows::default();
        for i in 0..5i64 {
            let k = RowKey::new("t", &scope, &[crate::Value::Integer(i)]);
            rows.insert(k, RowState::default());
        }
        let mut listed: Vec<_> = rows.iter().collect();
        let d1 = rows_digest(listed.iter().copied());
        listed.reverse();
        assert_eq!(d1, rows_digest(listed.iter().copied()));
        let fewer: Vec<_> = listed.iter().copied().skip(1).collect();
        assert_ne!(d1, rows_digest(fewer));
    }
}
