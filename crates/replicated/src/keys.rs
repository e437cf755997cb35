//! Where a database's secret key is kept: a key store the host provides, outside the database
//! file, so that the file's bytes (an export, a copy, a backup) never carry the secret
//! (docs/sync.md 10b, "The key pair, kept outside the file"). The database itself names only
//! its author (the public key), and a key store's key is used only when it is that author's.

use cairn_sql::{Error, Result};
use cairn_store::BlockFile;
use std::cell::RefCell;
use std::rc::Rc;

/// A place for one key pair, in the `cairn-key` export format (`Identity::export`). `save` is
/// durable when it returns: the sync layer calls it inside the storage transaction that names
/// the key's author, before that transaction commits.
pub trait KeyStore {
    /// The bytes saved, or None when nothing is (bytes that are not a key are the caller's to
    /// judge: it then takes a new key).
    fn load(&mut self) -> Result<Option<Vec<u8>>>;
    /// Replaces what is saved with `key`.
    fn save(&mut self, key: &[u8]) -> Result<()>;
}

/// A key store in memory, for tests and for hosts that keep keys elsewhere (a keychain) and
/// hand them over. Clones share the key: a test keeps one to reopen the database "on the same
/// device", or to look at what was saved.
#[derive(Clone, Default)]
pub struct MemoryKeys(Rc<RefCell<Option<Vec<u8>>>>);

impl MemoryKeys {
    pub fn new() -> MemoryKeys {
        MemoryKeys::default()
    }
    /// What is saved.
    pub fn get(&self) -> Option<Vec<u8>> {
        self.0.borrow().clone()
    }
}

impl KeyStore for MemoryKeys {
    fn load(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.get())
    }
    fn save(&mut self, key: &[u8]) -> Result<()> {
        *self.0.borrow_mut() = Some(key.to_vec());
        Ok(())
    }
}

/// A key store in a file of its own: empty when no key is saved, else the key's bytes. In the
/// browser the file is an OPFS file the Worker opened (`cairn-keys/<name>`); natively,
/// [`FileKeys::beside`] a database file.
pub struct FileKeys<F: BlockFile>(F);

impl<F: BlockFile> FileKeys<F> {
    pub fn new(file: F) -> FileKeys<F> {
        FileKeys(file)
    }
    pub fn into_file(self) -> F {
        self.0
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl FileKeys<cairn_store::StdFile> {
    /// The key file of the database file at `path`: `<path>-key`, created empty if absent.
    pub fn beside(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let mut p = path.as_ref().as_os_str().to_owned();
        p.push("-key");
        Ok(FileKeys(cairn_store::StdFile::open(p, true)?))
    }
}

/// A key's export is 46 bytes: more than this is not one, and is not read whole.
const MOST: u64 = 4096;

impl<F: BlockFile> KeyStore for FileKeys<F> {
    fn load(&mut self) -> Result<Option<Vec<u8>>> {
        let len = self.0.len()?;
        if len == 0 {
            return Ok(None);
        }
        // Longer than any key: handed on as bytes that are not a key, unread.
        let mut buf = vec![0; len.min(MOST) as usize];
        self.0.read(0, &mut buf)?;
        Ok(Some(buf))
    }
    fn save(&mut self, key: &[u8]) -> Result<()> {
        if key.is_empty() {
            return Err(Error::Sync("SYNC_BAD_KEY", "an empty key".into()));
        }
        self.0.write(0, key)?;
        self.0.set_len(key.len() as u64)?;
        self.0.flush()?;
        Ok(())
    }
}
