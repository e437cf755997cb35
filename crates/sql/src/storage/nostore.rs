//! A store with nothing in it.

use super::{Cursor, StorageCore, TreeId};
use crate::error::{Error, Result};
use std::ops::Bound;

/// A store with nothing in it, for evaluating expressions that cannot reach one (an UPDATE's or
/// DELETE's filters and new values, without subqueries, run inside the store's own write). Every
/// call is an error. Not `Memory::default()`: that would build the whole in-memory store, and
/// the `BTreeMap` code under it, into every module that uses the paged one (12.6 KiB of the wasm
/// module, gzipped).
pub(crate) struct NoStore;

#[cold]
#[inline(never)]
fn no_store() -> Error {
    Error::Invalid("no storage in this context".into())
}

impl StorageCore for NoStore {
    fn begin(&mut self) -> Result<()> {
        Err(no_store())
    }
    fn commit(&mut self) -> Result<()> {
        Err(no_store())
    }
    fn rollback(&mut self) -> Result<()> {
        Err(no_store())
    }
    fn savepoint(&mut self) -> Result<u64> {
        Err(no_store())
    }
    fn rollback_to(&mut self, _sp: u64) -> Result<()> {
        Err(no_store())
    }
    fn create_tree(&mut self, _tree: TreeId) -> Result<()> {
        Err(no_store())
    }
    fn drop_tree(&mut self, _tree: TreeId) -> Result<()> {
        Err(no_store())
    }
    fn get(&self, _tree: TreeId, _key: &[u8]) -> Result<Option<Vec<u8>>> {
        Err(no_store())
    }
    fn put(&mut self, _tree: TreeId, _key: &[u8], _value: &[u8]) -> Result<()> {
        Err(no_store())
    }
    fn delete(&mut self, _tree: TreeId, _key: &[u8]) -> Result<bool> {
        Err(no_store())
    }
    fn scan<'a>(
        &'a self,
        _tree: TreeId,
        _lower: Bound<&[u8]>,
        _upper: Bound<&[u8]>,
        _reverse: bool,
    ) -> Result<Box<dyn Cursor + 'a>> {
        Err(no_store())
    }
    fn last_key(&self, _tree: TreeId) -> Result<Option<Vec<u8>>> {
        Err(no_store())
    }
}

/// `impl Storage for $ty` that refuses each of the trait's bulk methods with `$err()`: a store
/// that only serves point reads and writes. Overriding them keeps the trait's defaults from being
/// compiled for the type too.
macro_rules! refuse_bulk_storage {
    ($ty:ty, $err:path) => {
        impl $crate::storage::Storage for $ty {
            fn scan_each(
                &self,
                _tree: $crate::storage::TreeId,
                _lower: std::ops::Bound<&[u8]>,
                _upper: std::ops::Bound<&[u8]>,
                _reverse: bool,
                _f: &mut $crate::storage::EntryFn,
            ) -> $crate::error::Result<bool> {
                Err($err())
            }
            fn scan_each_past(
                &self,
                _tree: $crate::storage::TreeId,
                _lower: std::ops::Bound<&[u8]>,
                _upper: std::ops::Bound<&[u8]>,
                _reverse: bool,
                _skip: &mut u64,
                _f: &mut $crate::storage::EntryFn,
            ) -> $crate::error::Result<bool> {
                Err($err())
            }
            fn update_each(
                &mut self,
                _tree: $crate::storage::TreeId,
                _lower: std::ops::Bound<&[u8]>,
                _upper: std::ops::Bound<&[u8]>,
                _f: &mut $crate::storage::Rewrite<'_>,
            ) -> $crate::error::Result<u64> {
                Err($err())
            }
            fn put_new(
                &mut self,
                _tree: $crate::storage::TreeId,
                _key: &[u8],
                _value: &[u8],
            ) -> $crate::error::Result<bool> {
                Err($err())
            }
            fn put_new_or_rewrite(
                &mut self,
                _tree: $crate::storage::TreeId,
                _key: &[u8],
                _value: &[u8],
                _f: &mut $crate::storage::Rewrite<'_>,
            ) -> $crate::error::Result<Option<$crate::storage::Each>> {
                Err($err())
            }
        }
    };
}
pub(crate) use refuse_bulk_storage;

refuse_bulk_storage!(NoStore, no_store);
