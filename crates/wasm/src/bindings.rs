//! The module's start function and the panic hook, and what the Worker needs to take OPFS
//! handles itself (it does the asynchronous part, so the engine has none).

use cairn_store::OpfsFile;
use wasm_bindgen::prelude::*;

use crate::database::store_error;

#[wasm_bindgen]
extern "C" {
    /// The Worker's (worker/engine.js): keeps a panic's message for the report after the trap.
    /// A function of the global scope rather than a property set on it: finding the global
    /// object from wasm takes js-sys's lookup of `globalThis`, `self`, `window` and `global`.
    #[wasm_bindgen(js_namespace = globalThis, js_name = __cairnPanicked)]
    fn panicked(message: &str);
}

/// Installs the panic hook: the message goes to the Worker before the module traps, so the
/// Worker can report it with code `INTERNAL`.
#[wasm_bindgen(start)]
pub fn start() {
    std::panic::set_hook(Box::new(|info| panicked(&info.to_string())));
}

#[wasm_bindgen]
extern "C" {
    /// `crypto.getRandomValues`, which Workers and pages have (secure contexts or not).
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues, catch)]
    fn get_random_values(buf: &mut [u8]) -> Result<JsValue, JsValue>;
}

/// The source of every random byte the module draws (the random seed of `random()` and
/// `uuid7()`, and with sync the key pair): `crypto.getRandomValues`, 65,536 bytes a call at most.
fn fill_random(buf: &mut [u8]) -> Result<(), getrandom::Error> {
    for chunk in buf.chunks_mut(65536) {
        if get_random_values(chunk).is_err() {
            return Err(getrandom::Error::WEB_CRYPTO);
        }
    }
    Ok(())
}
getrandom::register_custom_getrandom!(fill_random);

/// Refuses a database name OPFS would refuse, or that would escape cairn's directory.
#[wasm_bindgen(js_name = checkName)]
pub fn check_name(name: &str) -> Result<(), JsValue> {
    OpfsFile::check_name(name).map_err(store_error)
}

/// The error, with its stable code, for what an OPFS call on the file `name` threw or rejected
/// with.
#[wasm_bindgen(js_name = opfsError)]
pub fn opfs_error(e: JsValue, name: &str) -> JsValue {
    store_error(OpfsFile::error_from_js(e, name))
}

/// Panics on purpose, so tests can see how the Worker reports a panic. Not in the plain shipped
/// module, whose Worker script is the test build's with the test ops left out; in the sync
/// module, whose panics the sync tests make.
#[cfg(any(feature = "sync", feature = "testing"))]
#[wasm_bindgen(js_name = debugPanic)]
pub fn debug_panic(message: String) {
    panic!("{message}");
}
