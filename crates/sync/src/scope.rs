//! Scopes: the unit of authorization, chaining and subscription (docs/sync.md sec. 8). A scope's
//! owner signs the list of other keys allowed to write to it.

use crate::error::{Error, Reason, Result};
use crate::identity::{AuthorId, Identity};
use crate::wire::{Reader, Writer};

pub const MAX_SCOPE_NAME: usize = 1024;
pub const WRITERS_FORMAT: u8 = 1;
/// A writer list that also removes writers (docs/sync.md sec. 8, "Revocation").
pub const WRITERS_FORMAT_V2: u8 = 2;
const WRITERS_TAG: &[u8] = b"cairn-sync writers v1";
const WRITERS_TAG_V2: &[u8] = b"cairn-sync writers v2";

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopeId {
    pub owner: AuthorId,
    pub name: Vec<u8>,
}

impl ScopeId {
    pub fn new(owner: AuthorId, name: impl AsRef<[u8]>) -> ScopeId {
        ScopeId {
            owner,
            name: name.as_ref().to_vec(),
        }
    }
    pub fn encode(&self, w: &mut Writer) {
        w.raw(&self.owner.0);
        w.bytes(&self.name);
    }
    pub fn decode(r: &mut Reader) -> Result<ScopeId> {
        let owner = AuthorId(r.array()?);
        let name = r.bytes()?;
        if name.len() > MAX_SCOPE_NAME {
            return Err(Error::Malformed("scope name too long".into()));
        }
        Ok(ScopeId {
            owner,
            name: name.to_vec(),
        })
    }
}

/// What a replica asks for: scopes whose owner matches (if given) and whose name starts with
/// `prefix`. By convention a scope is named `<table>` or `<table>/<column>=<value>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeFilter {
    pub owner: Option<AuthorId>,
    pub prefix: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Subscription {
    #[default]
    All,
    Filters(Vec<ScopeFilter>),
}

impl Subscription {
    pub fn covers(&self, scope: &ScopeId) -> bool {
        match self {
            Subscription::All => true,
            Subscription::Filters(fs) => fs.iter().any(|f| {
                (f.owner.is_none() || f.owner == Some(scope.owner))
                    && scope.name.starts_with(&f.prefix)
            }),
        }
    }
    pub fn encode(&self, w: &mut Writer) {
        match self {
            Subscription::All => w.u8(0),
            Subscription::Filters(fs) => {
                w.u8(1);
                w.varint(fs.len() as u64);
                for f in fs {
                    match f.owner {
                        Some(o) => {
                            w.u8(1);
                            w.raw(&o.0);
                        }
                        None => w.u8(0),
                    }
                    w.bytes(&f.prefix);
                }
            }
        }
    }
    pub fn decode(r: &mut Reader) -> Result<Subscription> {
        match r.u8()? {
            0 => Ok(Subscription::All),
            1 => {
                let n = r.count(2, 4096)?;
                let mut fs = Vec::with_capacity(n);
                for _ in 0..n {
                    let owner = match r.u8()? {
                        0 => None,
                        1 => Some(AuthorId(r.array()?)),
                        _ => return Err(Error::Malformed("bad filter owner flag".into())),
                    };
                    let prefix = r.bytes()?;
                    if prefix.len() > MAX_SCOPE_NAME {
                        return Err(Error::Malformed("filter prefix too long".into()));
                    }
                    fs.push(ScopeFilter {
                        owner,
                        prefix: prefix.to_vec(),
                    });
                }
                Ok(Subscription::Filters(fs))
            }
            _ => Err(Error::Malformed("bad subscription tag".into())),
        }
    }
}

/// The keys besides the owner allowed to write to a scope, signed by the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterList {
    pub scope: ScopeId,
    pub version: u64,
    pub writers: Vec<AuthorId>,
    /// Writers removed by this list, each with the last seq of its chain in the scope that
    /// stays valid (docs/sync.md sec. 8, "Revocation"). A list with removals is format 2.
    pub removed: Vec<(AuthorId, u64)>,
    pub sig: [u8; 64],
}

impl WriterList {
    fn message(
        scope: &ScopeId,
        version: u64,
        writers: &[AuthorId],
        removed: &[(AuthorId, u64)],
    ) -> Vec<u8> {
        let mut w = Writer::new();
        w.raw(if removed.is_empty() {
            WRITERS_TAG
        } else {
            WRITERS_TAG_V2
        });
        scope.encode(&mut w);
        w.u64le(version);
        w.u64le(writers.len() as u64);
        for a in writers {
            w.raw(&a.0);
        }
        if !removed.is_empty() {
            w.u64le(removed.len() as u64);
            for (a, cut) in removed {
                w.raw(&a.0);
                w.u64le(*cut);
            }
        }
        w.buf
    }

    /// Signs a list for a scope `owner` owns that also removes writers, each with the last seq
    /// of its chain in the scope that stays valid.
    pub fn sign_removing(
        owner: &Identity,
        name: impl AsRef<[u8]>,
        version: u64,
        writers: Vec<AuthorId>,
        removed: Vec<(AuthorId, u64)>,
    ) -> WriterList {
        let scope = ScopeId::new(owner.id(), name);
        let sig = owner.sign(&Self::message(&scope, version, &writers, &removed));
        WriterList {
            scope,
            version,
            writers,
            removed,
            sig,
        }
    }

    /// Signs a list for a scope `owner` owns.
    pub fn sign(
        owner: &Identity,
        name: impl AsRef<[u8]>,
        version: u64,
        writers: Vec<AuthorId>,
    ) -> WriterList {
        Self::sign_removing(owner, name, version, writers, Vec::new())
    }

    pub fn check(&self) -> Result<()> {
        if self.scope.owner.verify(
            &Self::message(&self.scope, self.version, &self.writers, &self.removed),
            &self.sig,
        ) {
            Ok(())
        } else {
            Err(Error::reject(
                Reason::BadSignature,
                "writer list not signed by the scope owner",
            ))
        }
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u8(if self.removed.is_empty() {
            WRITERS_FORMAT
        } else {
            WRITERS_FORMAT_V2
        });
        self.scope.encode(w);
        w.varint(self.version);
        w.varint(self.writers.len() as u64);
        for a in &self.writers {
            w.raw(&a.0);
        }
        if !self.removed.is_empty() {
            w.varint(self.removed.len() as u64);
            for (a, cut) in &self.removed {
                w.raw(&a.0);
                w.varint(*cut);
            }
        }
        w.raw(&self.sig);
    }

    pub fn decode(r: &mut Reader) -> Result<WriterList> {
        let format = r.u8()?;
        if format != WRITERS_FORMAT && format != WRITERS_FORMAT_V2 {
            return Err(Error::Malformed("unsupported writer list format".into()));
        }
        let scope = ScopeId::decode(r)?;
        let version = r.varint()?;
        let n = r.count(32, 1 << 16)?;
        let mut writers = Vec::with_capacity(n);
        for _ in 0..n {
            writers.push(AuthorId(r.array()?));
        }
        let mut removed = Vec::new();
        if format == WRITERS_FORMAT_V2 {
            let m = r.count(33, 1 << 16)?;
            if m == 0 {
                return Err(Error::Malformed(
                    "a format 2 writer list removes no one".into(),
                ));
            }
            for _ in 0..m {
                removed.push((AuthorId(r.array()?), r.varint()?));
            }
        }
        let sig = r.array()?;
        Ok(WriterList {
            scope,
            version,
            writers,
            removed,
            sig,
        })
    }
}
