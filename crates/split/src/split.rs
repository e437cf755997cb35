//! `split`: the module cut in two by a run's hits (see the crate doc): the functions kept in
//! the primary module, the others moved to the rest behind stubs, the copies of small kept
//! functions the rest calls (`copied`), and the constants only moved functions use (`data`).

use std::borrow::Cow;
use std::collections::BTreeSet;

use wasm_encoder as we;
use wasm_encoder::reencode::Reencode;
use wasmparser as wp;

use crate::{
    active_segments, call_counts, copy, data, err, func_export, parse, re, read, read_hits, refs,
    rewrite, write, Additions, Parsed, Refs, Remap, Result, Same,
};

/// The primary module's data segments and the rest's: the constants (by the linker map `map`)
/// that only the moved functions use go to the rest (see `data`).
#[allow(clippy::type_complexity)]
fn split_data(
    p: &Parsed,
    keep: &BTreeSet<usize>,
    map: &str,
) -> Result<(Option<Vec<(u32, Vec<u8>)>>, Vec<(u32, Vec<u8>)>)> {
    let segments = active_segments(p).map_err(|e| format!("{e}: the data cannot be split"))?;
    let objects = data::cut_strings(data::read_map(map)?, &data::internal_chunks(map), &segments);
    // What the kept functions name, and the globals' initial values.
    let nimp = p.imported_funcs;
    let params = |i: usize| p.params[p.func_types[nimp as usize + i] as usize] as usize;
    let masks = data::free_params(&p.bodies, &|i| keep.contains(&i), &params, nimp)?;
    let free = |f: u32| {
        let d = f.checked_sub(nimp)? as usize;
        Some((params(d), masks[d]))
    };
    let mut named = Vec::new();
    for (i, body) in p.bodies.iter().enumerate() {
        if keep.contains(&i) {
            data::named(body, &free, &mut named)?;
        }
    }
    if let Some(g) = p.global_section.clone() {
        for g in g {
            let g = g.map_err(|e| e.to_string())?;
            if let Ok(wp::Operator::I32Const { value }) = g.init_expr.get_operators_reader().read()
            {
                named.push(data::Named::Base(value as u32));
            }
        }
    }
    let stay = data::staying(&objects, &segments, &named);
    let runs = data::runs(&objects, &stay);
    // Each segment less the runs; each run's bytes for the rest.
    let mut primary = Vec::new();
    let mut rest = Vec::new();
    let mut moved = 0;
    for s in &segments {
        let end = s.at + s.bytes.len() as u32;
        let mut at = s.at;
        for r in runs.iter().filter(|r| r.start < end && r.end > s.at) {
            let (from, to) = (r.start.max(s.at), r.end.min(end));
            if from > at {
                primary.push((
                    at,
                    s.bytes[(at - s.at) as usize..(from - s.at) as usize].to_vec(),
                ));
            }
            rest.push((
                from,
                s.bytes[(from - s.at) as usize..(to - s.at) as usize].to_vec(),
            ));
            moved += to - from;
            at = to;
        }
        if end > at {
            primary.push((at, s.bytes[(at - s.at) as usize..].to_vec()));
        }
    }
    let total: usize = segments.iter().map(|s| s.bytes.len()).sum();
    eprintln!(
        "cairn-split: {moved} of {total} bytes of data moved ({} of {} constants, in {} runs)",
        stay.iter().filter(|s| !**s).count(),
        objects.len(),
        runs.len()
    );
    Ok((Some(primary), rest))
}

/// A kept function the rest calls costs the primary module an entry in the table through which
/// the rest calls it (about 2.4 bytes of its gzip each, `tabled`, since it is exported to the
/// primary's `wasm-opt` as well). Where that function and every kept function it calls, and they
/// call, come to at most this many bytes, the rest gets a copy of them instead and calls those.
/// The copies cost the rest about seventeen bytes for each byte they take off the primary
/// (docs/size.md, "Copies in the rest", has the table): they are there for the opening
/// download's budget.
pub(crate) const COPY_BYTES: usize = 2000;

/// The kept functions (by index among the defined ones) that the rest gets a copy of: for
/// each kept function a moved one calls, its closure over the kept functions it calls, when the
/// closure's bodies come to `limit` bytes or less. A function a moved one takes a reference to
/// is not copied (the copy would be another function), nor one that names a segment, nor one
/// whose closure does either. Calls from a copy to moved functions are calls within the rest.
pub(crate) fn copied(
    p: &Parsed,
    keep: &BTreeSet<usize>,
    moved: &[usize],
    body_refs: &[Refs],
    is_moved: &dyn Fn(u32) -> bool,
    limit: usize,
) -> BTreeSet<usize> {
    let nimp = p.imported_funcs;
    let defined = |f: u32| f.checked_sub(nimp).map(|d| d as usize);
    let taken: BTreeSet<u32> = moved
        .iter()
        .flat_map(|&i| body_refs[i].taken.iter().copied())
        .collect();
    let called: BTreeSet<usize> = (moved.iter())
        .flat_map(|&i| body_refs[i].funcs.iter().copied())
        .filter(|&f| !is_moved(f) && !taken.contains(&f))
        .filter_map(defined)
        .collect();
    // The closure of `c`, or None once it is too large or holds what is not copied (a
    // function that names a segment, takes a reference, or calls an import).
    let closure = |c: usize| -> Option<BTreeSet<usize>> {
        let mut seen = BTreeSet::from([c]);
        let mut todo = vec![c];
        let mut bytes = 0;
        while let Some(f) = todo.pop() {
            bytes += p.bodies[f].as_bytes().len();
            if bytes > limit || body_refs[f].segments || !body_refs[f].taken.is_empty() {
                return None;
            }
            for &g in &body_refs[f].funcs {
                let d = defined(g)?;
                if keep.contains(&d) && seen.insert(d) {
                    todo.push(d);
                }
            }
        }
        Some(seen)
    };
    called.into_iter().filter_map(closure).flatten().collect()
}

/// `copy_bytes`: the largest closure of kept functions the rest gets a copy of (`copied`).
pub(crate) fn split(
    input: &str,
    hit: &str,
    map: Option<&str>,
    primary_out: &str,
    rest_out: &str,
    copy_bytes: usize,
) -> Result<()> {
    let bytes = read(input)?;
    let p = parse(&bytes)?;
    let nimp = p.imported_funcs;
    let defined = p.bodies.len();
    let mut keep = read_hits(hit, defined)?;
    if let Some(s) = p.start {
        if s >= nimp {
            keep.insert((s - nimp) as usize);
        }
    }
    let mut body_refs = Vec::with_capacity(defined);
    for (i, body) in p.bodies.iter().enumerate() {
        let r = refs(body)?;
        if r.segments {
            keep.insert(i);
        }
        body_refs.push(r);
    }
    // The moved functions, by index among the defined ones, in slot order: the most called
    // from kept functions first, so that the slots of those called from many places take one
    // byte in each call's `i32.const` (a slot under 64) rather than two (`cairn.wasm`: 146
    // calls to the first, 44 to the second, one to most; 129 bytes off its gzip).
    let mut moved: Vec<usize> = (0..defined).filter(|i| !keep.contains(i)).collect();
    let kept_calls = call_counts(&p, &|i| keep.contains(&i))?;
    moved.sort_by_key(|&i| (std::cmp::Reverse(kept_calls[i]), i));
    let (primary_data, rest_data) = match map {
        Some(map) => {
            let text = std::fs::read_to_string(map).map_err(err(map))?;
            if body_refs.iter().any(|r| r.segments) {
                return Err("a function names a data segment: the data cannot be split".into());
            }
            split_data(&p, &keep, &text)?
        }
        None => (None, Vec::new()),
    };
    let mut slot = vec![u32::MAX; defined];
    for (k, &i) in moved.iter().enumerate() {
        slot[i] = k as u32;
    }
    let is_moved = |f: u32| f >= nimp && slot[(f - nimp) as usize] != u32::MAX;

    // Kept functions the rest gets a copy of (`copied`), and what the moved functions and the
    // copies use from the primary module.
    let copies = copied(&p, &keep, &moved, &body_refs, &is_moved, copy_bytes);
    let mut used_funcs = BTreeSet::new();
    let mut used_globals = BTreeSet::new();
    for &i in moved.iter().chain(&copies) {
        used_funcs.extend((body_refs[i].funcs.iter().copied()).filter(|&f| {
            !is_moved(f)
                && f.checked_sub(nimp)
                    .is_none_or(|d| !copies.contains(&(d as usize)))
        }));
        used_globals.extend(body_refs[i].globals.iter().copied());
    }

    // Primary: the input with one more function import (cairn.load) after the others, so every
    // defined function's index moves up by one.
    let shift = |f: u32| if f < nimp { f } else { f + 1 };
    let load = nimp;
    let rest_table = p.tables.len() as u32;
    let loaded = p.globals.len() as u32;
    let n_moved = moved.len() as u64;
    let rest_table_type = we::TableType {
        element_type: we::RefType::FUNCREF,
        table64: false,
        minimum: n_moved,
        maximum: Some(n_moved),
        shared: false,
    };
    let mut exports = vec![("m".to_string(), we::ExportKind::Memory, 0)];
    for t in 0..=rest_table {
        exports.push((format!("t{t}"), we::ExportKind::Table, t));
    }
    exports.push(("loaded".into(), we::ExportKind::Global, loaded));
    for &g in &used_globals {
        exports.push((format!("g{g}"), we::ExportKind::Global, g));
    }
    for (n, &f) in used_funcs.iter().enumerate() {
        exports.push((func_export(n), we::ExportKind::Func, shift(f)));
    }
    // One function that loads the rest unless it is loaded, which every stub calls first: the
    // check once, not in each stub (and, once wasm-opt inlines the stubs, in each call site).
    let ensure = p.func_types.len() as u32 + 1;
    let mut ensure_body = we::Function::new([]);
    for i in [
        we::Instruction::GlobalGet(loaded),
        we::Instruction::I32Eqz,
        we::Instruction::If(we::BlockType::Empty),
        we::Instruction::Call(load),
        we::Instruction::End,
        we::Instruction::End,
    ] {
        ensure_body.instruction(&i);
    }
    let void = p.params.len() as u32;
    let add = Additions {
        func_types: vec![we::FuncType::new([], [])],
        import: Some(("cairn", "load", we::EntityType::Function(void))),
        table: Some(rest_table_type),
        zero_globals: 1,
        exports,
        funcs: vec![(void, ensure_body)],
        data: primary_data,
    };
    let mut map = Remap {
        funcs: (0..p.func_types.len() as u32).map(shift).collect(),
        globals: Remap::identity(&p).globals,
    };
    let primary = copy(&p, &mut map, add, &mut |i, b, map| {
        if slot[i] == u32::MAX {
            return rewrite(b, map, &[]);
        }
        let ty = p.func_types[nimp as usize + i];
        let mut f = we::Function::new([]);
        f.instruction(&we::Instruction::Call(ensure));
        for a in 0..p.params[ty as usize] {
            f.instruction(&we::Instruction::LocalGet(a));
        }
        f.instruction(&we::Instruction::I32Const(slot[i] as i32));
        f.instruction(&we::Instruction::CallIndirect {
            type_index: ty,
            table_index: rest_table,
        });
        f.instruction(&we::Instruction::End);
        Ok(f)
    })?;
    write(primary_out, &primary)?;

    // Rest: imports what its functions use from the primary module, defines the moved functions.
    let mut q = we::Module::new();
    let mut types = we::TypeSection::new();
    if let Some(t) = p.types.clone() {
        re(Same.parse_type_section(&mut types, t))?;
    }
    q.section(&types);
    let mut imports = we::ImportSection::new();
    let mut qfuncs = vec![u32::MAX; p.func_types.len()];
    let mut qglobals = vec![u32::MAX; p.globals.len()];
    for (n, &f) in used_funcs.iter().enumerate() {
        imports.import(
            "p",
            &func_export(n),
            we::EntityType::Function(p.func_types[f as usize]),
        );
        qfuncs[f as usize] = n as u32;
    }
    for (t, ty) in p.tables.iter().enumerate() {
        imports.import("p", &format!("t{t}"), re(Same.table_type(*ty))?);
    }
    imports.import("p", &format!("t{rest_table}"), rest_table_type);
    imports.import("p", "m", we::MemoryType::from(p.memories[0]));
    for (n, &g) in used_globals.iter().enumerate() {
        imports.import(
            "p",
            &format!("g{g}"),
            re(Same.global_type(p.globals[g as usize]))?,
        );
        qglobals[g as usize] = n as u32;
    }
    q.section(&imports);
    let first_defined = used_funcs.len() as u32;
    // The moved functions (in slot order), then the copies.
    let defined_here: Vec<usize> = moved.iter().chain(&copies).copied().collect();
    for (k, &i) in defined_here.iter().enumerate() {
        qfuncs[nimp as usize + i] = first_defined + k as u32;
    }
    let mut funcs = we::FunctionSection::new();
    for &i in &defined_here {
        funcs.function(p.func_types[nimp as usize + i]);
    }
    q.section(&funcs);
    let mut elems = we::ElementSection::new();
    let slots: Vec<u32> = (0..moved.len() as u32).map(|k| first_defined + k).collect();
    elems.active(
        Some(rest_table),
        &we::ConstExpr::i32_const(0),
        we::Elements::Functions(Cow::Owned(slots)),
    );
    q.section(&elems);
    let mut map = Remap {
        funcs: qfuncs,
        globals: qglobals,
    };
    let mut code = we::CodeSection::new();
    for &i in &defined_here {
        re(map.parse_function_body(&mut code, p.bodies[i].clone()))?;
    }
    q.section(&code);
    if !rest_data.is_empty() {
        let mut data = we::DataSection::new();
        for (at, bytes) in &rest_data {
            data.active(
                0,
                &we::ConstExpr::i32_const(*at as i32),
                bytes.iter().copied(),
            );
        }
        q.section(&data);
    }
    write(rest_out, &q.finish())?;
    eprintln!(
        "cairn-split: {} of {} functions kept, {} moved, {} kept ones copied to the rest; the rest uses {} functions and {} globals of the primary",
        defined - moved.len(),
        defined,
        moved.len(),
        copies.len(),
        used_funcs.len(),
        used_globals.len()
    );
    Ok(())
}
