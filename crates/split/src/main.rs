//! `cairn-split`: cuts cairn's wasm module in two, so that a page downloads only the code that
//! opening a database and running its common statements needs (docs/size.md, "Split").
//!
//! ```text
//! cairn-split instrument IN OUT             a copy of IN that marks each function it runs
//! cairn-split split IN HIT PRIMARY REST     IN cut by HIT (the run functions, one index a line)
//! ```
//!
//! `instrument` gives every defined function a mutable global `h<i>` (exported), set to 1 when
//! the function starts; a run of the copy over a workload reads them back (`scripts/split.mjs`).
//! Function indices are the same in IN and in the copy.
//!
//! `split` keeps the functions listed in HIT, and every function that must stay (the start
//! function and any that names a data or element segment), in PRIMARY, in their places. Each
//! other function's body moves to REST, and PRIMARY keeps in its place a stub of the same type:
//!
//! ```text
//! (if (i32.eqz (global.get $loaded)) (then (call $cairn.load)))
//! (call_indirect $rest (type $t) (local.get 0) ... (i32.const slot))
//! ```
//!
//! `cairn.load` is an import the embedder provides: it instantiates REST (synchronously) against
//! PRIMARY's exports and sets `loaded`. REST imports PRIMARY's memory, tables and the globals and
//! functions its functions use (exported by PRIMARY as `m`, `t<i>`, `g<i>`, `f<i>`), defines the
//! moved functions, and fills PRIMARY's table `rest` (exported as `rest`) with them through an
//! active element segment. A call from a kept function to a moved one goes through its stub; a
//! call between two moved functions stays a direct call within REST.
//!
//! Every index in PRIMARY moves by one for functions defined in IN (the new import comes first);
//! exports keep their names, so the JS glue is unchanged but for the `cairn` import namespace.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::process::ExitCode;

use wasm_encoder as we;
use wasm_encoder::reencode::{self, Reencode};
use wasmparser as wp;

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
        ["split", input, hit, primary, rest] => split(input, hit, primary, rest),
        _ => Err(
            "usage: cairn-split instrument IN OUT | cairn-split split IN HIT PRIMARY REST".into(),
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

fn re<T>(r: std::result::Result<T, reencode::Error<Infallible>>) -> Result<T> {
    r.map_err(|e| e.to_string())
}

/// Writes the sections before the code that both outputs copy from the input as they are
/// (types), or with `map` applied and `extra` appended (imports through exports).
struct Sections {
    module: we::Module,
}

impl Sections {
    fn types(&mut self, p: &Parsed, extra: Option<we::FuncType>) -> Result<u32> {
        let mut types = we::TypeSection::new();
        if let Some(s) = p.types.clone() {
            re(RoundtripOnce.parse_type_section(&mut types, s))?;
        }
        let n = p.params.len() as u32;
        if let Some(f) = extra {
            types.ty().func_type(&f);
        }
        self.module.section(&types);
        Ok(n)
    }
}

/// Copies types as they are.
struct RoundtripOnce;
impl Reencode for RoundtripOnce {
    type Error = Infallible;
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
    let mut s = Sections {
        module: we::Module::new(),
    };
    s.types(&p, None)?;
    let mut id = RoundtripOnce;
    let mut imports = we::ImportSection::new();
    for i in &p.imports {
        re(id.parse_import(&mut imports, *i))?;
    }
    s.module.section(&imports);
    let mut funcs = we::FunctionSection::new();
    for &t in &p.func_types[p.imported_funcs as usize..] {
        funcs.function(t);
    }
    s.module.section(&funcs);
    if let Some(t) = p.table_section.clone() {
        let mut tables = we::TableSection::new();
        re(id.parse_table_section(&mut tables, t))?;
        s.module.section(&tables);
    }
    if let Some(m) = p.memory_section.clone() {
        let mut mems = we::MemorySection::new();
        re(id.parse_memory_section(&mut mems, m))?;
        s.module.section(&mems);
    }
    let mut globals = we::GlobalSection::new();
    if let Some(g) = p.global_section.clone() {
        re(id.parse_global_section(&mut globals, g))?;
    }
    let first_hit = p.globals.len() as u32;
    let defined = p.bodies.len() as u32;
    for _ in 0..defined {
        globals.global(
            we::GlobalType {
                val_type: we::ValType::I32,
                mutable: true,
                shared: false,
            },
            &we::ConstExpr::i32_const(0),
        );
    }
    s.module.section(&globals);
    let mut exports = we::ExportSection::new();
    if let Some(x) = p.exports.clone() {
        re(id.parse_export_section(&mut exports, x))?;
    }
    for i in 0..defined {
        exports.export(&format!("h{i}"), we::ExportKind::Global, first_hit + i);
    }
    s.module.section(&exports);
    if let Some(f) = p.start {
        s.module.section(&we::StartSection { function_index: f });
    }
    if let Some(e) = p.elements.clone() {
        let mut elems = we::ElementSection::new();
        re(id.parse_element_section(&mut elems, e))?;
        s.module.section(&elems);
    }
    if let Some(n) = p.data_count {
        s.module.section(&we::DataCountSection { count: n });
    }
    let mut code = we::CodeSection::new();
    for (i, body) in p.bodies.iter().enumerate() {
        let mut f = re(id.new_function_with_parsed_locals(body))?;
        f.instruction(&we::Instruction::I32Const(1));
        f.instruction(&we::Instruction::GlobalSet(first_hit + i as u32));
        let mut ops = body.get_operators_reader().map_err(|e| e.to_string())?;
        while !ops.eof() {
            f.instruction(&re(id.parse_instruction(&mut ops))?);
        }
        code.function(&f);
    }
    s.module.section(&code);
    if let Some(d) = p.data.clone() {
        let mut data = we::DataSection::new();
        re(id.parse_data_section(&mut data, d))?;
        s.module.section(&data);
    }
    write(out, &s.module.finish())
}

/// What a function body refers to that the split must follow.
#[derive(Default)]
struct Refs {
    funcs: BTreeSet<u32>,
    globals: BTreeSet<u32>,
    /// It names a data or element segment: it stays with the segments, in the primary module.
    segments: bool,
}

fn refs(body: &wp::FunctionBody) -> Result<Refs> {
    let mut r = Refs::default();
    let mut ops = body.get_operators_reader().map_err(|e| e.to_string())?;
    while !ops.eof() {
        match ops.read().map_err(|e| e.to_string())? {
            wp::Operator::Call { function_index }
            | wp::Operator::ReturnCall { function_index }
            | wp::Operator::RefFunc { function_index } => {
                r.funcs.insert(function_index);
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

fn split(input: &str, hit: &str, primary_out: &str, rest_out: &str) -> Result<()> {
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
    // The moved functions, by index among the defined ones, in slot order.
    let moved: Vec<usize> = (0..defined).filter(|i| !keep.contains(i)).collect();
    let mut slot = vec![u32::MAX; defined];
    for (k, &i) in moved.iter().enumerate() {
        slot[i] = k as u32;
    }
    let is_moved = |f: u32| f >= nimp && slot[(f - nimp) as usize] != u32::MAX;

    // What the moved functions use from the primary module.
    let mut used_funcs = BTreeSet::new();
    let mut used_globals = BTreeSet::new();
    for &i in &moved {
        used_funcs.extend(body_refs[i].funcs.iter().copied().filter(|&f| !is_moved(f)));
        used_globals.extend(body_refs[i].globals.iter().copied());
    }

    // Primary: the input with one more function import (cairn.load) after the others, so every
    // defined function's index moves up by one.
    let shift = |f: u32| if f < nimp { f } else { f + 1 };
    let load = nimp;
    let load_type = p.params.len() as u32;
    let rest_table = p.tables.len() as u32;
    let loaded = p.globals.len() as u32;
    let mut s = Sections {
        module: we::Module::new(),
    };
    s.types(&p, Some(we::FuncType::new([], [])))?;
    let mut map = Remap {
        funcs: (0..p.func_types.len() as u32).map(shift).collect(),
        globals: (0..p.globals.len() as u32).collect(),
    };
    let mut imports = we::ImportSection::new();
    let mut funcs_seen = 0;
    for i in &p.imports {
        re(map.parse_import(&mut imports, *i))?;
        if matches!(i.ty, wp::TypeRef::Func(_)) {
            funcs_seen += 1;
        }
    }
    debug_assert_eq!(funcs_seen, nimp);
    imports.import("cairn", "load", we::EntityType::Function(load_type));
    s.module.section(&imports);
    let mut funcs = we::FunctionSection::new();
    for &t in &p.func_types[nimp as usize..] {
        funcs.function(t);
    }
    s.module.section(&funcs);
    let mut tables = we::TableSection::new();
    if let Some(t) = p.table_section.clone() {
        re(map.parse_table_section(&mut tables, t))?;
    }
    let n_moved = moved.len() as u64;
    tables.table(we::TableType {
        element_type: we::RefType::FUNCREF,
        table64: false,
        minimum: n_moved,
        maximum: Some(n_moved),
        shared: false,
    });
    s.module.section(&tables);
    if let Some(m) = p.memory_section.clone() {
        let mut mems = we::MemorySection::new();
        re(map.parse_memory_section(&mut mems, m))?;
        s.module.section(&mems);
    }
    let mut globals = we::GlobalSection::new();
    if let Some(g) = p.global_section.clone() {
        re(map.parse_global_section(&mut globals, g))?;
    }
    globals.global(
        we::GlobalType {
            val_type: we::ValType::I32,
            mutable: true,
            shared: false,
        },
        &we::ConstExpr::i32_const(0),
    );
    s.module.section(&globals);
    let mut exports = we::ExportSection::new();
    if let Some(x) = p.exports.clone() {
        re(map.parse_export_section(&mut exports, x))?;
    }
    exports.export("m", we::ExportKind::Memory, 0);
    for t in 0..=rest_table {
        exports.export(&format!("t{t}"), we::ExportKind::Table, t);
    }
    exports.export("loaded", we::ExportKind::Global, loaded);
    for &g in &used_globals {
        exports.export(&format!("g{g}"), we::ExportKind::Global, g);
    }
    for &f in &used_funcs {
        exports.export(&format!("f{f}"), we::ExportKind::Func, shift(f));
    }
    s.module.section(&exports);
    if let Some(f) = p.start {
        s.module.section(&we::StartSection {
            function_index: shift(f),
        });
    }
    if let Some(e) = p.elements.clone() {
        let mut elems = we::ElementSection::new();
        re(map.parse_element_section(&mut elems, e))?;
        s.module.section(&elems);
    }
    if let Some(n) = p.data_count {
        s.module.section(&we::DataCountSection { count: n });
    }
    let mut code = we::CodeSection::new();
    for (i, body) in p.bodies.iter().enumerate() {
        if slot[i] == u32::MAX {
            re(map.parse_function_body(&mut code, body.clone()))?;
            continue;
        }
        let ty = p.func_types[nimp as usize + i];
        let mut f = we::Function::new([]);
        f.instruction(&we::Instruction::GlobalGet(loaded));
        f.instruction(&we::Instruction::I32Eqz);
        f.instruction(&we::Instruction::If(we::BlockType::Empty));
        f.instruction(&we::Instruction::Call(load));
        f.instruction(&we::Instruction::End);
        for a in 0..p.params[ty as usize] {
            f.instruction(&we::Instruction::LocalGet(a));
        }
        f.instruction(&we::Instruction::I32Const(slot[i] as i32));
        f.instruction(&we::Instruction::CallIndirect {
            type_index: ty,
            table_index: rest_table,
        });
        f.instruction(&we::Instruction::End);
        code.function(&f);
    }
    s.module.section(&code);
    if let Some(d) = p.data.clone() {
        let mut data = we::DataSection::new();
        re(map.parse_data_section(&mut data, d))?;
        s.module.section(&data);
    }
    write(primary_out, &s.module.finish())?;

    // Rest: imports what its functions use from the primary module, defines the moved functions.
    let mut q = Sections {
        module: we::Module::new(),
    };
    q.types(&p, None)?;
    let mut imports = we::ImportSection::new();
    let mut qfuncs = vec![u32::MAX; p.func_types.len()];
    let mut qglobals = vec![u32::MAX; p.globals.len()];
    for (n, &f) in used_funcs.iter().enumerate() {
        imports.import(
            "p",
            &format!("f{f}"),
            we::EntityType::Function(p.func_types[f as usize]),
        );
        qfuncs[f as usize] = n as u32;
    }
    let mut id = RoundtripOnce;
    for (t, ty) in p.tables.iter().enumerate() {
        imports.import("p", &format!("t{t}"), re(id.table_type(*ty))?);
    }
    imports.import(
        "p",
        &format!("t{rest_table}"),
        we::TableType {
            element_type: we::RefType::FUNCREF,
            table64: false,
            minimum: n_moved,
            maximum: Some(n_moved),
            shared: false,
        },
    );
    imports.import("p", "m", we::MemoryType::from(p.memories[0]));
    for (n, &g) in used_globals.iter().enumerate() {
        imports.import(
            "p",
            &format!("g{g}"),
            re(id.global_type(p.globals[g as usize]))?,
        );
        qglobals[g as usize] = n as u32;
    }
    q.module.section(&imports);
    let first_defined = used_funcs.len() as u32;
    for (k, &i) in moved.iter().enumerate() {
        qfuncs[nimp as usize + i] = first_defined + k as u32;
    }
    let mut funcs = we::FunctionSection::new();
    for &i in &moved {
        funcs.function(p.func_types[nimp as usize + i]);
    }
    q.module.section(&funcs);
    let mut elems = we::ElementSection::new();
    let slots: Vec<u32> = (0..moved.len() as u32).map(|k| first_defined + k).collect();
    elems.active(
        Some(rest_table),
        &we::ConstExpr::i32_const(0),
        we::Elements::Functions(Cow::Owned(slots)),
    );
    q.module.section(&elems);
    let mut map = Remap {
        funcs: qfuncs,
        globals: qglobals,
    };
    let mut code = we::CodeSection::new();
    for &i in &moved {
        re(map.parse_function_body(&mut code, p.bodies[i].clone()))?;
    }
    q.module.section(&code);
    write(rest_out, &q.module.finish())?;
    eprintln!(
        "cairn-split: {} of {} functions kept, {} moved; the moved ones use {} functions and {} globals of the primary",
        defined - moved.len(),
        defined,
        moved.len(),
        used_funcs.len(),
        used_globals.len()
    );
    Ok(())
}
