//! `split` with a linker map: which constants move to the rest, run by Node's WebAssembly (as
//! the build runs the engine) before and after the rest is loaded.

use wasm_encoder as we;
use wasm_encoder::Instruction as I;

use crate::data::{self, Named, Object};

/// The constants, as the map below lists them: (name, address, bytes).
fn constants() -> Vec<(&'static str, u32, Vec<u8>)> {
    let word = |v: u32| v.to_le_bytes().to_vec();
    vec![
        // Read by `kept` at its address; holds a pointer to `c`.
        ("a", 1024, [word(1072), b"aaaaaaaaaaaa".to_vec()].concat()),
        // Named only by `moved`.
        ("b", 1040, b"only the rest!!!".to_vec()),
        // Reached through `a`'s pointer.
        ("c", 1072, b"through a's word".to_vec()),
        // Named only by `moved`.
        ("d", 1088, b"the rest, again.".to_vec()),
        // Named by `table` as `e - 4`, a folded offset.
        ("e", 1200, b"table at e, -4 !".to_vec()),
        // Its address is stored by `store`.
        ("f", 1300, b"a pointer stored".to_vec()),
        // Reached through the writable static's pointer.
        ("g", 1320, b"held by a static".to_vec()),
        // Only given to a call of `reader`, a moved function.
        ("h", 1336, b"passed to a call".to_vec()),
    ]
}

/// A module whose data holds `constants()` (one segment, zeros between them) and a writable
/// static after them, and whose functions are `kept` (0: reads `a`), `table(i)` (1: reads `e - 4
/// + i`), `store` (2: stores `f`'s address at 0), `moved` (3: adds `b`'s and `d`'s first words),
/// `byte(x)` (4: the byte at `x`), `reader(x)` (5: the word at `x`) and `passes` (6: `reader(h)`).
fn module() -> Vec<u8> {
    let mut types = we::TypeSection::new();
    types.ty().function([], [we::ValType::I32]);
    types.ty().function([we::ValType::I32], [we::ValType::I32]);
    types.ty().function([], []);
    let mut funcs = we::FunctionSection::new();
    for t in [0, 1, 2, 0, 1, 1, 0] {
        funcs.function(t);
    }
    let memories = crate::tests::one_memory();
    let mut exports = we::ExportSection::new();
    for (i, name) in [
        "kept", "table", "store", "moved", "byte", "reader", "passes",
    ]
    .into_iter()
    .enumerate()
    {
        exports.export(name, we::ExportKind::Func, i as u32);
    }
    exports.export("memory", we::ExportKind::Memory, 0);
    let load = we::MemArg {
        offset: 0,
        align: 2,
        ..BYTE
    };
    let byte = we::MemArg { align: 0, ..load };
    let bodies: [Vec<I>; 7] = [
        vec![
            I::I32Const(1024),
            I::I32Load(we::MemArg { offset: 4, ..load }),
        ],
        vec![
            I::I32Const(1196),
            I::LocalGet(0),
            I::I32Add,
            I::I32Load8U(byte),
        ],
        vec![I::I32Const(0), I::I32Const(1300), I::I32Store(load)],
        vec![
            I::I32Const(1040),
            I::I32Load(load),
            I::I32Const(1088),
            I::I32Load(load),
            I::I32Add,
        ],
        vec![I::LocalGet(0), I::I32Load8U(byte)],
        vec![I::LocalGet(0), I::I32Load(load)],
        vec![I::I32Const(1336), I::Call(5)],
    ];
    let mut code = we::CodeSection::new();
    for b in bodies {
        let mut f = we::Function::new([]);
        for i in b.iter().chain([&I::End]) {
            f.instruction(i);
        }
        code.function(&f);
    }
    let mut bytes = vec![0u8; 1352 - 1024];
    for (_, at, b) in constants() {
        bytes[(at - 1024) as usize..][..b.len()].copy_from_slice(&b);
    }
    let mut data = we::DataSection::new();
    data.active(0, &we::ConstExpr::i32_const(1024), bytes);
    // A writable static holding a pointer to `g`.
    data.active(0, &we::ConstExpr::i32_const(1400), 1320u32.to_le_bytes());
    let mut m = we::Module::new();
    m.section(&types)
        .section(&funcs)
        .section(&memories)
        .section(&exports)
        .section(&code)
        .section(&data);
    m.finish()
}

/// The linker's map of `module()`'s data, laid out as `wasm-ld --Map` writes it: symbols under
/// their input sections (one whose name starts with a dot, as rustc's anonymous constants do),
/// and a `.data` section whose input section is not a constant.
fn map() -> String {
    let mut s = String::from("    Addr      Off     Size Out     In      Symbol\n");
    s += "       -      100      200 CODE\n";
    s += "     400      300      148 .rodata\n";
    for (name, at, b) in constants() {
        s += &format!(
            "{at:8x} {:8x} {:8x}         lib.o:(.rodata..Lanon.{name})\n",
            at - 100,
            b.len()
        );
        s += &format!(
            "{at:8x} {:8x} {:8x}                 .Lanon.{name}\n",
            at - 100,
            b.len()
        );
    }
    s += "     578      400        4 .data\n";
    s += "     578      400        4         lib.o:(.data.STATIC)\n";
    s
}

#[test]
fn the_map_gives_the_constants_and_nothing_else() {
    let objects = data::read_map(&map()).unwrap();
    let expected: Vec<Object> = constants()
        .iter()
        .map(|(_, at, b)| Object {
            start: *at,
            end: at + b.len() as u32,
        })
        .collect();
    assert_eq!(objects, expected);
    assert!(data::read_map("no header\n").is_err());
    let overlapping = map()
        + "     400      300      148 .rodata\n"
        + "     41c      300       10         lib.o:(.rodata..Lanon.x)\n";
    assert!(data::read_map(&overlapping).is_err());
}

#[test]
fn merged_strings_are_cut_after_each_nul() {
    let bytes = b"one\0two\0three";
    let segments = [data::Segment {
        at: 100,
        bytes: &bytes[..],
    }];
    let whole = vec![Object {
        start: 100,
        end: 113,
    }];
    let cut = data::cut_strings(whole.clone(), &[100].into(), &segments);
    let ends: Vec<(u32, u32)> = cut.iter().map(|o| (o.start, o.end)).collect();
    assert_eq!(ends, [(100, 104), (104, 108), (108, 113)]);
    assert_eq!(
        data::cut_strings(whole.clone(), &[].into(), &segments),
        whole
    );
}

#[test]
fn a_load_names_its_address_and_anything_else_a_base() {
    let m = module();
    let bodies: Vec<_> = wasmparser::Parser::new(0)
        .parse_all(&m)
        .filter_map(|p| match p.unwrap() {
            wasmparser::Payload::CodeSectionEntry(b) => Some(b),
            _ => None,
        })
        .collect();
    let named = |i: usize| {
        let mut out = Vec::new();
        data::named(&bodies[i], &|f| (f == 5).then_some((1, 1)), &mut out).unwrap();
        format!("{out:?}")
    };
    assert_eq!(named(0), "[Exact(1028)]");
    assert_eq!(named(1), "[Base(1196), Base(0)]");
    // The stored constant is the value, not the address.
    assert_eq!(named(2), "[Base(0), Base(0), Base(1300)]");
    // Given straight to a moved function: not named; to a kept one, a base.
    assert_eq!(named(6), "[]");
    assert_eq!(
        format!("{:?}", named_of(&[I::I32Const(1336), I::Call(4), I::Drop])),
        "[Base(1336)]"
    );
    // Pushed before the moved function's arguments: named.
    assert_eq!(
        format!(
            "{:?}",
            named_of(&[
                I::I32Const(7),
                I::I32Const(1336),
                I::Call(5),
                I::Drop,
                I::Drop
            ])
        ),
        "[Base(7)]"
    );
    // A constant loaded from, and one passed on, at one address: the load is exact.
    assert!(matches!(
        named_of(&[I::I32Const(5), I::I32Load8U(BYTE)])[..],
        [Named::Exact(5)]
    ));
}

const BYTE: we::MemArg = we::MemArg {
    offset: 0,
    align: 0,
    target: we::MemArgTarget::Memory(0),
    ordering: None,
};

/// What `data::named` finds in a function of `ops` (with its `end`).
fn named_of(ops: &[I]) -> Vec<Named> {
    let mut f = we::Function::new([]);
    for i in ops.iter().chain([&I::End]) {
        f.instruction(i);
    }
    let mut code = we::CodeSection::new();
    code.function(&f);
    let mut types = we::TypeSection::new();
    types.ty().function([], [we::ValType::I32]);
    let mut funcs = we::FunctionSection::new();
    funcs.function(0);
    let mut m = we::Module::new();
    m.section(&types).section(&funcs).section(&code);
    let bytes = m.finish();
    let body = wasmparser::Parser::new(0)
        .parse_all(&bytes)
        .find_map(|p| match p.unwrap() {
            wasmparser::Payload::CodeSectionEntry(b) => Some(b),
            _ => None,
        })
        .unwrap();
    let mut out = Vec::new();
    data::named(&body, &|f| (f == 5).then_some((1, 1)), &mut out).unwrap();
    out
}

#[test]
fn constants_only_moved_functions_use_move_and_come_back_with_the_rest() {
    let dir = std::env::temp_dir().join(format!("cairn-split-data-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let at = |f: &str| dir.join(f).to_str().unwrap().to_string();
    std::fs::write(at("in.wasm"), module()).unwrap();
    std::fs::write(at("map"), map()).unwrap();
    // Everything but `moved` and `reader` ran.
    std::fs::write(at("hit"), "0\n1\n2\n4\n6\n").unwrap();
    crate::split(
        &at("in.wasm"),
        &at("hit"),
        Some(&at("map")),
        &at("primary.wasm"),
        &at("rest.wasm"),
        0,
    )
    .unwrap();
    let primary_len = std::fs::metadata(at("primary.wasm")).unwrap().len();
    crate::split(
        &at("in.wasm"),
        &at("hit"),
        None,
        &at("whole-data.wasm"),
        &at("rest-no-data.wasm"),
        0,
    )
    .unwrap();
    let without_map = std::fs::metadata(at("whole-data.wasm")).unwrap().len();
    assert!(
        primary_len < without_map,
        "the primary module lost b's and d's bytes: {primary_len} against {without_map}"
    );

    // Each constant's text read through `byte` before anything loads the rest, then `moved()`
    // (which loads it), then each constant's text again.
    let script = format!(
        "const fs = require('fs');
         const [primaryPath, restPath] = process.argv.slice(1);
         let rest = null;
         const p = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(primaryPath)), {{
           cairn: {{ load() {{
             rest = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(restPath)), {{ p }});
             p.loaded.value = 1;
           }} }},
         }}).exports;
         const text = () => [{}].map(([at, n]) => {{
           let s = ''; for (let i = 0; i < n; i++) s += String.fromCharCode(p.byte(at + i)); return JSON.stringify(s);
         }}).join(' ');
         console.log(text());
         console.log(p.kept(), p.table(4), p.store(), p.byte(0) + 256 * p.byte(1), rest === null);
         console.log(p.passes(), rest !== null);
         console.log(p.moved());
         console.log(text());",
        constants()
            .iter()
            .map(|(_, at, b)| format!("[{at}, {}]", b.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let out = crate::tests::node(&script, &[at("primary.wasm"), at("rest.wasm")]);
    // The same two modules as the build ships them: the functions of each reordered, and what
    // the rest calling the primary's functions through a table (`reorder`, `table`).
    let primary = crate::reordered(&std::fs::read(at("primary.wasm")).unwrap()).unwrap();
    let rest = crate::reordered(&std::fs::read(at("rest.wasm")).unwrap()).unwrap();
    let (primary, rest) = crate::table::tabled(&primary, &rest).unwrap();
    for (f, m) in [
        ("primary-shipped.wasm", &primary),
        ("rest-shipped.wasm", &rest),
    ] {
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
            .validate_all(m)
            .unwrap();
        std::fs::write(at(f), m).unwrap();
    }
    let shipped = crate::tests::node(
        &script,
        &[at("primary-shipped.wasm"), at("rest-shipped.wasm")],
    );
    assert_eq!(
        shipped, out,
        "reordered and tabled, the modules do the same"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    let zeros = "\\u0000".repeat(16);
    let before = format!(
        r#""0\u0004\u0000\u0000aaaaaaaaaaaa" "{zeros}" "through a's word" "{zeros}" "table at e, -4 !" "a pointer stored" "held by a static" "{zeros}""#
    );
    assert_eq!(lines[0], before, "b and d are not in the primary module");
    let word = |s: &[u8]| u32::from_le_bytes(s[..4].try_into().unwrap());
    assert_eq!(
        lines[1],
        format!("{} {} undefined 1300 true", word(b"aaaa"), u32::from(b't')),
        "the kept functions read what stayed, without the rest"
    );
    assert_eq!(
        lines[2],
        format!("{} true", word(b"pass") as i32),
        "the call through the stub loaded the rest, and h with it, before reader read h"
    );
    assert_eq!(
        lines[3],
        format!("{}", word(b"only").wrapping_add(word(b"the ")) as i32)
    );
    let after = r#""0\u0004\u0000\u0000aaaaaaaaaaaa" "only the rest!!!" "through a's word" "the rest, again." "table at e, -4 !" "a pointer stored" "held by a static" "passed to a call""#;
    assert_eq!(lines[4], after, "the rest wrote b, d and h where they were");
}

/// Bodies of functions of one parameter each (none declared as locals but local 1), checked as
/// a module's, and parsed back.
fn bodies_of(funcs: &[Vec<I>]) -> Vec<u8> {
    let mut types = we::TypeSection::new();
    types.ty().function([we::ValType::I32], []);
    let mut fs = we::FunctionSection::new();
    let mut code = we::CodeSection::new();
    for ops in funcs {
        fs.function(0);
        let mut f = we::Function::new([(1, we::ValType::I32)]);
        for i in ops.iter().chain([&I::End]) {
            f.instruction(i);
        }
        code.function(&f);
    }
    let mut m = we::Module::new();
    m.section(&types)
        .section(&fs)
        .section(&crate::tests::one_memory())
        .section(&code);
    let bytes = m.finish();
    wasmparser::Validator::new().validate_all(&bytes).unwrap();
    bytes
}

#[test]
fn an_address_a_kept_function_only_passes_on_to_the_rest_is_not_named() {
    // 0 moves; the others stay. 1 passes its parameter to 0 (as rustc's `#[track_caller]`
    // functions pass their caller's location down to a panic), 5 to 1, and 7 sets a local that
    // only 0 reads; 3 loads through its parameter, 8 passes it to itself and 9 both to 0 and
    // to a load.
    let bytes = bodies_of(&[
        vec![I::LocalGet(0), I::Drop],
        vec![I::LocalGet(0), I::Call(0)],
        vec![I::I32Const(1111), I::Call(1)],
        vec![I::LocalGet(0), I::I32Load(BYTE), I::Drop],
        vec![I::I32Const(2222), I::Call(3)],
        vec![I::LocalGet(0), I::Call(1)],
        vec![I::I32Const(3333), I::Call(5)],
        vec![
            I::I32Const(4444),
            I::LocalSet(1),
            I::LocalGet(1),
            I::Call(0),
        ],
        vec![I::LocalGet(0), I::Call(8)],
        vec![
            I::LocalGet(0),
            I::Call(0),
            I::LocalGet(0),
            I::I32Load(BYTE),
            I::Drop,
        ],
        vec![I::I32Const(5555), I::Call(8)],
        vec![I::I32Const(6666), I::Call(9)],
    ]);
    let bodies: Vec<_> = wasmparser::Parser::new(0)
        .parse_all(&bytes)
        .filter_map(|p| match p.unwrap() {
            wasmparser::Payload::CodeSectionEntry(b) => Some(b),
            _ => None,
        })
        .collect();
    let masks = data::free_params(&bodies, &|i| i != 0, &|_| 1, 0).unwrap();
    assert_eq!(masks, [1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    let free = |f: u32| Some((1, masks[f as usize]));
    let named = |i: usize| {
        let mut out = Vec::new();
        data::named(&bodies[i], &free, &mut out).unwrap();
        format!("{out:?}")
    };
    assert_eq!(named(2), "[]", "through a kept function to the rest");
    assert_eq!(named(6), "[]", "through two kept functions");
    assert_eq!(named(7), "[]", "through a local only the rest reads");
    assert_eq!(
        named(4),
        "[Base(2222)]",
        "to a function that loads through it"
    );
    assert_eq!(
        named(10),
        "[Base(5555)]",
        "to a function that passes it to itself"
    );
    assert_eq!(
        named(11),
        "[Base(6666)]",
        "to a function that also loads through it"
    );
}

#[test]
fn the_char_niches_are_values_not_addresses() {
    let zeros = vec![0; 0x2010];
    let segments = vec![data::Segment {
        at: 0x10_f000,
        bytes: &zeros,
    }];
    // A table the linker laid across `char::MAX + 1`: named only as that value (or the one
    // after it), it moves.
    let table = vec![
        Object {
            start: 0x10_f000,
            end: 0x11_1000,
        },
        Object {
            start: 0x11_1000,
            end: 0x11_1010,
        },
    ];
    let niches = [Named::Base(0x11_0000), Named::Base(0x11_0001)];
    assert_eq!(
        data::staying(&table, &segments, &niches),
        vec![false, false]
    );
    // Any other address inside it is a pointer folded with an offset: it stays.
    let folded = [Named::Base(0x11_0008)];
    assert_eq!(data::staying(&table, &segments, &folded), vec![true, false]);
    // A constant that starts at the niche's value stays.
    let starts = vec![
        Object {
            start: 0x10_f000,
            end: 0x11_0000,
        },
        Object {
            start: 0x11_0000,
            end: 0x11_0010,
        },
    ];
    assert_eq!(
        data::staying(&starts, &segments, &niches[..1]),
        vec![false, true]
    );
}
