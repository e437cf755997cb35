//! The module's start function and the panic hook.

use js_sys::Reflect;
use wasm_bindgen::prelude::*;

/// Installs the panic hook: the message is left on the global scope as `__cairnPanic` before the
/// module traps, so the Worker can report it with code `INTERNAL`.
#[wasm_bindgen(start)]
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        let _ = Reflect::set(
            &js_sys::global(),
            &"__cairnPanic".into(),
            &info.to_string().into(),
        );
    }));
}

/// Panics on purpose, so tests can see how the Worker reports a panic.
#[wasm_bindgen(js_name = debugPanic)]
pub fn debug_panic(message: String) {
    panic!("{message}");
}
