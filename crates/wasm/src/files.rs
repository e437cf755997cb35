//! The storage layer's block files over OPFS, and the block-file conformance suite, for the
//! browser tests: built only with the `testing` feature (`dist/test/`), so the module a page
//! downloads does not carry them. Open files are kept in a table indexed by small integer
//! handles, since a Rust value cannot cross to JavaScript by reference cheaply.

use std::cell::RefCell;

use cairn_store::conformance;
use cairn_store::{BlockFile, Error, OpfsFile};
use js_sys::Uint8Array;
use wasm_bindgen::prelude::*;

thread_local! {
    static FILES: RefCell<Vec<Option<OpfsFile>>> = const { RefCell::new(Vec::new()) };
}

use crate::database::store_error as to_js;

/// Converts a JavaScript number to a file offset, refusing what is not a whole non-negative number.
fn offset(v: f64, what: &str) -> Result<u64, JsValue> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_991.0 {
        Ok(v as u64)
    } else {
        Err(to_js(Error::InvalidInput(format!(
            "{what} must be a whole number >= 0, not {v}"
        ))))
    }
}

fn with_file<T>(
    handle: u32,
    f: impl FnOnce(&mut OpfsFile) -> cairn_store::Result<T>,
) -> Result<T, JsValue> {
    FILES.with(|files| {
        let mut files = files.borrow_mut();
        match files.get_mut(handle as usize).and_then(Option::as_mut) {
            Some(file) => f(file).map_err(to_js),
            None => Err(to_js(Error::InvalidInput(format!(
                "no open file has handle {handle}"
            )))),
        }
    })
}

/// Opens (or with `create`, creates) an OPFS file and returns its handle number.
#[wasm_bindgen(js_name = fileOpen)]
pub async fn file_open(name: String, create: bool) -> Result<u32, JsValue> {
    let file = OpfsFile::open(&name, create).await.map_err(to_js)?;
    Ok(FILES.with(|files| {
        let mut files = files.borrow_mut();
        match files.iter().position(Option::is_none) {
            Some(i) => {
                files[i] = Some(file);
                i as u32
            }
            None => {
                files.push(Some(file));
                (files.len() - 1) as u32
            }
        }
    }))
}

#[wasm_bindgen(js_name = fileRead)]
pub fn file_read(handle: u32, at: f64, len: u32) -> Result<Uint8Array, JsValue> {
    let at = offset(at, "offset")?;
    with_file(handle, |f| {
        let mut buf = vec![0u8; len as usize];
        f.read(at, &mut buf)?;
        Ok(Uint8Array::from(&buf[..]))
    })
}

#[wasm_bindgen(js_name = fileWrite)]
pub fn file_write(handle: u32, at: f64, data: &[u8]) -> Result<(), JsValue> {
    let at = offset(at, "offset")?;
    with_file(handle, |f| f.write(at, data))
}

#[wasm_bindgen(js_name = fileLen)]
pub fn file_len(handle: u32) -> Result<f64, JsValue> {
    with_file(handle, |f| f.len().map(|n| n as f64))
}

#[wasm_bindgen(js_name = fileSetLen)]
pub fn file_set_len(handle: u32, len: f64) -> Result<(), JsValue> {
    let len = offset(len, "length")?;
    with_file(handle, |f| f.set_len(len))
}

#[wasm_bindgen(js_name = fileFlush)]
pub fn file_flush(handle: u32) -> Result<(), JsValue> {
    with_file(handle, |f| f.flush())
}

/// Closes the file and frees its handle number.
#[wasm_bindgen(js_name = fileClose)]
pub fn file_close(handle: u32) -> Result<(), JsValue> {
    with_file(handle, |f| f.close())?;
    FILES.with(|files| files.borrow_mut()[handle as usize] = None);
    Ok(())
}

#[wasm_bindgen(js_name = fileRemove)]
pub async fn file_remove(name: String) -> Result<(), JsValue> {
    OpfsFile::remove(&name).await.map_err(to_js)
}

#[wasm_bindgen(js_name = fileList)]
pub async fn file_list() -> Result<Vec<String>, JsValue> {
    OpfsFile::list().await.map_err(to_js)
}

/// The names of the block-file conformance cases.
#[wasm_bindgen(js_name = conformanceCases)]
pub fn conformance_cases() -> Vec<String> {
    conformance::CASES
        .iter()
        .map(|(n, _)| n.to_string())
        .collect()
}

/// Runs one conformance case over a fresh OPFS file named `file`; resolves to `null` when it
/// passes and to the reason when it fails. The file is removed afterwards.
#[wasm_bindgen(js_name = conformanceRun)]
pub async fn conformance_run(case: String, file: String) -> Result<Option<String>, JsValue> {
    let _ = OpfsFile::remove(&file).await;
    let mut f = OpfsFile::open(&file, true).await.map_err(to_js)?;
    let outcome = conformance::run_case(&case, &mut f);
    drop(f);
    OpfsFile::remove(&file).await.map_err(to_js)?;
    Ok(outcome.err())
}
