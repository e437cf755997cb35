//! `outline` on a module written here: the regions it moves, and the same results from the
//! module before and after, run by Node's WebAssembly (as the build runs the engine).

use std::collections::BTreeSet;
use std::process::Command;

use wasm_encoder as we;
use wasm_encoder::Instruction as I;

use crate::{outline_regions, I32_MUT};

/// `f0(x)`: nested blocks whose `if` arms write a local and branch out of themselves (one arm to
/// one label, the other to two), then an `if` with a result; `f1(x)`: an arm that returns from
/// the function; `g()`: the global `f1` sets; `f3(x)`: a `br_table` that leaves its region by
/// two labels and stays in it by two; `f4(x)`: an arm that leaves with a value by `br`, by
/// `br_if` (the value staying on the stack when it is not taken) and by `return`.
fn module() -> Vec<u8> {
    let mut types = we::TypeSection::new();
    types.ty().function([we::ValType::I32], [we::ValType::I32]);
    types.ty().function([we::ValType::I32], []);
    types.ty().function([], [we::ValType::I32]);
    let mut funcs = we::FunctionSection::new();
    for t in [0, 1, 2, 0, 0] {
        funcs.function(t);
    }
    let memories = one_memory();
    let mut globals = we::GlobalSection::new();
    globals.global(I32_MUT, &we::ConstExpr::i32_const(0));
    let mut exports = we::ExportSection::new();
    for (i, name) in ["f0", "f1", "g", "f3", "f4"].into_iter().enumerate() {
        exports.export(name, we::ExportKind::Func, i as u32);
    }
    let empty = we::BlockType::Empty;
    let mut f0 = we::Function::new([(1, we::ValType::I32)]);
    for i in [
        I::Block(empty), // region 0 ($out)
        I::Block(empty), // region 1 ($inner)
        I::LocalGet(0),
        I::I32Const(10),
        I::I32LtS,
        I::If(empty), // region 2: l = 3x; x == 5: out of $out
        I::LocalGet(0),
        I::I32Const(3),
        I::I32Mul,
        I::LocalSet(1),
        I::LocalGet(0),
        I::I32Const(5),
        I::I32Eq,
        I::BrIf(2),
        I::Else, // region 3: l = x + 7; x > 50: out of $inner; x == 20: l = 999, out of $out
        I::LocalGet(0),
        I::I32Const(7),
        I::I32Add,
        I::LocalSet(1),
        I::LocalGet(0),
        I::I32Const(50),
        I::I32GtS,
        I::BrIf(1),
        I::LocalGet(0),
        I::I32Const(20),
        I::I32Eq,
        I::If(empty), // region 4, inside region 3
        I::I32Const(999),
        I::LocalSet(1),
        I::Br(3),
        I::End,
        I::End,
        I::LocalGet(1),
        I::I32Const(1000),
        I::I32Add,
        I::LocalSet(1),
        I::End,
        I::LocalGet(1),
        I::I32Const(2),
        I::I32Mul,
        I::LocalSet(1),
        I::End,
        I::LocalGet(0),
        I::I32Const(0),
        I::I32LtS,
        I::If(we::BlockType::Result(we::ValType::I32)), // region 5
        I::I32Const(-1),
        I::Else, // region 6
        I::LocalGet(1),
        I::End,
        I::End,
    ] {
        f0.instruction(&i);
    }
    let mut f1 = we::Function::new([]);
    for i in [
        I::Block(empty), // region 7
        I::LocalGet(0),
        I::If(empty), // region 8: returns
        I::I32Const(1),
        I::GlobalSet(0),
        I::Return,
        I::End,
        I::I32Const(2),
        I::GlobalSet(0),
        I::End,
        I::End,
    ] {
        f1.instruction(&i);
    }
    let mut g = we::Function::new([]);
    g.instruction(&I::GlobalGet(0));
    g.instruction(&I::End);
    let mut f3 = we::Function::new([(1, we::ValType::I32)]);
    let add = |n: i32| [I::LocalGet(1), I::I32Const(n), I::I32Add, I::LocalSet(1)];
    for i in [I::Block(empty), I::Block(empty), I::Block(empty)] // regions 9 ($a), 10 ($b), 11 ($c)
        .into_iter()
        .chain([
            I::I32Const(1),
            I::LocalSet(1),
            I::Block(empty), // region 12 ($d), inside region 11
            I::LocalGet(0),
            I::BrTable(vec![1, 2, 3, 0].into(), 2), // $c, $b, $a, $d; others $b
            I::End,
        ])
        .chain(add(1000))
        .chain([I::End])
        .chain(add(10))
        .chain([I::End])
        .chain(add(100))
        .chain([I::End, I::LocalGet(1), I::End])
    {
        f3.instruction(&i);
    }
    let mut f4 = we::Function::new([]);
    let int = we::BlockType::Result(we::ValType::I32);
    for i in [
        I::Block(int),   // region 13 ($v)
        I::Block(empty), // region 14 ($w)
        I::LocalGet(0),
        I::I32Const(3),
        I::I32LtS,
        I::If(empty), // region 15
        I::LocalGet(0),
        I::I32Const(1),
        I::I32Eq,
        I::If(empty), // region 16, inside 15: 100 out to $v
        I::I32Const(100),
        I::Br(3),
        I::End,
        I::I32Const(200), // out to $v when x == 2, dropped when not
        I::LocalGet(0),
        I::I32Const(2),
        I::I32Eq,
        I::BrIf(2),
        I::Drop,
        I::LocalGet(0),
        I::I32Const(0),
        I::I32LtS,
        I::If(empty), // region 17, inside 15: -7 out of the function
        I::I32Const(-7),
        I::Return,
        I::End,
        I::End,
        I::LocalGet(0),
        I::I32Const(10),
        I::I32Mul,
        I::Br(1),
        I::End,
        I::I32Const(5),
        I::End,
        I::End,
    ] {
        f4.instruction(&i);
    }
    let mut code = we::CodeSection::new();
    for f in [&f0, &f1, &g, &f3, &f4] {
        code.function(f);
    }
    let mut m = we::Module::new();
    m.section(&types)
        .section(&funcs)
        .section(&memories)
        .section(&globals)
        .section(&exports)
        .section(&code);
    m.finish()
}

/// What `f0` computes, written in Rust.
fn f0(x: i32) -> i32 {
    let mut l;
    'out: {
        'inner: {
            if x < 10 {
                l = x * 3;
                if x == 5 {
                    break 'out;
                }
            } else {
                l = x + 7;
                if x > 50 {
                    break 'inner;
                }
                if x == 20 {
                    l = 999;
                    break 'out;
                }
            }
            l += 1000;
        }
        l *= 2;
    }
    if x < 0 {
        -1
    } else {
        l
    }
}

/// What `f3` computes.
fn f3(x: i32) -> i32 {
    match x {
        0 => 111,
        2 => 1,
        3 => 1111,
        _ => 101,
    }
}

/// What `f4` computes.
fn f4(x: i32) -> i32 {
    match x {
        x if x < 0 => -7,
        1 => 100,
        2 => 200,
        _ => x * 10,
    }
}

/// What `script` (CommonJS, its arguments `args`) prints, run by Node; fails on its errors.
pub fn node<A: AsRef<std::ffi::OsStr>>(script: &str, args: &[A]) -> String {
    let out = Command::new("node")
        .args(["--input-type=commonjs", "-e", script])
        .args(args)
        .output()
        .expect("node runs (the build needs it too)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `modules` written to `<name>-<pid>/0.wasm`, `1.wasm`, ... in the temporary directory: the
/// directory (for the caller to remove) and the files' paths, to hand to `node`.
fn written(name: &str, modules: &[&[u8]]) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let paths = (modules.iter().enumerate())
        .map(|(i, m)| {
            let p = dir.join(format!("{i}.wasm"));
            std::fs::write(&p, m).unwrap();
            p
        })
        .collect();
    (dir, paths)
}

/// One memory of one page: the tool reads modules with one memory, as rustc makes them.
pub fn one_memory() -> we::MemorySection {
    let mut memories = we::MemorySection::new();
    memories.memory(we::MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    memories
}

const XS: std::ops::RangeInclusive<i32> = -3..=60;

/// Each module's `f0` over `XS`, then `g()` after `f1(0)`, `f1(1)` and `f1(7)`, then `f3` over
/// -1..=5, then `f4` over -2..=4.
fn run(modules: &[&[u8]]) -> Vec<Vec<i32>> {
    let dir = std::env::temp_dir().join(format!("cairn-split-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths = Vec::new();
    for (i, m) in modules.iter().enumerate() {
        let p = dir.join(format!("{i}.wasm"));
        std::fs::write(&p, m).unwrap();
        paths.push(p);
    }
    let script = format!(
        "const fs = require('fs'); const out = [];
         for (const path of process.argv.slice(1)) {{
           const e = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(path))).exports;
           const r = [];
           for (let x = {}; x <= {}; x++) r.push(e.f0(x));
           for (const x of [0, 1, 7]) {{ e.f1(x); r.push(e.g()); }}
           for (let x = -1; x <= 5; x++) r.push(e.f3(x));
           for (let x = -2; x <= 4; x++) r.push(e.f4(x));
           out.push(r.join(','));
         }}
         console.log(out.join('\\n'));",
        XS.start(),
        XS.end()
    );
    let out = node(&script, &paths);
    std::fs::remove_dir_all(&dir).unwrap();
    out.lines()
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect()
}

/// What `run` gives for `module()` as written, computed here.
fn expected() -> Vec<i32> {
    XS.map(f0)
        .chain([2, 1, 1])
        .chain((-1..=5).map(f3))
        .chain((-2..=4).map(f4))
        .collect()
}

#[test]
fn outlined_regions_give_the_same_results() {
    let before = module();
    // Functions 0, 1 and 3 ran; of their regions, only the outer blocks (0, 1, 7, 9 and 10)
    // were entered.
    // (The tails, numbered from 18, count as entered here: `tails_a_run_did_not_reach_move`
    // tests those.)
    let funcs = BTreeSet::from([0, 1, 3, 4]);
    let regions = BTreeSet::from_iter([0, 1, 7, 9, 10, 13, 14].into_iter().chain(18..100));
    let (after, stats) = outline_regions(&before, &funcs, &regions, 0).unwrap();
    wasmparser::Validator::new()
        .validate_all(&after)
        .expect("the outlined module validates");
    // Regions 2, 3 (with 4 inside), 5, 6, 8, 11 (with 12 inside) and 15 (with 16 and 17).
    assert_eq!(stats.moved, 7);
    let count = |m: &[u8]| {
        wasmparser::Parser::new(0)
            .parse_all(m)
            .filter(|p| matches!(p, Ok(wasmparser::Payload::CodeSectionEntry(_))))
            .count()
    };
    assert_eq!((count(&before), count(&after)), (5, 12));

    let expected = expected();
    let got = run(&[&before, &after]);
    assert_eq!(got[0], expected, "the module as written");
    assert_eq!(got[1], expected, "the module with its regions outlined");
}

/// `mix(a: i64, b: i32, c: f64) -> f64` with locals `x: i32` and `y: i64`: when `b` is not 0,
/// an arm writes `x = b * 3`, `y = a + b` and `c = c * 2`; then `y + c + x`. The arm reads and
/// writes locals of three types whose index order is not their type order, so its outlined
/// function's parameters and results come in another order than the locals' (`canonical`).
fn mixed_module() -> Vec<u8> {
    let mut types = we::TypeSection::new();
    types.ty().function(
        [we::ValType::I64, we::ValType::I32, we::ValType::F64],
        [we::ValType::F64],
    );
    let mut funcs = we::FunctionSection::new();
    funcs.function(0);
    let mut exports = we::ExportSection::new();
    exports.export("mix", we::ExportKind::Func, 0);
    let mut f = we::Function::new([(1, we::ValType::I32), (1, we::ValType::I64)]);
    for i in [
        I::Block(we::BlockType::Empty),
        I::LocalGet(1),
        I::If(we::BlockType::Empty),
        I::LocalGet(1),
        I::I32Const(3),
        I::I32Mul,
        I::LocalSet(3),
        I::LocalGet(0),
        I::LocalGet(1),
        I::I64ExtendI32S,
        I::I64Add,
        I::LocalSet(4),
        I::LocalGet(2),
        I::F64Const(2.0.into()),
        I::F64Mul,
        I::LocalSet(2),
        I::End,
        I::End,
        I::LocalGet(4),
        I::F64ConvertI64S,
        I::LocalGet(2),
        I::F64Add,
        I::LocalGet(3),
        I::F64ConvertI32S,
        I::F64Add,
        I::End,
    ] {
        f.instruction(&i);
    }
    let mut code = we::CodeSection::new();
    code.function(&f);
    let mut m = we::Module::new();
    m.section(&types)
        .section(&funcs)
        .section(&one_memory())
        .section(&exports)
        .section(&code);
    m.finish()
}

#[test]
fn a_region_over_locals_of_several_types_computes_what_it_did() {
    let before = mixed_module();
    wasmparser::Validator::new()
        .validate_all(&before)
        .expect("the test module validates");
    // The function ran, its outer block was entered, the arm was not.
    let (after, stats) =
        outline_regions(&before, &BTreeSet::from([0]), &BTreeSet::from([0]), 0).unwrap();
    wasmparser::Validator::new()
        .validate_all(&after)
        .expect("the outlined module validates");
    assert_eq!(stats.moved, 1, "the arm moved");
    let (dir, paths) = written("cairn-mixed-test", &[&before, &after]);
    let out = node(
        "const fs = require('fs'); const out = [];
         for (const path of process.argv.slice(1)) {
           const e = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(path))).exports;
           out.push([e.mix(10n, 0, 1.5), e.mix(10n, 4, 1.5), e.mix(-7n, -2, 0.25)].join(','));
         }
         console.log(out.join('\\n'));",
        &paths,
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // By hand: b = 0 leaves x = 0, y = 0: 1.5; b = 4: 14 + 3 + 12 = 29; b = -2: -9 + 0.5 - 6.
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["1.5,29,-14.5", "1.5,29,-14.5"]
    );
}

#[test]
fn regions_entered_or_too_small_stay() {
    let before = module();
    let funcs = BTreeSet::from([0, 1, 3, 4]);
    // The 18 bodies and arms, and the tails after them.
    let all = BTreeSet::from_iter(0..100);
    let (_, stats) = outline_regions(&before, &funcs, &all, 0).unwrap();
    assert_eq!(stats.moved, 0, "every region was entered");
    let (_, stats) = outline_regions(&before, &BTreeSet::new(), &BTreeSet::new(), 0).unwrap();
    assert_eq!(
        stats.moved, 0,
        "no function ran: the split moves them whole"
    );
    let (_, stats) = outline_regions(
        &before,
        &funcs,
        &BTreeSet::from([0, 1, 7, 9, 10, 13, 14]),
        1000,
    )
    .unwrap();
    assert_eq!(stats.moved, 0, "every region is under the size");
}

#[test]
fn export_names_are_short_and_distinct() {
    let names: Vec<String> = (0..62 * 62).map(crate::func_export).collect();
    assert_eq!(
        (names[0].as_str(), names[61].as_str(), names[62].as_str()),
        ("f0", "fZ", "f10")
    );
    assert!(names.iter().all(|n| n.len() <= 3));
    assert_eq!(BTreeSet::from_iter(&names).len(), names.len());
}

/// A module whose functions refer to each other every way an index can: direct calls, a table
/// filled by an element segment and called through, `ref.func` in a global's initializer, an
/// import, the start function and exports. Two kinds of function alternate (`wide` ones, alike,
/// and `narrow` ones, alike), so an order that puts alike ones together moves them.
fn module_with_references() -> Vec<u8> {
    let i32s = |n| vec![we::ValType::I32; n];
    let mut types = we::TypeSection::new();
    types.ty().function(i32s(1), i32s(1)); // 0
    types.ty().function([], []); // 1
    types.ty().function([], i32s(1)); // 2
    let mut imports = we::ImportSection::new();
    // Function 0.
    imports.import("env", "twice", we::EntityType::Function(0));
    // Defined: 1..=8 alternate wide and narrow; 9 calls through the table; 10 is the start
    // function; 11 reads the global the start function set.
    let mut funcs = we::FunctionSection::new();
    for t in [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2] {
        funcs.function(t);
    }
    let mut tables = we::TableSection::new();
    tables.table(we::TableType {
        element_type: we::RefType::FUNCREF,
        minimum: 4,
        maximum: Some(4),
        table64: false,
        shared: false,
    });
    let mut globals = we::GlobalSection::new();
    globals.global(I32_MUT, &we::ConstExpr::i32_const(0));
    globals.global(
        we::GlobalType {
            val_type: we::ValType::Ref(we::RefType::FUNCREF),
            mutable: false,
            shared: false,
        },
        &we::ConstExpr::ref_func(8),
    );
    let mut exports = we::ExportSection::new();
    // Not `f<n>`: the split gives those names to what the primary exports to the rest.
    for f in 1..=9 {
        exports.export(&format!("e{f}"), we::ExportKind::Func, f);
    }
    exports.export("g", we::ExportKind::Func, 11);
    let mut elements = we::ElementSection::new();
    elements.active(
        Some(0),
        &we::ConstExpr::i32_const(0),
        we::Elements::Functions([2, 3, 6, 0].as_slice().into()),
    );
    let mut code = we::CodeSection::new();
    for f in 1..=8u32 {
        let mut b = we::Function::new([]);
        if f % 2 == 1 {
            // wide: x * f + 1000, then calls of the function before (an import for the first)
            for i in [
                I::LocalGet(0),
                I::I32Const(f as i32),
                I::I32Mul,
                I::I32Const(1000),
                I::I32Add,
                I::I32Const(0x0123_4567),
                I::I32Const(0x0765_4321),
                I::I32Xor,
                I::I32Const(0x0046_2064),
                I::I32Xor,
                I::I32Add,
                I::Call(f - 1),
            ] {
                b.instruction(&i);
            }
        } else {
            // narrow: x - f, then the function before it
            for i in [
                I::LocalGet(0),
                I::I32Const(f as i32),
                I::I32Sub,
                I::Call(f - 1),
            ] {
                b.instruction(&i);
            }
        }
        b.instruction(&I::End);
        code.function(&b);
    }
    let mut through_table = we::Function::new([]);
    for i in [
        I::LocalGet(0),
        I::LocalGet(0),
        I::I32Const(3),
        I::I32And,
        I::CallIndirect {
            type_index: 0,
            table_index: 0,
        },
        I::End,
    ] {
        through_table.instruction(&i);
    }
    code.function(&through_table);
    let mut start = we::Function::new([]);
    for i in [
        I::I32Const(5),
        I::GlobalGet(1),
        I::RefIsNull,
        I::I32Add,
        I::Call(1),
        I::GlobalSet(0),
        I::End,
    ] {
        start.instruction(&i);
    }
    code.function(&start);
    let mut g = we::Function::new([]);
    g.instruction(&I::GlobalGet(0));
    g.instruction(&I::End);
    code.function(&g);
    let mut m = we::Module::new();
    m.section(&types)
        .section(&imports)
        .section(&funcs)
        .section(&tables)
        .section(&one_memory())
        .section(&globals)
        .section(&exports)
        .section(&we::StartSection { function_index: 10 })
        .section(&elements)
        .section(&code);
    m.finish()
}

#[test]
fn reordered_functions_compute_what_they_did() {
    let before = module_with_references();
    wasmparser::Validator::new()
        .validate_all(&before)
        .expect("the test module validates");
    let after = crate::reordered(&before).unwrap();
    wasmparser::Validator::new()
        .validate_all(&after)
        .expect("the reordered module validates");
    let bodies = |m: &[u8]| -> Vec<Vec<u8>> {
        wasmparser::Parser::new(0)
            .parse_all(m)
            .filter_map(|p| match p {
                Ok(wasmparser::Payload::CodeSectionEntry(b)) => Some(b.as_bytes().to_vec()),
                _ => None,
            })
            .collect()
    };
    assert_ne!(bodies(&before), bodies(&after), "the order changed");
    assert_eq!(bodies(&before).len(), bodies(&after).len());

    let (dir, paths) = written("cairn-reorder-test", &[&before, &after]);
    let out = node(
        "const fs = require('fs'); const out = [];
         for (const path of process.argv.slice(1)) {
           const env = { twice: (x) => 2 * x };
           const e = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(path)), { env }).exports;
           const r = [e.g()];
           for (let f = 1; f <= 9; f++) for (const x of [-7, 0, 3, 11, 40]) r.push(e['e' + f](x));
           out.push(r.join(','));
         }
         console.log(out.join('\\n'));",
        &paths,
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2);
    // f1(x) = twice(x + 1 + 1000 + xors) computed by hand for one value, so a module that
    // computes nothing right in both cases fails too.
    let xors = 0x0123_4567 ^ 0x0765_4321 ^ 0x0046_2064;
    let f1_3 = 2 * (3 + 1000 + xors);
    assert!(
        lines[0].split(',').nth(1 + 2).unwrap() == f1_3.to_string(),
        "{}",
        lines[0]
    );
    assert_eq!(lines[0], lines[1], "the same results before and after");
}

/// Function 0 `cold(x)`, 1 `hot(x)` = x * 3 + 1, 2 `main(x)` = `hot` applied 200 times (the
/// calls that make it lead); data at 16, 24 (5 bytes after the first ends) and 2,000; the
/// memory defined and exported, or imported from `env.mem`.
fn module_with_data(imported_memory: bool) -> Vec<u8> {
    let mut types = we::TypeSection::new();
    types.ty().function([we::ValType::I32], [we::ValType::I32]);
    let mut imports = we::ImportSection::new();
    if imported_memory {
        imports.import(
            "env",
            "mem",
            we::EntityType::Memory(we::MemoryType {
                minimum: 1,
                maximum: None,
                memory64: false,
                shared: false,
                page_size_log2: None,
            }),
        );
    }
    let mut funcs = we::FunctionSection::new();
    for _ in 0..3 {
        funcs.function(0);
    }
    let mut exports = we::ExportSection::new();
    exports.export("main", we::ExportKind::Func, 2);
    exports.export("cold", we::ExportKind::Func, 0);
    if !imported_memory {
        exports.export("mem", we::ExportKind::Memory, 0);
    }
    let mut code = we::CodeSection::new();
    let mut cold = we::Function::new([]);
    for i in [I::LocalGet(0), I::I32Const(-5), I::I32Mul, I::End] {
        cold.instruction(&i);
    }
    code.function(&cold);
    let mut hot = we::Function::new([]);
    for i in [
        I::LocalGet(0),
        I::I32Const(3),
        I::I32Mul,
        I::I32Const(1),
        I::I32Add,
        I::End,
    ] {
        hot.instruction(&i);
    }
    code.function(&hot);
    let mut main = we::Function::new([]);
    main.instruction(&I::LocalGet(0));
    for _ in 0..200 {
        main.instruction(&I::Call(1));
    }
    main.instruction(&I::End);
    code.function(&main);
    let mut data = we::DataSection::new();
    for (at, bytes) in [(16, &b"abc"[..]), (24, b"defg"), (2000, b"xyz")] {
        data.active(0, &we::ConstExpr::i32_const(at), bytes.iter().copied());
    }
    let mut m = we::Module::new();
    m.section(&types).section(&imports).section(&funcs);
    if !imported_memory {
        m.section(&one_memory());
    }
    m.section(&exports)
        .section(&we::DataCountSection { count: 3 })
        .section(&code)
        .section(&data);
    m.finish()
}

#[test]
fn the_most_called_function_leads_and_data_is_joined_only_over_a_memory_of_its_own() {
    let segments = |m: &[u8]| -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        for p in wasmparser::Parser::new(0).parse_all(m) {
            if let Ok(wasmparser::Payload::DataSection(s)) = p {
                for d in s {
                    let d = d.unwrap();
                    let wasmparser::DataKind::Active { offset_expr, .. } = d.kind else {
                        panic!("passive")
                    };
                    let Ok(wasmparser::Operator::I32Const { value }) =
                        offset_expr.get_operators_reader().read()
                    else {
                        panic!("not a constant")
                    };
                    out.push((value as u32, d.data.to_vec()));
                }
            }
        }
        out
    };
    let first_body = |m: &[u8]| -> Vec<u8> {
        wasmparser::Parser::new(0)
            .parse_all(m)
            .find_map(|p| match p {
                Ok(wasmparser::Payload::CodeSectionEntry(b)) => Some(b.as_bytes().to_vec()),
                _ => None,
            })
            .unwrap()
    };
    let dir = std::env::temp_dir().join(format!("cairn-join-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for imported in [false, true] {
        let before = module_with_data(imported);
        wasmparser::Validator::new()
            .validate_all(&before)
            .expect("the test module validates");
        let after = crate::reordered(&before).unwrap();
        wasmparser::Validator::new()
            .validate_all(&after)
            .expect("the reordered module validates");
        // `hot` (the body x * 3 + 1, 200 calls) is the first function now.
        let hot = first_body(&after);
        assert_eq!(hot, [0, 0x20, 0, 0x41, 3, 0x6c, 0x41, 1, 0x6a, 0x0b]);
        if imported {
            assert_eq!(
                segments(&after),
                segments(&before),
                "an imported memory's gaps are not the module's to write"
            );
        } else {
            assert_eq!(
                segments(&after),
                vec![(16, b"abc\0\0\0\0\0defg".to_vec()), (2000, b"xyz".to_vec())],
                "joined across 5 bytes, not across 1,972"
            );
        }
        let paths: Vec<_> = [&before, &after]
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let p = dir.join(format!("{imported}-{i}.wasm"));
                std::fs::write(&p, m).unwrap();
                p
            })
            .collect();
        // The memory after instantiation, and the functions' results, before and after. An
        // imported memory is given with bytes of its own in the gaps, which must stay.
        let out = node(
            "const fs = require('fs'); const out = [];
             for (const path of process.argv.slice(1)) {
               const mem = new WebAssembly.Memory({ initial: 1 });
               new Uint8Array(mem.buffer).fill(7);
               const e = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(path)), { env: { mem } }).exports;
               const bytes = new Uint8Array((e.mem ?? mem).buffer, 0, 2048);
               out.push([e.main(1), e.main(-4), e.cold(6), Buffer.from(bytes).toString('hex')].join(','));
             }
             console.log(out.join('\\n'));",
            &paths,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0], lines[1],
            "the same memory and results before and after"
        );
        let fields: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(fields[2], "-30");
        assert!(
            fields[3].starts_with(if imported { "0707" } else { "0000" }),
            "{}",
            &fields[3][..8]
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_split_module_reordered_and_tabled_computes_what_it_did() {
    split_reordered_and_tabled(0, 4);
}

/// With copies: the wide functions 3, 5 and 7 call only moved ones, so the rest gets a copy of
/// each (and calls them directly); function 1 calls an import and stays the rest's one call
/// into the primary module.
#[test]
fn kept_functions_copied_to_the_rest_compute_what_they_did() {
    split_reordered_and_tabled(200, 1);
}

/// `module_with_references` split with copies up to `copy_bytes`, the rest then calling
/// `imports` of the primary's functions, reordered, tabled, and run in Node against the whole.
fn split_reordered_and_tabled(copy_bytes: usize, imports: usize) {
    // The narrow functions (2, 4, 6, 8) move to the rest; each calls the wide one before it,
    // which stays, so the rest calls those of the primary module.
    let whole = module_with_references();
    let dir = std::env::temp_dir().join(format!(
        "cairn-table-test-{}-{copy_bytes}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let at = |f: &str| dir.join(f).to_str().unwrap().to_string();
    std::fs::write(at("whole.wasm"), &whole).unwrap();
    // Defined functions by index among the defined ones: 0, 2, 4, 6 are functions 1, 3, 5, 7.
    std::fs::write(at("hit"), "0\n2\n4\n6\n8\n9\n10\n").unwrap();
    crate::split(
        &at("whole.wasm"),
        &at("hit"),
        None,
        &at("primary.wasm"),
        &at("rest.wasm"),
        copy_bytes,
    )
    .unwrap();
    // The primary's functions in reverse order, so that the table's slots do not follow the
    // order in which the split named its exports, as `reorder` leaves them in a real module.
    let primary = std::fs::read(at("primary.wasm")).unwrap();
    let defined = crate::parse(&primary).unwrap().bodies.len();
    let primary = crate::permuted(&primary, &(0..defined).rev().collect::<Vec<_>>(), None).unwrap();
    let rest = crate::reordered(&std::fs::read(at("rest.wasm")).unwrap()).unwrap();
    let func_imports = |m: &[u8]| {
        let mut n = 0;
        for p in wasmparser::Parser::new(0).parse_all(m) {
            if let Ok(wasmparser::Payload::ImportSection(s)) = p {
                n += s
                    .into_imports()
                    .filter(|i| matches!(i.as_ref().unwrap().ty, wasmparser::TypeRef::Func(_)))
                    .count();
            }
        }
        n
    };
    assert_eq!(
        func_imports(&rest),
        imports,
        "the primary's functions the rest calls"
    );
    let (primary, rest) = crate::table::tabled(&primary, &rest).unwrap();
    for m in [&primary, &rest] {
        wasmparser::Validator::new().validate_all(m).unwrap();
    }
    std::fs::write(at("primary.wasm"), &primary).unwrap();
    std::fs::write(at("rest.wasm"), &rest).unwrap();
    assert_eq!(func_imports(&rest), 0, "through the table, not imports");
    let mut exports = Vec::new();
    for p in wasmparser::Parser::new(0).parse_all(&primary) {
        if let Ok(wasmparser::Payload::ExportSection(s)) = p {
            for x in s {
                exports.push(x.unwrap().name.to_string());
            }
        }
    }
    assert!(
        exports.iter().any(|n| n == crate::table::CALLS_TABLE),
        "{exports:?}"
    );
    assert!(!exports.iter().any(|n| n.starts_with('f')), "{exports:?}");

    let out = node(
        "const fs = require('fs');
         const [wholePath, primaryPath, restPath] = process.argv.slice(1);
         const env = { twice: (x) => 2 * x };
         const run = (e) => {
           const r = [e.g()];
           for (let f = 1; f <= 9; f++) for (const x of [-7, 0, 3, 11, 40]) r.push(e['e' + f](x));
           return r.join(',');
         };
         const whole = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(wholePath)), { env }).exports;
         let loads = 0;
         const p = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(primaryPath)), {
           env,
           cairn: { load() {
             loads++;
             new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(restPath)), { p });
             p.loaded.value = 1;
           } },
         }).exports;
         console.log(run(whole));
         console.log(run(p));
         console.log(loads);",
        &[at("whole.wasm"), at("primary.wasm"), at("rest.wasm")],
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], lines[1],
        "the split module computes what the whole one does"
    );
    assert_eq!(lines[2], "1", "through the rest, loaded once");
}

/// What a run of the instrumented `module()` over `f0` for `xs`, `f3(1)` and `f4(0)` entered:
/// (functions, regions), as `scripts/split.mjs` reads them back.
fn profile_of(module: &[u8], xs: &[i32]) -> (BTreeSet<usize>, BTreeSet<usize>) {
    let dir = std::env::temp_dir().join(format!("cairn-tails-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let at = |f: &str| dir.join(f).to_str().unwrap().to_string();
    std::fs::write(at("in.wasm"), module).unwrap();
    crate::instrument(&at("in.wasm"), &at("marked.wasm")).unwrap();
    let out = node(
        &format!(
            "const fs = require('fs');
             const e = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(process.argv[1]))).exports;
             for (const x of [{}]) e.f0(x);
             e.f3(1); e.f4(0);
             const set = (p) => Object.keys(e).filter((k) => k[0] === p && /^.\\d+$/.test(k) && e[k].value).map((k) => k.slice(1));
             console.log(set('h').join(','));
             console.log(set('r').join(','));",
            xs.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
        ),
        &[at("marked.wasm")],
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let mut lines = out.lines().map(|l| {
        l.split(',')
            .filter(|v| !v.is_empty())
            .map(|v| v.parse().unwrap())
            .collect::<BTreeSet<usize>>()
    });
    (lines.next().unwrap(), lines.next().unwrap())
}

#[test]
fn tails_a_run_did_not_reach_move() {
    // A run that takes only some of each function's paths: the rest of a block or an arm after
    // a `br_if` or a nested construct it did not get past is a tail it did not enter.
    let before = module();
    let (funcs, regions) = profile_of(&before, &[0, 5, 7, 60]);
    let (after, stats) = outline_regions(&before, &funcs, &regions, 0).unwrap();
    wasmparser::Validator::new()
        .validate_all(&after)
        .expect("the outlined module validates");
    // Counting every tail as entered moves fewer regions: some of those moved are tails.
    let (_, bodies_only) = outline_regions(
        &before,
        &funcs,
        &regions.iter().copied().chain(18..100).collect(),
        0,
    )
    .unwrap();
    assert!(
        stats.moved > bodies_only.moved,
        "{} regions moved, {} without the tails",
        stats.moved,
        bodies_only.moved
    );
    // Every input, those the run took and those it did not, gives what the module as written
    // gives (the moved tails run, through their calls, for the others).
    let expected = expected();
    let got = run(&[&before, &after]);
    assert_eq!(got[0], expected, "the module as written");
    assert_eq!(got[1], expected, "the module with its cold tails outlined");
}
