//! `cairn-split`: cuts cairn's wasm module in two, so that a page downloads only the code that
//! opening a database and running its common statements needs (docs/size.md, "The split module").
//!
//! ```text
//! cairn-split instrument IN OUT                  a copy of IN that marks what it runs
//! cairn-split outline IN FUNCS REGIONS OUT       IN with the regions a run did not enter, in
//!                                                functions it did, moved to functions of their own
//! cairn-split split IN HIT PRIMARY REST [MAP]    IN cut by HIT (the run functions, one index a line);
//!                                                with MAP (the linker's map of IN's data), the
//!                                                constants only moved functions use move too
//! cairn-split reorder IN OUT                     IN with its functions in an order that gzip
//!                                                compresses better (see `reorder`)
//! cairn-split table PRIMARY REST                 REST calls PRIMARY's functions through a table
//!                                                PRIMARY fills, in place of exports (in place)
//! ```
//!
//! `instrument` gives every defined function a mutable global `h<i>` (exported), set to 1 when
//! the function starts, and every region of a function (a `block`'s body, an `if`'s arm; see
//! `outline`) a global `r<k>`, set when the region is entered; a run of the copy over a workload
//! reads them back (`scripts/split.mjs`). Function indices are the same in IN and in the copy.
//!
//! `outline` appends its new functions after IN's own, so every index of IN stays; a run of IN
//! reached the same functions of OUT, and none of the new ones.
//!
//! `split` keeps the functions listed in HIT, and every function that must stay (the start
//! function and any that names a data or element segment), in PRIMARY, in their places. Each
//! other function's body moves to REST, and PRIMARY keeps in its place a stub of the same type:
//!
//! ```text
//! (call $ensure)   ;; one function, after IN's own: (if (i32.eqz (global.get $loaded)) (then (call $cairn.load)))
//! (call_indirect $rest (type $t) (local.get 0) ... (i32.const slot))
//! ```
//!
//! `cairn.load` is an import the embedder provides: it instantiates REST (synchronously) against
//! PRIMARY's exports and sets `loaded`. REST imports PRIMARY's memory, tables and the globals and
//! functions its functions use (exported by PRIMARY as `m`, `t<i>`, `g<i>`, `f<n>`), defines the
//! moved functions, and fills PRIMARY's table `rest` (exported as `rest`) with them through an
//! active element segment. A call from a kept function to a moved one goes through its stub; a
//! call between two moved functions stays a direct call within REST.
//!
//! Every index in PRIMARY moves by one for functions defined in IN (the new import comes first;
//! `ensure` comes after them);
//! exports keep their names, so the JS glue is unchanged but for the `cairn` import namespace.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::process::ExitCode;

use wasm_encoder as we;
use wasm_encoder::reencode::{self, Reencode};
use wasmparser as wp;

mod data;
#[cfg(test)]
mod data_tests;
mod outline;
mod reorder;
#[cfg(test)]
mod tests;

type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let run = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["instrument", input, out] => instrument(input, out),
        ["outline", input, funcs, regions, out] => outline(input, funcs, regions, out),
        ["split", input, hit, primary, rest] => split(input, hit, None, primary, rest, COPY_BYTES),
        ["split", input, hit, primary, rest, map] => {
            split(input, hit, Some(map), primary, rest, COPY_BYTES)
        }
        ["reorder", input, out] => reorder(input, out),
        ["table", primary, rest] => table(primary, rest),
        _ => Err(
            "usage: cairn-split instrument IN OUT | cairn-split outline IN FUNCS REGIONS OUT | cairn-split split IN HIT PRIMARY REST [MAP] | cairn-split reorder IN OUT | cairn-split table PRIMARY REST".into(),
        ),
    };
    match run {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-split: {e}");
            ExitCode::FAILURE
        }
    }
}

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn read(path: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(err(path))
}

fn write(path: &str, bytes: &[u8]) -> Result<()> {
    wp::Validator::new_with_features(wp::WasmFeatures::all())
        .validate_all(bytes)
        .map_err(|e| format!("{path} does not validate: {e}"))?;
    std::fs::write(path, bytes).map_err(err(path))
}

/// The parts of a module this tool rewrites, as read.
struct Parsed<'a> {
    types: Option<wp::TypeSectionReader<'a>>,
    /// The type index of every function, imported first, then defined.
    func_types: Vec<u32>,
    /// Parameter count of every type index (0 for a type that is not a function).
    params: Vec<u32>,
    imports: Vec<wp::Import<'a>>,
    imported_funcs: u32,
    imported_globals: u32,
    tables: Vec<wp::TableType>,
    table_section: Option<wp::TableSectionReader<'a>>,
    memories: Vec<wp::MemoryType>,
    memory_section: Option<wp::MemorySectionReader<'a>>,
    globals: Vec<wp::GlobalType>,
    global_section: Option<wp::GlobalSectionReader<'a>>,
    exports: Option<wp::ExportSectionReader<'a>>,
    start: Option<u32>,
    elements: Option<wp::ElementSectionReader<'a>>,
    data_count: Option<u32>,
    data: Option<wp::DataSectionReader<'a>>,
    bodies: Vec<wp::FunctionBody<'a>>,
}

fn parse(bytes: &[u8]) -> Result<Parsed<'_>> {
    let e = |e: wp::BinaryReaderError| e.to_string();
    let mut p = Parsed {
        types: None,
        func_types: Vec::new(),
        params: Vec::new(),
        imports: Vec::new(),
        imported_funcs: 0,
        imported_globals: 0,
        tables: Vec::new(),
        table_section: None,
        memories: Vec::new(),
        memory_section: None,
        globals: Vec::new(),
        global_section: None,
        exports: None,
        start: None,
        elements: None,
        data_count: None,
        data: None,
        bodies: Vec::new(),
    };
    for payload in wp::Parser::new(0).parse_all(bytes) {
        match payload.map_err(e)? {
            wp::Payload::TypeSection(s) => {
                for group in s.clone() {
                    for sub in group.map_err(e)?.into_types() {
                        p.params.push(match &sub.composite_type.inner {
                            wp::CompositeInnerType::Func(f) => f.params().len() as u32,
                            _ => 0,
                        });
                    }
                }
                p.types = Some(s);
            }
            wp::Payload::ImportSection(s) => {
                for import in s.into_imports() {
                    let import = import.map_err(e)?;
                    match import.ty {
                        wp::TypeRef::Func(t) => {
                            p.func_types.push(t);
                            p.imported_funcs += 1;
                        }
                        wp::TypeRef::Global(g) => {
                            p.globals.push(g);
                            p.imported_globals += 1;
                        }
                        wp::TypeRef::Table(t) => p.tables.push(t),
                        wp::TypeRef::Memory(m) => p.memories.push(m),
                        _ => {
                            return Err("the module imports a kind this tool does not handle".into())
                        }
                    }
                    p.imports.push(import);
                }
            }
            wp::Payload::FunctionSection(s) => {
                for t in s {
                    p.func_types.push(t.map_err(e)?);
                }
            }
            wp::Payload::TableSection(s) => {
                for t in s.clone() {
                    p.tables.push(t.map_err(e)?.ty);
                }
                p.table_section = Some(s);
            }
            wp::Payload::MemorySection(s) => {
                for m in s.clone() {
                    p.memories.push(m.map_err(e)?);
                }
                p.memory_section = Some(s);
            }
            wp::Payload::GlobalSection(s) => {
                for g in s.clone() {
                    p.globals.push(g.map_err(e)?.ty);
                }
                p.global_section = Some(s);
            }
            wp::Payload::ExportSection(s) => p.exports = Some(s),
            wp::Payload::StartSection { func, .. } => p.start = Some(func),
            wp::Payload::ElementSection(s) => p.elements = Some(s),
            wp::Payload::DataCountSection { count, .. } => p.data_count = Some(count),
            wp::Payload::DataSection(s) => p.data = Some(s),
            wp::Payload::CodeSectionEntry(body) => p.bodies.push(body),
            wp::Payload::TagSection(_) => {
                return Err("the module has tags (exceptions): not handled".into())
            }
            _ => {} // version, code section start, custom sections (names are dropped), end
        }
    }
    if p.memories.len() != 1 {
        return Err(format!(
            "the module has {} memories, not one",
            p.memories.len()
        ));
    }
    Ok(p)
}

/// Index maps for a rewrite: functions and globals (tables, types and memories keep theirs).
struct Remap {
    funcs: Vec<u32>,
    globals: Vec<u32>,
}

impl Reencode for Remap {
    type Error = Infallible;
    fn function_index(&mut self, f: u32) -> std::result::Result<u32, reencode::Error<Infallible>> {
        Ok(self.funcs[f as usize])
    }
    fn global_index(&mut self, g: u32) -> std::result::Result<u32, reencode::Error<Infallible>> {
        Ok(self.globals[g as usize])
    }
}

impl Remap {
    fn identity(p: &Parsed) -> Remap {
        Remap {
            funcs: (0..p.func_types.len() as u32).collect(),
            globals: (0..p.globals.len() as u32).collect(),
        }
    }
}

fn re<T>(r: std::result::Result<T, reencode::Error<Infallible>>) -> Result<T> {
    r.map_err(|e| e.to_string())
}

/// Copies types as they are.
struct Same;
impl Reencode for Same {
    type Error = Infallible;
}

const I32_MUT: we::GlobalType = we::GlobalType {
    val_type: we::ValType::I32,
    mutable: true,
    shared: false,
};

/// Active data segments of memory 0: (address, bytes).
type Segments = Vec<(u32, Vec<u8>)>;

/// What a copy of the input adds to it, each after what the input has of its kind.
#[derive(Default)]
struct Additions {
    /// Function types (their indices follow the input's).
    func_types: Vec<we::FuncType>,
    /// An import (module, name, what), after the input's imports.
    import: Option<(&'static str, &'static str, we::EntityType)>,
    /// A table.
    table: Option<we::TableType>,
    /// Mutable i32 globals starting at 0.
    zero_globals: u32,
    exports: Vec<(String, we::ExportKind, u32)>,
    /// Functions (type index, body), after the input's.
    funcs: Vec<(u32, we::Function)>,
    /// Active segments (address, bytes) in place of the input's data.
    data: Option<Vec<(u32, Vec<u8>)>>,
}

/// The input with `map` applied to every function and global index, `add` added, and each
/// defined function's body from `body` (its index among the defined ones, its body, the map).
fn copy(
    p: &Parsed,
    map: &mut Remap,
    add: Additions,
    body: &mut dyn FnMut(usize, &wp::FunctionBody, &mut Remap) -> Result<we::Function>,
) -> Result<Vec<u8>> {
    let mut m = we::Module::new();
    let mut types = we::TypeSection::new();
    if let Some(t) = p.types.clone() {
        re(Same.parse_type_section(&mut types, t))?;
    }
    for f in &add.func_types {
        types.ty().func_type(f);
    }
    m.section(&types);
    let mut imports = we::ImportSection::new();
    for i in &p.imports {
        re(map.parse_import(&mut imports, *i))?;
    }
    if let Some((module, name, ty)) = add.import {
        imports.import(module, name, ty);
    }
    m.section(&imports);
    let mut funcs = we::FunctionSection::new();
    for &t in &p.func_types[p.imported_funcs as usize..] {
        funcs.function(t);
    }
    for (t, _) in &add.funcs {
        funcs.function(*t);
    }
    m.section(&funcs);
    let mut tables = we::TableSection::new();
    if let Some(t) = p.table_section.clone() {
        re(map.parse_table_section(&mut tables, t))?;
    }
    if let Some(t) = add.table {
        tables.table(t);
    }
    m.section(&tables);
    if let Some(mem) = p.memory_section.clone() {
        let mut mems = we::MemorySection::new();
        re(map.parse_memory_section(&mut mems, mem))?;
        m.section(&mems);
    }
    let mut globals = we::GlobalSection::new();
    if let Some(g) = p.global_section.clone() {
        re(map.parse_global_section(&mut globals, g))?;
    }
    for _ in 0..add.zero_globals {
        globals.global(I32_MUT, &we::ConstExpr::i32_const(0));
    }
    m.section(&globals);
    let mut exports = we::ExportSection::new();
    if let Some(x) = p.exports.clone() {
        re(map.parse_export_section(&mut exports, x))?;
    }
    for (name, kind, index) in &add.exports {
        exports.export(name, *kind, *index);
    }
    m.section(&exports);
    if let Some(f) = p.start {
        m.section(&we::StartSection {
            function_index: re(map.function_index(f))?,
        });
    }
    if let Some(e) = p.elements.clone() {
        let mut elems = we::ElementSection::new();
        re(map.parse_element_section(&mut elems, e))?;
        m.section(&elems);
    }
    if let Some(n) = p.data_count {
        let count = add.data.as_ref().map_or(n, |d| d.len() as u32);
        m.section(&we::DataCountSection { count });
    }
    let mut code = we::CodeSection::new();
    for (i, b) in p.bodies.iter().enumerate() {
        code.function(&body(i, b, map)?);
    }
    for (_, f) in &add.funcs {
        code.function(f);
    }
    m.section(&code);
    if let Some(segments) = &add.data {
        let mut data = we::DataSection::new();
        for (at, bytes) in segments {
            data.active(
                0,
                &we::ConstExpr::i32_const(*at as i32),
                bytes.iter().copied(),
            );
        }
        m.section(&data);
    } else if let Some(d) = p.data.clone() {
        let mut data = we::DataSection::new();
        re(map.parse_data_section(&mut data, d))?;
        m.section(&data);
    }
    Ok(m.finish())
}

/// A body as it is, with `map` applied, after `prefix`.
fn rewrite(
    b: &wp::FunctionBody,
    map: &mut Remap,
    prefix: &[we::Instruction],
) -> Result<we::Function> {
    let mut f = re(map.new_function_with_parsed_locals(b))?;
    for i in prefix {
        f.instruction(i);
    }
    let mut ops = b.get_operators_reader().map_err(|e| e.to_string())?;
    while !ops.eof() {
        f.instruction(&re(map.parse_instruction(&mut ops))?);
    }
    Ok(f)
}

/// The functions (defined, by index among the defined ones) a run reached.
fn read_hits(path: &str, defined: usize) -> Result<BTreeSet<usize>> {
    let text = std::fs::read_to_string(path).map_err(err(path))?;
    let mut hits = BTreeSet::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let i: usize = line
            .parse()
            .map_err(|_| format!("{path}: {line:?} is not a function index"))?;
        if i >= defined {
            return Err(format!(
                "{path}: function {i} is past the module's {defined} functions"
            ));
        }
        hits.insert(i);
    }
    Ok(hits)
}

fn instrument(input: &str, out: &str) -> Result<()> {
    let bytes = read(input)?;
    let p = parse(&bytes)?;
    let types = outline::Types::read(p.types.as_ref())?;
    let first_hit = p.globals.len() as u32;
    let defined = p.bodies.len() as u32;
    // Every defined function's regions, numbered across the module after the functions' marks:
    // (where a region starts, its number).
    let tails = outline::tail_starts(&bytes)?;
    let mut all = Vec::with_capacity(p.bodies.len());
    for (i, b) in p.bodies.iter().enumerate() {
        let o = outline::ops(b)?;
        let ty = &types.0[p.func_types[p.imported_funcs as usize + i] as usize];
        all.push(outline::regions(&o, &types, &ty.1, &tails[i]));
    }
    let numbering = outline::Numbering::new(&all);
    let regions = all.iter().map(Vec::len).sum::<usize>() as u32;
    let region_starts: Vec<Vec<(usize, u32)>> = (all.iter().enumerate())
        .map(|(i, rs)| {
            rs.iter()
                .map(|r| (r.start, numbering.number(i, r) as u32))
                .collect()
        })
        .collect();
    let first_region = first_hit + defined;
    let mut exports: Vec<_> = (0..defined)
        .map(|i| (format!("h{i}"), we::ExportKind::Global, first_hit + i))
        .collect();
    exports
        .extend((0..regions).map(|k| (format!("r{k}"), we::ExportKind::Global, first_region + k)));
    let add = Additions {
        zero_globals: defined + regions,
        exports,
        ..Additions::default()
    };
    let mut map = Remap::identity(&p);
    let module = copy(&p, &mut map, add, &mut |i, b, map| {
        let mark = |g: u32| [we::Instruction::I32Const(1), we::Instruction::GlobalSet(g)];
        let mut f = re(map.new_function_with_parsed_locals(b))?;
        for m in &mark(first_hit + i as u32) {
            f.instruction(m);
        }
        let starts = &region_starts[i];
        let mut ops = b.get_operators_reader().map_err(|e| e.to_string())?;
        let mut at = 0;
        let mut n = 0;
        while !ops.eof() {
            f.instruction(&re(map.parse_instruction(&mut ops))?);
            at += 1;
            // Starts are distinct: a body's is after its `block`, `if` or `else`, a tail's
            // after a `br_if`.
            while let Some(&(start, k)) = starts.get(n) {
                if start != at {
                    break;
                }
                for m in &mark(first_region + k) {
                    f.instruction(m);
                }
                n += 1;
            }
        }
        Ok(f)
    })?;
    eprintln!("cairn-split: {defined} functions and {regions} regions marked");
    write(out, &module)
}

/// The primary module's data segments and the rest's: the constants (by the linker map `map`)
/// that only the moved functions use go to the rest (see `data`).
/// The module's data segments, in order: each active, in memory 0, at an address that is one
/// `i32.const` (the split and the joining of segments read no other), or why not.
fn active_segments<'a>(p: &Parsed<'a>) -> Result<Vec<data::Segment<'a>>> {
    let mut out = Vec::new();
    for seg in p.data.clone().into_iter().flatten() {
        let seg = seg.map_err(|e| e.to_string())?;
        let wp::DataKind::Active {
            memory_index: 0,
            offset_expr,
        } = seg.kind
        else {
            return Err("a data segment is passive".into());
        };
        let mut ops = offset_expr.get_operators_reader();
        let (Ok(wp::Operator::I32Const { value }), Ok(wp::Operator::End)) =
            (ops.read(), ops.read())
        else {
            return Err("a data segment's address is not one constant".into());
        };
        out.push(data::Segment {
            at: value as u32,
            bytes: seg.data,
        });
    }
    Ok(out)
}

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

/// The size a cold region must have to be moved, in bytes: below it the call left in its place
/// and the stub of its new function in the primary module cost about what moving it saves
/// (on cairn.wasm, gzip of the primary module: 16 bytes 182,043, 24 bytes 181,729, 32 bytes
/// 181,771, 48 bytes 182,598, 96 bytes 184,212).
const MIN_REGION: usize = 16;

/// The name under which PRIMARY exports the `n`-th function REST uses: `f` and `n` in base 62
/// (two or three characters: the decimal function index took five).
fn func_export(mut n: usize) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut s = vec![b'f'];
    let start = s.len();
    loop {
        s.insert(start, DIGITS[n % 62]);
        n /= 62;
        if n == 0 {
            break;
        }
    }
    String::from_utf8(s).expect("ASCII")
}

fn reorder(input: &str, out: &str) -> Result<()> {
    let bytes = read(input)?;
    let module = reordered(&bytes)?;
    eprintln!(
        "cairn-split: {} functions reordered ({} bytes in, {} out)",
        parse(&bytes)?.bodies.len(),
        bytes.len(),
        module.len()
    );
    write(out, &module)
}

/// A function called from at least this many places goes first, where its index takes one
/// byte in each `call` (an index under 128) rather than two. Only a few are called that often
/// (`cairn.wasm`: the split's `ensure`, 2,066 calls, and one other, 254): first among the
/// defined functions they took 232 bytes off its gzip; the 20 most called first took 205, the
/// 80 most called 102 more than nothing (the order for gzip matters more for the others).
const LEAD_CALLS: usize = 200;

/// Data segments less than this many bytes apart are joined, the gap written as zeros: a
/// segment's header (its address and length) is about 6 bytes gzip hardly compresses, and a
/// run of zeros costs about a byte per hundred. Measured on `cairn.wasm` (106 segments, the
/// gaps left by the constants moved to the rest): joined across gaps up to 64 bytes, 84 bytes
/// off its gzip; 256, 158; 512, 195; into one segment, 180.
const JOIN_GAP: u32 = 512;

/// How many `call`s each defined function (by index among the defined ones) gets from the
/// bodies of the defined functions `from` takes.
fn call_counts(p: &Parsed, from: &dyn Fn(usize) -> bool) -> Result<Vec<usize>> {
    let mut calls = vec![0usize; p.bodies.len()];
    for (_, b) in p.bodies.iter().enumerate().filter(|&(i, _)| from(i)) {
        let mut r = b.get_operators_reader().map_err(|e| e.to_string())?;
        while !r.eof() {
            if let wp::Operator::Call { function_index } = r.read().map_err(|e| e.to_string())? {
                if let Some(d) = function_index.checked_sub(p.imported_funcs) {
                    calls[d as usize] += 1;
                }
            }
        }
    }
    Ok(calls)
}

/// `bytes` with its defined functions in `reorder::order` (the most called first, up to the
/// one-byte indices), every function index mapped, and its data segments joined across small
/// gaps when that is exact (`joined`).
fn reordered(bytes: &[u8]) -> Result<Vec<u8>> {
    let p = parse(bytes)?;
    let raw: Vec<&[u8]> = p.bodies.iter().map(|b| b.as_bytes()).collect();
    let nimp = p.imported_funcs as usize;
    let calls = call_counts(&p, &|_| true)?;
    let mut lead: Vec<usize> = (0..raw.len()).filter(|&d| calls[d] >= LEAD_CALLS).collect();
    // The most called first; ties by position, so the order depends on the input alone.
    lead.sort_by_key(|&d| (std::cmp::Reverse(calls[d]), d));
    lead.truncate(128usize.saturating_sub(nimp));
    permuted(bytes, &reorder::order(&raw, &lead), joined(&p)?)
}

/// The module's data segments joined where fewer than `JOIN_GAP` bytes lie between them, or
/// None to keep them as they are. Exact only when the zeros written into a gap are what the
/// memory holds there at instantiation anyway: the module defines its memory (an imported one,
/// as the rest's, holds the other module's data in those gaps), and every segment is active,
/// at a constant address, in increasing order without overlap (so none writes over another).
fn joined(p: &Parsed) -> Result<Option<Segments>> {
    if p.data.is_none() {
        return Ok(None);
    }
    let imported_memory = (p.imports.iter()).any(|i| matches!(i.ty, wp::TypeRef::Memory(_)));
    if imported_memory || p.memories.len() != 1 {
        return Ok(None);
    }
    let Ok(segments) = active_segments(p) else {
        return Ok(None);
    };
    let mut out: Vec<(u32, Vec<u8>)> = Vec::new();
    for seg in segments {
        let at = seg.at;
        match out.last_mut() {
            Some((start, bytes)) => {
                let end = *start + bytes.len() as u32;
                if at < end {
                    return Ok(None);
                }
                if at - end < JOIN_GAP {
                    bytes.resize((at - *start) as usize, 0);
                    bytes.extend_from_slice(seg.bytes);
                } else {
                    out.push((at, seg.bytes.to_vec()));
                }
            }
            None => out.push((at, seg.bytes.to_vec())),
        }
    }
    Ok(Some(out))
}

/// `bytes` with its defined functions in `order` (positions among the defined ones, each
/// once), every function index mapped, and its data as `data` (the module's own if None).
fn permuted(bytes: &[u8], order: &[usize], data: Option<Segments>) -> Result<Vec<u8>> {
    let mut p = parse(bytes)?;
    let nimp = p.imported_funcs as usize;
    let mut map = Remap::identity(&p);
    for (new, &old) in order.iter().enumerate() {
        map.funcs[nimp + old] = (nimp + new) as u32;
    }
    let (types, bodies) = (p.func_types.clone(), p.bodies.clone());
    for (new, &old) in order.iter().enumerate() {
        p.func_types[nimp + new] = types[nimp + old];
        p.bodies[new] = bodies[old].clone();
    }
    let add = Additions {
        data,
        ..Additions::default()
    };
    copy(&p, &mut map, add, &mut |_, b, map| rewrite(b, map, &[]))
}

fn table(primary: &str, rest: &str) -> Result<()> {
    let (p, r) = tabled(&read(primary)?, &read(rest)?)?;
    write(primary, &p)?;
    write(rest, &r)
}

/// The name of the table through which the rest calls the primary module's functions.
const CALLS_TABLE: &str = "F";

/// PRIMARY without the exports of the functions REST imports (an entry each: a name and an
/// index, 3.4 KB of `cairn.wasm`'s gzip) and with a table of them instead, filled by an active
/// element segment in the order of their indices (a list of increasing numbers, which gzip
/// takes well) and exported as `F`; REST imports that table in place of the functions and calls
/// each through it (`call_indirect`, one table look-up and signature check more a call, on the
/// rare paths the rest holds).
fn tabled(primary: &[u8], rest: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    let e = |e: wp::BinaryReaderError| e.to_string();
    let r = parse(rest)?;
    // The functions REST imports from PRIMARY, by name: (its import index, type).
    let mut imported: std::collections::BTreeMap<&str, (u32, u32)> = Default::default();
    let mut k = 0u32;
    for i in &r.imports {
        if let wp::TypeRef::Func(t) = i.ty {
            if i.module != "p" {
                return Err(format!(
                    "the rest imports {}.{}, not from the primary module",
                    i.module, i.name
                ));
            }
            imported.insert(i.name, (k, t));
            k += 1;
        }
    }
    // PRIMARY: the functions by index, their slots in the new table.
    let p = parse(primary)?;
    let mut funcs: Vec<(u32, &str)> = Vec::new();
    if let Some(x) = p.exports.clone() {
        for x in x {
            let x = x.map_err(e)?;
            if x.kind == wp::ExternalKind::Func && imported.contains_key(x.name) {
                funcs.push((x.index, x.name));
            }
        }
    }
    if funcs.len() != imported.len() {
        return Err(format!(
            "the rest imports {} functions of the primary module, which exports {} of them",
            imported.len(),
            funcs.len()
        ));
    }
    funcs.sort_unstable();
    // Slot of each import of REST (by its import index).
    let mut slot = vec![0u32; k as usize];
    for (j, (_, name)) in funcs.iter().enumerate() {
        slot[imported[name].0 as usize] = j as u32;
    }
    let n = funcs.len() as u64;
    let calls_type = we::TableType {
        element_type: we::RefType::FUNCREF,
        table64: false,
        minimum: n,
        maximum: Some(n),
        shared: false,
    };
    let table_index = p.tables.len() as u32;
    let list: Vec<u32> = funcs.iter().map(|(f, _)| *f).collect();
    let calls_segment = |el: &mut we::ElementSection| {
        el.active(
            Some(table_index),
            &we::ConstExpr::i32_const(0),
            we::Elements::Functions(Cow::Borrowed(&list)),
        );
    };
    let (mut had_table, mut had_elements) = (false, false);
    let primary_out = resection(primary, &mut |id, data| {
        let reader = || wp::BinaryReader::new(data, 0);
        Ok(Some(match id {
            4 => {
                had_table = true;
                let mut t = we::TableSection::new();
                re(Same.parse_table_section(
                    &mut t,
                    wp::TableSectionReader::new(reader()).map_err(e)?,
                ))?;
                t.table(calls_type);
                vec![(4, contents(&t))]
            }
            7 => {
                let mut x = we::ExportSection::new();
                for ex in wp::ExportSectionReader::new(reader()).map_err(e)? {
                    let ex = ex.map_err(e)?;
                    if !(ex.kind == wp::ExternalKind::Func && imported.contains_key(ex.name)) {
                        x.export(ex.name, re(Same.export_kind(ex.kind))?, ex.index);
                    }
                }
                x.export(CALLS_TABLE, we::ExportKind::Table, table_index);
                vec![(7, contents(&x))]
            }
            9 => {
                had_elements = true;
                let mut el = we::ElementSection::new();
                re(Same.parse_element_section(
                    &mut el,
                    wp::ElementSectionReader::new(reader()).map_err(e)?,
                ))?;
                calls_segment(&mut el);
                vec![(9, contents(&el))]
            }
            // The element section comes before these: a module without one gets it here.
            12 | 10 if !had_elements => {
                had_elements = true;
                let mut el = we::ElementSection::new();
                calls_segment(&mut el);
                vec![(9, contents(&el)), (id, data.to_vec())]
            }
            _ => return Ok(None),
        }))
    })?;
    if !had_table {
        return Err("the primary module has no table section (the split gives it one)".into());
    }

    // REST: the function imports go; the table comes last among the imports (the rest defines
    // no table, so it is the last table too); every call of an imported function goes through
    // it; the defined functions' indices move down by `k`.
    let imported_tables = (r.imports.iter())
        .filter(|i| matches!(i.ty, wp::TypeRef::Table(_)))
        .count();
    if r.tables.len() != imported_tables {
        return Err("the rest defines a table: the calls table would not be the last".into());
    }
    let rest_table = r.tables.len() as u32;
    let mut map = Remap::identity(&r);
    for f in 0..r.func_types.len() as u32 {
        map.funcs[f as usize] = f.checked_sub(k).unwrap_or(u32::MAX);
    }
    // The rest as `copy` writes a module, without its function imports.
    let mut without = parse(rest)?;
    without
        .imports
        .retain(|i| !matches!(i.ty, wp::TypeRef::Func(_)));
    without.func_types.drain(..k as usize);
    without.imported_funcs = 0;
    let add = Additions {
        import: Some(("p", CALLS_TABLE, we::EntityType::Table(calls_type))),
        ..Additions::default()
    };
    let rest_out = copy(&without, &mut map, add, &mut |_, b, map| {
        let mut f = re(map.new_function_with_parsed_locals(b))?;
        let mut ops = b.get_operators_reader().map_err(e)?;
        while !ops.eof() {
            match ops.read().map_err(e)? {
                wp::Operator::Call { function_index } if function_index < k => {
                    let t = r.func_types[function_index as usize];
                    f.instruction(&we::Instruction::I32Const(
                        slot[function_index as usize] as i32,
                    ));
                    f.instruction(&we::Instruction::CallIndirect {
                        type_index: t,
                        table_index: rest_table,
                    });
                }
                wp::Operator::ReturnCall { function_index }
                | wp::Operator::RefFunc { function_index }
                    if function_index < k =>
                {
                    return Err("the rest refers to a function of the primary module other than by calling it".into());
                }
                op => {
                    f.instruction(&re(map.instruction(op))?);
                }
            }
        }
        Ok(f)
    })?;
    Ok((primary_out, rest_out))
}

/// What stands in a section's place, from its id and contents (sections as (id, contents)), or
/// `None` to keep it as it is.
type NewSection<'a> = dyn FnMut(u8, &[u8]) -> Result<Option<Vec<(u8, Vec<u8>)>>> + 'a;

/// The module with each section as `section` gives it.
fn resection(bytes: &[u8], section: &mut NewSection) -> Result<Vec<u8>> {
    let mut m = we::Module::new();
    for payload in wp::Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| e.to_string())?;
        if let Some((id, range)) = payload.as_section() {
            let data = &bytes[range.start as usize..range.end as usize];
            match section(id, data)? {
                Some(new) => {
                    for (id, data) in &new {
                        m.section(&we::RawSection { id: *id, data });
                    }
                }
                None => {
                    m.section(&we::RawSection { id, data });
                }
            };
        }
    }
    Ok(m.finish())
}

/// A section's contents as wasm-encoder writes them (without the length it starts with).
fn contents(section: &impl we::Encode) -> Vec<u8> {
    let mut out = Vec::new();
    section.encode(&mut out);
    let (_, at) = leb_u32(&out);
    out[at..].to_vec()
}

/// An unsigned LEB128 number at the start of `b`, and where it ends.
fn leb_u32(b: &[u8]) -> (u32, usize) {
    let (mut v, mut shift, mut at) = (0u32, 0, 0);
    loop {
        let byte = b[at];
        at += 1;
        v |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return (v, at);
        }
        shift += 7;
    }
}

fn outline(input: &str, funcs: &str, regions_hit: &str, out: &str) -> Result<()> {
    let bytes = read(input)?;
    let defined = parse(&bytes)?.bodies.len();
    let hit_funcs = read_hits(funcs, defined)?;
    let hit_regions = read_hits(regions_hit, usize::MAX)?;
    let (module, stats) = outline_regions(&bytes, &hit_funcs, &hit_regions, MIN_REGION)?;
    eprintln!(
        "cairn-split: {} cold regions moved into functions of their own ({} bytes; cold in functions that ran: {} bytes, of which under {MIN_REGION} bytes a region {}, not movable: construct parameters {}, a branch out carrying values {})",
        stats.moved, stats.moved_bytes, stats.cold, stats.small_bytes, stats.params_bytes, stats.carries_bytes
    );
    write(out, &module)
}

/// `bytes` with every region of at least `min` bytes that is not in `hit_regions`, in a
/// function in `hit_funcs`, moved to a function of its own (see `outline`).
fn outline_regions(
    bytes: &[u8],
    hit_funcs: &BTreeSet<usize>,
    hit_regions: &BTreeSet<usize>,
    min: usize,
) -> Result<(Vec<u8>, outline::Stats)> {
    let p = parse(bytes)?;
    let types = outline::Types::read(p.types.as_ref())?;
    let tails = outline::tail_starts(bytes)?;
    let defined = p.bodies.len();
    let mut new_types = outline::NewTypes::new(types.0.len() as u32);
    let mut stats = outline::Stats::default();
    let mut bodies: Vec<Option<we::Function>> = Vec::with_capacity(defined);
    let mut added = Vec::new();
    let mut all = Vec::with_capacity(defined);
    let mut ops = Vec::with_capacity(defined);
    for (i, b) in p.bodies.iter().enumerate() {
        let o = outline::ops(b)?;
        let ty = &types.0[p.func_types[p.imported_funcs as usize + i] as usize];
        all.push(outline::regions(&o, &types, &ty.1, &tails[i]));
        ops.push(o);
    }
    let numbering = outline::Numbering::new(&all);
    for (i, (b, (o, regions))) in p.bodies.iter().zip(ops.iter().zip(all)).enumerate() {
        let ty = &types.0[p.func_types[p.imported_funcs as usize + i] as usize];
        let chosen = if hit_funcs.contains(&i) {
            let number = |r: &outline::Region| numbering.number(i, r);
            outline::choose(o, regions, &number, hit_regions, min, &mut stats)
        } else {
            Vec::new()
        };
        if chosen.is_empty() {
            bodies.push(None);
            continue;
        }
        let locals = outline::local_types(&ty.0, b)?;
        let next = (p.func_types.len() + added.len()) as u32;
        let (f, new) = outline::rewrite(bytes, b, o, &locals, &chosen, next, &mut new_types)?;
        bodies.push(Some(f));
        added.extend(new);
    }
    let add = Additions {
        func_types: new_types.list,
        funcs: added,
        ..Additions::default()
    };
    let mut map = Remap::identity(&p);
    let module = copy(&p, &mut map, add, &mut |i, b, map| match bodies[i].take() {
        Some(f) => Ok(f),
        None => rewrite(b, map, &[]),
    })?;
    Ok((module, stats))
}

/// What a function body refers to that the split must follow.
#[derive(Default)]
struct Refs {
    funcs: BTreeSet<u32>,
    /// Those of `funcs` it takes a reference to (`ref.func`), not only calls.
    taken: BTreeSet<u32>,
    globals: BTreeSet<u32>,
    /// It names a data or element segment: it stays with the segments, in the primary module.
    segments: bool,
}

fn refs(body: &wp::FunctionBody) -> Result<Refs> {
    let mut r = Refs::default();
    let mut ops = body.get_operators_reader().map_err(|e| e.to_string())?;
    while !ops.eof() {
        match ops.read().map_err(|e| e.to_string())? {
            wp::Operator::Call { function_index } | wp::Operator::ReturnCall { function_index } => {
                r.funcs.insert(function_index);
            }
            wp::Operator::RefFunc { function_index } => {
                r.funcs.insert(function_index);
                r.taken.insert(function_index);
            }
            wp::Operator::GlobalGet { global_index } | wp::Operator::GlobalSet { global_index } => {
                r.globals.insert(global_index);
            }
            wp::Operator::MemoryInit { .. }
            | wp::Operator::DataDrop { .. }
            | wp::Operator::TableInit { .. }
            | wp::Operator::ElemDrop { .. } => r.segments = true,
            _ => {}
        }
    }
    Ok(r)
}

/// A kept function the rest calls costs the primary module an entry in the table through which
/// the rest calls it (about 2.4 bytes of its gzip each, `tabled`). Where that function and every
/// kept function it calls, and they call, come to at most this many bytes, the rest gets a
/// copy of them instead and calls those. Measured on `cairn.wasm` (docs/size.md, "Copies in
/// the rest"): closures up to 200, 400, 600, 800 and 1,200 bytes took 362, 410, 767, 820 and 834
/// bytes off its gzip and put 4.3, 7.7, 9.3, 10.8 and 14.2 KB on its rest's (125.3 KB without
/// copies; pages fetch it only for the rarer statements). At 2,000 bytes, in the build after
/// those: 257 bytes fewer than at 1,200, its rest 3.8 KB more (143.1 KB).
const COPY_BYTES: usize = 2000;

/// The kept functions (by index among the defined ones) that the rest gets a copy of: for
/// each kept function a moved one calls, its closure over the kept functions it calls, when the
/// closure's bodies come to `limit` bytes or less. A function a moved one takes a reference to
/// is not copied (the copy would be another function), nor one that names a segment, nor one
/// whose closure does either. Calls from a copy to moved functions are calls within the rest.
fn copied(
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
fn split(
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
