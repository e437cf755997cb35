//! `table`: the rest calls the primary module's functions through a table the primary module
//! fills, in place of an export for each.

use std::borrow::Cow;

use wasm_encoder as we;
use wasm_encoder::reencode::Reencode;
use wasmparser as wp;

use crate::{contents, copy, parse, re, read, resection, write, Additions, Remap, Result, Same};

pub(crate) fn table(primary: &str, rest: &str) -> Result<()> {
    let (p, r) = tabled(&read(primary)?, &read(rest)?)?;
    write(primary, &p)?;
    write(rest, &r)
}

/// The name of the table through which the rest calls the primary module's functions.
pub(crate) const CALLS_TABLE: &str = "F";

/// PRIMARY without the exports of the functions REST imports (an entry each: a name and an
/// index, 3.4 KB of `cairn.wasm`'s gzip) and with a table of them instead, filled by an active
/// element segment in the order of their indices (a list of increasing numbers, which gzip
/// takes well) and exported as `F`; REST imports that table in place of the functions and calls
/// each through it (`call_indirect`, one table look-up and signature check more a call, on the
/// rare paths the rest holds).
pub(crate) fn tabled(primary: &[u8], rest: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
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
