//! Opening, removing and listing cairn's OPFS files from Rust, asynchronously (the
//! `async-opfs` feature: the browser tests of the storage layer use it; the shipped module takes
//! its handle in JavaScript, `OpfsFile::from_handle`, and so carries no futures runtime).

use js_sys::{Object, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    FileSystemDirectoryHandle, FileSystemFileHandle, FileSystemGetDirectoryOptions,
    FileSystemGetFileOptions, WorkerGlobalScope,
};

use crate::error::{Error, Result};
use crate::opfs::{check_name, js_error, OpfsFile};

/// The OPFS directory that holds cairn's files (the Worker's script names the same).
pub const DIR: &str = "cairn";

/// The directory all cairn files live in, created on first use.
async fn directory() -> Result<FileSystemDirectoryHandle> {
    let scope: WorkerGlobalScope = js_sys::global()
        .dyn_into()
        .map_err(|_| Error::Io("OPFS block files need a dedicated Worker".into()))?;
    let root = JsFuture::from(scope.navigator().storage().get_directory())
        .await
        .map_err(|e| js_error(e, "/"))?;
    let root: FileSystemDirectoryHandle = root.unchecked_into();
    let opts = FileSystemGetDirectoryOptions::new();
    opts.set_create(true);
    let dir = JsFuture::from(root.get_directory_handle_with_options(DIR, &opts))
        .await
        .map_err(|e| js_error(e, DIR))?;
    Ok(dir.unchecked_into())
}

impl OpfsFile {
    /// Opens `name` in cairn's OPFS directory, creating it when `create` is set, and takes its
    /// exclusive sync access handle.
    pub async fn open(name: &str, create: bool) -> Result<Self> {
        check_name(name)?;
        let dir = directory().await?;
        let opts = FileSystemGetFileOptions::new();
        opts.set_create(create);
        let file = JsFuture::from(dir.get_file_handle_with_options(name, &opts))
            .await
            .map_err(|e| js_error(e, name))?;
        let file: FileSystemFileHandle = file.unchecked_into();
        let handle = JsFuture::from(file.create_sync_access_handle())
            .await
            .map_err(|e| js_error(e, name))?;
        Ok(Self::from_handle(handle, name))
    }

    /// Deletes `name` from cairn's OPFS directory. Fails with `Busy` while a handle is open.
    pub async fn remove(name: &str) -> Result<()> {
        check_name(name)?;
        let dir = directory().await?;
        JsFuture::from(dir.remove_entry(name))
            .await
            .map_err(|e| js_error(e, name))?;
        Ok(())
    }

    /// The names of every file in cairn's OPFS directory.
    pub async fn list() -> Result<Vec<String>> {
        let dir = directory().await?;
        let iter = dir.keys();
        let mut names = Vec::new();
        loop {
            let next = JsFuture::from(iter.next().map_err(|e| js_error(e, DIR))?)
                .await
                .map_err(|e| js_error(e, DIR))?;
            let next: Object = next.unchecked_into();
            let done = Reflect::get(&next, &"done".into()).unwrap_or(JsValue::TRUE);
            if done.is_truthy() {
                break;
            }
            if let Some(name) = Reflect::get(&next, &"value".into())
                .ok()
                .and_then(|v| v.as_string())
            {
                names.push(name);
            }
        }
        crate::sort::sort(&mut names);
        Ok(names)
    }
}
