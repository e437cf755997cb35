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
//! cairn-split account IN NAMED FUNCS REGIONS OUT  each function of IN with its name (from NAMED,
//!                                                the same module with names), size, and the
//!                                                bytes that stay and move (see `account`)
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
//! `cairn.load` is an import the embedder provides: it sees that REST is instantiated against
//! PRIMARY's exports (cairn's Worker does that in the background beforehand, `worker/split.js`)
//! and sets `loaded`, or traps when REST is not there. REST imports PRIMARY's memory, tables and the globals and
//! functions its functions use (exported by PRIMARY as `m`, `t<i>`, `g<i>`, `f<n>`), defines the
//! moved functions, and fills PRIMARY's table `rest` (exported as `rest`) with them through an
//! active element segment. A call from a kept function to a moved one goes through its stub; a
//! call between two moved functions stays a direct call within REST.
//!
//! Every index in PRIMARY moves by one for functions defined in IN (the new import comes first;
//! `ensure` comes after them);
//! exports keep their names, so the JS glue is unchanged but for the `cairn` import namespace.
//!
//! This file reads and writes modules (`parse`, `copy`, `resection`) and runs `instrument`,
//! `outline` and `reorder`; `split` and `table` are commands of their own modules, and
//! `outline`, `reorder` and `data` hold the analyses they use.

#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::process::ExitCode;

use wasm_encoder as we;
use wasm_encoder::reencode::{self, Reencode};
use wasmparser as wp;

mod account;
mod data;
#[cfg(test)]
mod data_tests;
mod outline;
mod reorder;
mod split;
mod table;
#[cfg(test)]
mod tests;

use split::{split, COPY_BYTES};
use table::table;

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
        ["account", input, named, funcs, regions, out] => {
            account::account(input, named, funcs, regions, out)
        }
        _ => Err(
            "usage: cairn-split instrument IN OUT | cairn-split outline IN FUNCS REGIONS OUT | cairn-split split IN HIT PRIMARY REST [MAP] | cairn-split reorder IN OUT | cairn-split table PRIMARY REST | cairn-split account IN NAMED FUNCS REGIONS OUT".into(),
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

pub(crate) fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
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

/// The size a cold region must have to be moved, in bytes: below it the call left in its place
/// and the stub of its new function in the primary module cost about what moving it saves
/// (on cairn.wasm, gzip of the primary module: 16 bytes 182,043, 24 bytes 181,729, 32 bytes
/// 181,771, 48 bytes 182,598, 96 bytes 184,212; on a later build 16 bytes 181,830 and 24 bytes
/// 182,583). A region must also be larger than its call (`outline::Move::cost`): 181,830 ->
/// 181,635 on that build, and the rest 1.3 KB smaller.
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
        "cairn-split: {} cold regions moved into functions of their own ({} bytes; cold in functions that ran: {} bytes, of which under {MIN_REGION} bytes or dearer to call than to keep {}, not movable: construct parameters {}, a branch out carrying values {})",
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
    let defined = p.bodies.len();
    let mut new_types = outline::NewTypes::new(types.0.len() as u32);
    let mut stats = outline::Stats::default();
    let mut bodies: Vec<Option<we::Function>> = Vec::with_capacity(defined);
    let mut added = Vec::new();
    let cold = cold_regions(bytes, &p, &types, hit_funcs, hit_regions, min, &mut stats)?;
    for (i, (b, (o, chosen))) in p.bodies.iter().zip(cold).enumerate() {
        let ty = &types.0[p.func_types[p.imported_funcs as usize + i] as usize];
        if chosen.is_empty() {
            bodies.push(None);
            continue;
        }
        let locals = outline::local_types(&ty.0, b)?;
        let next = (p.func_types.len() + added.len()) as u32;
        let (f, new) = outline::rewrite(bytes, b, &o, &locals, &chosen, next, &mut new_types)?;
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

/// Every defined function's operators, with the regions `outline` moves out of it: each cold
/// region of at least `min` bytes that can move, in a function of `hit_funcs` (none elsewhere).
type Cold<'a> = Vec<(outline::Ops<'a>, Vec<(outline::Region, outline::Move)>)>;

fn cold_regions<'a>(
    bytes: &[u8],
    p: &Parsed<'a>,
    types: &outline::Types,
    hit_funcs: &BTreeSet<usize>,
    hit_regions: &BTreeSet<usize>,
    min: usize,
    stats: &mut outline::Stats,
) -> Result<Cold<'a>> {
    let tails = outline::tail_starts(bytes)?;
    let mut all = Vec::with_capacity(p.bodies.len());
    let mut ops = Vec::with_capacity(p.bodies.len());
    for (i, b) in p.bodies.iter().enumerate() {
        let o = outline::ops(b)?;
        let ty = &types.0[p.func_types[p.imported_funcs as usize + i] as usize];
        all.push(outline::regions(&o, types, &ty.1, &tails[i]));
        ops.push(o);
    }
    let numbering = outline::Numbering::new(&all);
    let mut out = Vec::with_capacity(ops.len());
    for (i, (o, regions)) in ops.into_iter().zip(all).enumerate() {
        let chosen = if hit_funcs.contains(&i) {
            let number = |r: &outline::Region| numbering.number(i, r);
            outline::choose(&o, regions, &number, hit_regions, min, stats)
        } else {
            Vec::new()
        };
        out.push((o, chosen));
    }
    Ok(out)
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
