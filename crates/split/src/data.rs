//! Read-only data that only the rest's functions use, moved to the rest with them.
//!
//! rustc lays out every constant (a message, a panic location, a format template, a vtable) at
//! a fixed address in the data section, which the primary module writes into memory when it is
//! instantiated. A constant that only moved functions name need not be there before the rest is:
//! the rest writes it, at the same address, when it is instantiated (an active segment over the
//! memory it imports), which is before any of its functions runs.
//!
//! What a constant is comes from the linker's map (`wasm-ld --Map`): each input section of
//! `.rodata` is one constant, with its address and size, except the linker's own merged chunk
//! of NUL-terminated strings (format templates, file names), which is cut after each NUL. A
//! constant stays in the primary module when a kept function names an address in it (an
//! `i32.const`, a load's or store's constant offset, or a constant address a load reads), when a constant that
//! stays, or the writable data, holds a pointer into it (any aligned word whose value is an
//! address in it), and, for an address a kept function names that is not the start of a
//! constant (a pointer folded with an offset, `&a[i - 1]` as `a - 4 + 4 * i`), every constant
//! within `SLACK` bytes on either side. The rest is moved.

use std::collections::BTreeSet;

use wasmparser as wp;

use crate::Result;

/// Bytes on either side of an address a kept function names, other than a constant's start or
/// an address it loads from, whose constants stay with it. With none, the build's check of
/// cairn.wasm failed (a kept function trapped): rustc folds offsets into addresses (`a - 2` and
/// `a - 4` among those found). 8 was the least that passed; 64 costs 0.2 KB gzip more than 8.
const SLACK: u32 = 64;

/// A moved run shorter than this stays: an extra segment costs its header in the primary
/// module and in the rest (cairn.wasm, gzip of the primary module: 8 bytes 175,093, 16 bytes
/// 175,104, 32 bytes 175,215).
const MIN_RUN: u32 = 8;

/// A constant: its first address and the one after its last byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Object {
    pub start: u32,
    pub end: u32,
}

/// An active segment: its address and bytes.
pub struct Segment<'a> {
    pub at: u32,
    pub bytes: &'a [u8],
}

/// The `.rodata` constants of a linker map, in address order; the merged chunk (`<internal>`)
/// is left whole here and cut by `cut_strings`.
pub fn read_map(text: &str) -> Result<Vec<Object>> {
    // Columns `Addr Off Size Out In Symbol`: a name starts under `Out` for an output section,
    // under `In` for an input section, under `Symbol` for a symbol.
    let header = text.lines().next().unwrap_or("");
    let (Some(out_col), Some(in_col)) = (header.find("Out"), header.find(" In ")) else {
        return Err("the linker map has no `Addr Off Size Out In Symbol` header".into());
    };
    let in_col = in_col + 1;
    let mut objects = Vec::new();
    let mut in_rodata = false;
    for line in text.lines().skip(1) {
        let mut fields = line.split_whitespace();
        let (Some(addr), Some(_), Some(size)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (Ok(addr), Ok(size)) = (u32::from_str_radix(addr, 16), u32::from_str_radix(size, 16))
        else {
            continue; // a section without an address
        };
        let name_col = line.len() - line[out_col.min(line.len())..].trim_start().len();
        if name_col == out_col {
            in_rodata = line[name_col..].trim_end() == ".rodata";
        } else if name_col == in_col && in_rodata && size > 0 {
            objects.push(Object {
                start: addr,
                end: addr + size,
            });
        }
    }
    if objects.is_empty() {
        return Err("the linker map lists no .rodata input sections".into());
    }
    objects.sort_by_key(|o| o.start);
    for w in objects.windows(2) {
        if w[0].end > w[1].start {
            return Err(format!(
                "the linker map's .rodata sections overlap at {:#x}",
                w[1].start
            ));
        }
    }
    Ok(objects)
}

/// The byte at `addr` as the segments write it (0 where none does).
fn byte_at(segments: &[Segment], addr: u32) -> u8 {
    for s in segments {
        if addr >= s.at && addr < s.at + s.bytes.len() as u32 {
            return s.bytes[(addr - s.at) as usize];
        }
    }
    0
}

/// `objects` with each of the linker's merged chunks of NUL-terminated strings (their starts in
/// `internal`) cut after each NUL, one string a constant.
pub fn cut_strings(
    objects: Vec<Object>,
    internal: &BTreeSet<u32>,
    segments: &[Segment],
) -> Vec<Object> {
    let mut out = Vec::with_capacity(objects.len());
    for o in objects {
        if !internal.contains(&o.start) {
            out.push(o);
            continue;
        }
        let mut start = o.start;
        for a in o.start..o.end {
            if byte_at(segments, a) == 0 {
                out.push(Object { start, end: a + 1 });
                start = a + 1;
            }
        }
        if start < o.end {
            out.push(Object { start, end: o.end });
        }
    }
    out
}

/// The start addresses of the map's merged chunks (`<internal>:(.rodata)`).
pub fn internal_chunks(text: &str) -> BTreeSet<u32> {
    text.lines()
        .filter(|l| l.contains("<internal>:(.rodata"))
        .filter_map(|l| u32::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .collect()
}

/// An address a function names.
#[derive(Clone, Copy, Debug)]
pub enum Named {
    /// The address a load or store with a constant address reads or writes.
    Exact(u32),
    /// An address that code computes others from (a pointer passed on, a table's base, a
    /// constant added to a dynamic one).
    Base(u32),
}

/// What a call's arguments may carry without the constant counting as named: for a function
/// index, its parameter count and, by parameter, whether an argument there can only reach the
/// rest (every parameter of a moved function; a kept function's parameter that it only passes
/// on to such places, see `free_params`). `None` for an import.
pub type Free<'a> = dyn Fn(u32) -> Option<(usize, u64)> + 'a;

/// Splits `pushed`, the values pushed since the last other instruction, at a call of a function
/// with `n` parameters and the argument mask `mask`: the free arguments are given to `free`,
/// the others (and what was pushed before the arguments) to `other`.
fn split_args<T>(
    pushed: &mut Vec<T>,
    n: usize,
    mask: u64,
    free: &mut dyn FnMut(T),
    other: &mut dyn FnMut(T),
) {
    let args = pushed.len().min(n);
    let first_param = n - args;
    let start = pushed.len() - args;
    for (k, v) in pushed.drain(..).enumerate() {
        let param = (k >= start).then(|| first_param + k - start);
        match param {
            Some(p) if p < 64 && mask >> p & 1 == 1 => free(v),
            _ => other(v),
        }
    }
}

/// Addresses a function body names: an `i32.const` followed by a load (whose one operand it is)
/// added to the load's offset, exactly; every other `i32.const` value (a pointer passed on or
/// stored, a table's base, a constant added to a computed address) and every load's or store's
/// constant offset over a computed address, as bases. But for a constant given straight to a
/// call (pushed with the other arguments just before it) where `free` says the argument can
/// only reach moved functions: only those, in the rest, can read through it, and calling one
/// loads the rest, constants and all, first. That is how the kept functions' panics name their
/// locations and messages (`panic_bounds_check(i, len, &LOC)`), and how rustc's
/// `#[track_caller]` functions pass their callers' locations down to a panic.
///
/// A constant set into a local whose every read is such an argument does not count either:
/// rustc merges a function's panics into one block that takes its location from a local set on
/// each path.
pub fn named(body: &wp::FunctionBody, free: &Free, out: &mut Vec<Named>) -> Result<()> {
    let to_moved = locals_only_given_free(body, free)?;
    let mut ops = body.get_operators_reader().map_err(|e| e.to_string())?;
    // The values the instructions since the last other one pushed, one each: a constant's
    // value, or none for a local's or global's.
    let mut pushed: Vec<Option<u32>> = Vec::new();
    let flush = |pushed: &mut Vec<Option<u32>>, out: &mut Vec<Named>| {
        out.extend(pushed.drain(..).flatten().map(Named::Base));
    };
    while !ops.eof() {
        let op = ops.read().map_err(|e| e.to_string())?;
        match op {
            wp::Operator::I32Const { value } => pushed.push(Some(value as u32)),
            wp::Operator::LocalGet { .. } | wp::Operator::GlobalGet { .. } => pushed.push(None),
            wp::Operator::Call { function_index } => match free(function_index) {
                Some((n, mask)) => split_args(&mut pushed, n, mask, &mut |_| {}, &mut |v| {
                    out.extend(v.map(Named::Base))
                }),
                None => flush(&mut pushed, out),
            },
            wp::Operator::LocalSet { local_index }
                if to_moved.contains(&local_index) && matches!(pushed.last(), Some(Some(_))) =>
            {
                pushed.pop();
                flush(&mut pushed, out);
            }
            _ => {
                if let Some((m, address_only)) = memarg(&op) {
                    let off = u32::try_from(m.offset).unwrap_or(u32::MAX);
                    match pushed.last() {
                        Some(Some(c)) if address_only => {
                            out.push(Named::Exact(c.wrapping_add(off)));
                            pushed.pop();
                        }
                        _ => out.push(Named::Base(off)),
                    }
                }
                flush(&mut pushed, out);
            }
        }
    }
    flush(&mut pushed, out);
    Ok(())
}

/// The locals of `body` that are read only as free arguments of calls (see `named`).
fn locals_only_given_free(body: &wp::FunctionBody, free: &Free) -> Result<BTreeSet<u32>> {
    let mut given = BTreeSet::new();
    let mut other = BTreeSet::new();
    let mut ops = body.get_operators_reader().map_err(|e| e.to_string())?;
    // The locals the instructions since the last other one read, one a pushed value.
    let mut pushed: Vec<Option<u32>> = Vec::new();
    while !ops.eof() {
        match ops.read().map_err(|e| e.to_string())? {
            wp::Operator::LocalGet { local_index } => pushed.push(Some(local_index)),
            wp::Operator::I32Const { .. } | wp::Operator::GlobalGet { .. } => pushed.push(None),
            wp::Operator::LocalTee { local_index } => {
                other.insert(local_index);
                other.extend(pushed.drain(..).flatten());
            }
            wp::Operator::Call { function_index } => match free(function_index) {
                Some((n, mask)) => {
                    split_args(&mut pushed, n, mask, &mut |v| given.extend(v), &mut |v| {
                        other.extend(v)
                    })
                }
                None => other.extend(pushed.drain(..).flatten()),
            },
            _ => other.extend(pushed.drain(..).flatten()),
        }
    }
    other.extend(pushed.drain(..).flatten());
    Ok(given.difference(&other).copied().collect())
}

/// For each of `bodies` (`kept` says which stay in the primary module, `params` gives each one's
/// parameter count), the mask of the parameters it only passes on as free arguments (see
/// `named`): what reaches them can only reach the rest. Moved functions' parameters all are.
/// The least such masks, found by iterating from none: a kept function that passes a parameter
/// to itself keeps it.
pub fn free_params(
    bodies: &[wp::FunctionBody],
    kept: &dyn Fn(usize) -> bool,
    params: &dyn Fn(usize) -> usize,
    imported: u32,
) -> Result<Vec<u64>> {
    let all = |n: usize| if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
    let mut masks: Vec<u64> = (0..bodies.len())
        .map(|i| if kept(i) { 0 } else { all(params(i)) })
        .collect();
    loop {
        let mut changed = false;
        for (i, body) in bodies.iter().enumerate() {
            if !kept(i) {
                continue;
            }
            let free = |f: u32| {
                let d = f.checked_sub(imported)? as usize;
                Some((params(d), masks[d]))
            };
            let n = params(i);
            let mask = locals_only_given_free(body, &free)?
                .into_iter()
                .filter(|&l| (l as usize) < n.min(64))
                .fold(0u64, |m, l| m | 1 << l);
            if mask != masks[i] {
                masks[i] = mask;
                changed = true;
            }
        }
        if !changed {
            return Ok(masks);
        }
    }
}

/// A memory access's immediate, and whether the address is its only operand (a load), so that
/// the instruction before it, if a constant, is the address.
fn memarg(op: &wp::Operator) -> Option<(wp::MemArg, bool)> {
    use wp::Operator as O;
    Some(match *op {
        O::I32Load { memarg }
        | O::I64Load { memarg }
        | O::F32Load { memarg }
        | O::F64Load { memarg }
        | O::I32Load8S { memarg }
        | O::I32Load8U { memarg }
        | O::I32Load16S { memarg }
        | O::I32Load16U { memarg }
        | O::I64Load8S { memarg }
        | O::I64Load8U { memarg }
        | O::I64Load16S { memarg }
        | O::I64Load16U { memarg }
        | O::I64Load32S { memarg }
        | O::I64Load32U { memarg }
        | O::V128Load { memarg }
        | O::V128Load8x8S { memarg }
        | O::V128Load8x8U { memarg }
        | O::V128Load16x4S { memarg }
        | O::V128Load16x4U { memarg }
        | O::V128Load32x2S { memarg }
        | O::V128Load32x2U { memarg }
        | O::V128Load8Splat { memarg }
        | O::V128Load16Splat { memarg }
        | O::V128Load32Splat { memarg }
        | O::V128Load64Splat { memarg }
        | O::V128Load32Zero { memarg }
        | O::V128Load64Zero { memarg } => (memarg, true),
        O::I32Store { memarg }
        | O::I64Store { memarg }
        | O::F32Store { memarg }
        | O::F64Store { memarg }
        | O::I32Store8 { memarg }
        | O::I32Store16 { memarg }
        | O::I64Store8 { memarg }
        | O::I64Store16 { memarg }
        | O::I64Store32 { memarg }
        | O::V128Store { memarg } => (memarg, false),
        O::V128Load8Lane { memarg, .. }
        | O::V128Load16Lane { memarg, .. }
        | O::V128Load32Lane { memarg, .. }
        | O::V128Load64Lane { memarg, .. }
        | O::V128Store8Lane { memarg, .. }
        | O::V128Store16Lane { memarg, .. }
        | O::V128Store32Lane { memarg, .. }
        | O::V128Store64Lane { memarg, .. } => (memarg, false),
        _ => return None,
    })
}

/// Which constants stay: those `kept` (addresses the primary module's functions name) reach,
/// directly or through pointers held in data that stays; the data that is not a constant of
/// `objects` (writable statics) always stays.
pub fn staying(objects: &[Object], segments: &[Segment], kept: &[Named]) -> Vec<bool> {
    let mut stay = vec![false; objects.len()];
    let mut work = Vec::new();
    let (lo, hi) = (objects[0].start, objects[objects.len() - 1].end);
    // The index of the constant holding `a`, or of the first one after it.
    let find = |a: u32| objects.partition_point(|o| o.end <= a);
    // Marks the constant at `a` when it starts there (or `exact`: code reads or writes `a`
    // itself), every constant within `SLACK` bytes of it otherwise.
    let mark = |a: u32, exact: bool, stay: &mut Vec<bool>, work: &mut Vec<usize>| {
        if a < lo.saturating_sub(SLACK) || a >= hi + SLACK {
            return;
        }
        let i = find(a);
        let (from, to) = if exact || i < objects.len() && objects[i].start == a {
            (a, a)
        } else {
            (a.saturating_sub(SLACK), a.saturating_add(SLACK))
        };
        let mut j = find(from);
        while j < objects.len() && objects[j].start <= to {
            if !stay[j] {
                stay[j] = true;
                work.push(j);
            }
            j += 1;
        }
    };
    for &n in kept {
        match n {
            Named::Exact(a) => mark(a, true, &mut stay, &mut work),
            // `char::MAX + 1` and the value after it, the niches of `Option<char>` and of an
            // option of that: every loop over a string's chars names them, as values, not as
            // addresses. Taken for a pointer folded with an offset, they kept whatever table
            // the linker laid across them (core's 11.7 KB lowercase table once). A constant
            // that starts there still stays.
            Named::Base(a) if a == 0x11_0000 || a == 0x11_0001 => {
                let i = find(a);
                if i < objects.len() && objects[i].start == a {
                    mark(a, true, &mut stay, &mut work);
                }
            }
            Named::Base(a) => mark(a, false, &mut stay, &mut work),
        }
    }
    // Pointers held in the data that is not a constant (writable statics) always count.
    for s in segments {
        let mut a = (s.at + 3) & !3;
        while a + 4 <= s.at + s.bytes.len() as u32 {
            let i = find(a);
            let in_object = i < objects.len() && objects[i].start <= a;
            if !in_object {
                let k = (a - s.at) as usize;
                let v = u32::from_le_bytes(s.bytes[k..k + 4].try_into().expect("4 bytes"));
                mark(v, false, &mut stay, &mut work);
            }
            a += 4;
        }
    }
    while let Some(i) = work.pop() {
        let o = objects[i];
        let mut a = (o.start + 3) & !3;
        while a + 4 <= o.end {
            let v = u32::from_le_bytes([
                byte_at(segments, a),
                byte_at(segments, a + 1),
                byte_at(segments, a + 2),
                byte_at(segments, a + 3),
            ]);
            mark(v, false, &mut stay, &mut work);
            a += 4;
        }
    }
    stay
}

/// The address ranges to move: runs of constants that do not stay, with the padding between
/// them, of at least `MIN_RUN` bytes.
pub fn runs(objects: &[Object], stay: &[bool]) -> Vec<Object> {
    let mut out: Vec<Object> = Vec::new();
    let mut cur: Option<Object> = None;
    for (o, &s) in objects.iter().zip(stay) {
        if s {
            if let Some(c) = cur.take() {
                out.push(c);
            }
            continue;
        }
        cur = Some(match cur {
            Some(c) => Object {
                start: c.start,
                end: o.end,
            },
            None => *o,
        });
    }
    out.extend(cur);
    out.retain(|r| r.end - r.start >= MIN_RUN);
    out
}
