//! `account`: what each function of a module costs and where the split puts it, by name.
//!
//! The shipped module has no names (wasm-bindgen's `--remove-name-section`). A second copy built
//! from the same linked module with its names kept (`wasm-opt -g` with the same options) has the
//! same functions, index for index, and all but a few of the same size; `account` checks that,
//! then writes one line a defined function, tab-separated:
//!
//! ```text
//! index  bytes  kept  cold  name
//! ```
//!
//! `bytes` is the body's size in IN, `kept` 1 when the run reached it (it stays in the primary
//! module) and 0 when it moves to the rest, `cold` the bytes of its regions that `outline` moves
//! to the rest (0 for a function that moves whole). The sizes are before the last `wasm-opt` and
//! before compression: `scripts/size-account.mjs` sums them by crate.

use std::collections::BTreeSet;

use wasmparser as wp;

use crate::{cold_regions, outline, parse, read, read_hits, Result, MIN_REGION};

pub fn account(input: &str, named: &str, funcs: &str, regions: &str, out: &str) -> Result<()> {
    let bytes = read(input)?;
    let named_bytes = read(named)?;
    let p = parse(&bytes)?;
    let n = parse(&named_bytes)?;
    let defined = p.bodies.len();
    if n.bodies.len() != defined || n.imported_funcs != p.imported_funcs {
        return Err(format!(
            "{named} has {} functions ({} imported), {input} {defined} ({})",
            n.bodies.len(),
            n.imported_funcs,
            p.imported_funcs
        ));
    }
    let size = |b: &wp::FunctionBody| b.range().end - b.range().start;
    // wasm-opt's choices depend on names in a few places (which of two equal functions stays,
    // the order of some work lists), so a few bodies differ by some bytes; the count and the
    // order of the functions are the same. Many differing would mean another module.
    let differ = (0..defined)
        .filter(|&i| size(&p.bodies[i]) != size(&n.bodies[i]))
        .count();
    if differ * 10 > defined {
        return Err(format!(
            "{differ} of {defined} functions differ between {input} and {named}"
        ));
    }
    let names = function_names(&named_bytes)?;
    let hit_funcs = read_hits(funcs, defined)?;
    let hit_regions: BTreeSet<usize> = read_hits(regions, usize::MAX)?;
    let types = outline::Types::read(p.types.as_ref())?;
    let mut stats = outline::Stats::default();
    let cold = cold_regions(
        &bytes,
        &p,
        &types,
        &hit_funcs,
        &hit_regions,
        MIN_REGION,
        &mut stats,
    )?;
    let mut text = String::from("index\tbytes\tkept\tcold\tname\n");
    for (i, (o, chosen)) in cold.iter().enumerate() {
        let moved: usize = chosen
            .iter()
            .map(|(r, _)| o.at[r.end] - o.at[r.start])
            .sum();
        let index = p.imported_funcs as usize + i;
        let name = names.get(&(index as u32)).map_or("", String::as_str);
        let kept = u8::from(hit_funcs.contains(&i));
        text.push_str(&format!(
            "{i}\t{}\t{kept}\t{moved}\t{name}\n",
            size(&p.bodies[i])
        ));
    }
    std::fs::write(out, text).map_err(crate::err(out))
}

/// The function names of a module's `name` section, by function index.
fn function_names(bytes: &[u8]) -> Result<std::collections::HashMap<u32, String>> {
    let e = |e: wp::BinaryReaderError| e.to_string();
    let mut names = std::collections::HashMap::new();
    for payload in wp::Parser::new(0).parse_all(bytes) {
        if let wp::Payload::CustomSection(c) = payload.map_err(e)? {
            if let wp::KnownCustom::Name(reader) = c.as_known() {
                for sub in reader {
                    if let wp::Name::Function(map) = sub.map_err(e)? {
                        for naming in map {
                            let naming = naming.map_err(e)?;
                            names.insert(naming.index, naming.name.replace(['\t', '\n'], " "));
                        }
                    }
                }
            }
        }
    }
    if names.is_empty() {
        return Err("the named module has no function names".into());
    }
    Ok(names)
}
