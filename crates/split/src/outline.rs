//! Regions of a function body, and cold ones moved out into functions of their own.
//!
//! A region is the body of a `block`, or one arm of an `if`: a run of instructions entered only
//! at its start. `instrument` marks each region as it marks each function, so a run tells which
//! regions it entered; `outline` moves each region that a run never entered, in a function that
//! it did, into a new function (appended after the module's own, so no index moves) and leaves a
//! call in its place. The split then moves those new functions to the rest as it moves any
//! function the run did not reach: the cold arms of the engine's big functions (an error's
//! message, a rare operator, a type conversion no common statement makes) go with them.
//!
//! The new function takes the locals the region uses as parameters and returns the region's
//! results, then the locals it writes (the caller sets them back), then, when the region
//! branches out of itself, which way it left (0: at its end). A branch out of the region to a
//! label that carries values (a `return` branches to the function's own label) returns those
//! values too, in slots after the region's results, which the caller keeps in locals and gives
//! to that label; a region whose construct takes parameters is not moved, nor one whose
//! `br_table` leaves it to a label that carries values. A `br_table` that leaves the region
//! branches, in the new function, through one block per outer label it reaches, whose end
//! leaves by that label's exit. What the region's own label (`br` to its `block` or `if`)
//! carries, the new function's outer `block` carries, so branch depths inside the region stay as
//! they are.

use std::collections::{BTreeSet, HashMap};

use wasm_encoder as we;
use wasm_encoder::reencode::Reencode;
use wasmparser as wp;

use crate::{re, Result, Same};

/// Parameter and result types of every type index (empty for a type that is not a function).
pub struct Types(pub Vec<(Vec<wp::ValType>, Vec<wp::ValType>)>);

impl Types {
    pub fn read(s: Option<&wp::TypeSectionReader>) -> Result<Types> {
        let mut t = Vec::new();
        if let Some(s) = s {
            for group in s.clone() {
                for sub in group.map_err(|e| e.to_string())?.into_types() {
                    t.push(match &sub.composite_type.inner {
                        wp::CompositeInnerType::Func(f) => {
                            (f.params().to_vec(), f.results().to_vec())
                        }
                        _ => (Vec::new(), Vec::new()),
                    });
                }
            }
        }
        Ok(Types(t))
    }

    fn block(&self, b: wp::BlockType) -> (Vec<wp::ValType>, Vec<wp::ValType>) {
        match b {
            wp::BlockType::Empty => (Vec::new(), Vec::new()),
            wp::BlockType::Type(v) => (Vec::new(), vec![v]),
            wp::BlockType::FuncType(i) => self.0[i as usize].clone(),
        }
    }
}

/// One region: operators `start..end` of its function (`end` is its closing `else` or `end`).
pub struct Region {
    /// Its number among its function's bodies and arms (in the order of their starts), or, for a
    /// tail, among its tails (in the order of theirs). Across a module the bodies and arms are
    /// numbered first, function after function, then the tails (`Numbering`).
    pub id: usize,
    pub tail: bool,
    pub start: usize,
    pub end: usize,
    /// What the region's construct takes and gives.
    params: usize,
    results: Vec<wp::ValType>,
    /// The arity types of every label around the region, innermost (its own construct's
    /// enclosing one) first, the function's own label last.
    outer: Vec<Vec<wp::ValType>>,
}

/// A function body's operators with the offset of each (and one past the last).
pub struct Ops<'a> {
    pub ops: Vec<wp::Operator<'a>>,
    pub at: Vec<usize>,
}

pub fn ops<'a>(body: &wp::FunctionBody<'a>) -> Result<Ops<'a>> {
    let mut r = body.get_operators_reader().map_err(|e| e.to_string())?;
    let (mut ops, mut at) = (Vec::new(), Vec::new());
    while !r.eof() {
        let (op, offset) = r.read_with_offset().map_err(|e| e.to_string())?;
        ops.push(op);
        at.push(offset as usize);
    }
    at.push(body.range().end as usize);
    Ok(Ops { ops, at })
}

/// Where each defined function's tails start (see `regions`): the operator after a `br_if` at
/// the top of a `block`'s body or an `if`'s arm, when the operand stack holds no more there than
/// when the construct began, and the code after it is reachable. Found by validating each body
/// (wasmparser knows the stack's height after every operator).
pub fn tail_starts(bytes: &[u8]) -> Result<Vec<Vec<usize>>> {
    let e = |e: wp::BinaryReaderError| e.to_string();
    let mut v = wp::Validator::new_with_features(wp::WasmFeatures::all());
    let mut out = Vec::new();
    for payload in wp::Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(e)?;
        let wp::ValidPayload::Func(func, body) = v.payload(&payload).map_err(e)? else {
            continue;
        };
        let mut fv = func.into_validator(Default::default());
        let mut r = body.get_binary_reader();
        fv.read_locals(&mut r).map_err(e)?;
        let mut ops = wp::OperatorsReader::new(r);
        let mut starts = Vec::new();
        let mut i = 0;
        while !ops.eof() {
            let (op, offset) = ops.read_with_offset().map_err(e)?;
            fv.op(offset, &op).map_err(e)?;
            i += 1;
            if let wp::Operator::BrIf { .. } | wp::Operator::End = op {
                if fv.control_stack_height() == 0 {
                    break; // the function's end
                }
                let frame = fv.get_control_frame(0).expect("invariant: inside the body");
                let top = matches!(
                    frame.kind,
                    wp::FrameKind::Block | wp::FrameKind::If | wp::FrameKind::Else
                );
                // The function's own frame (a `return`'s) is not a construct the new function
                // can stand for.
                if top
                    && fv.control_stack_height() > 1
                    && !frame.unreachable
                    && fv.operand_stack_height() as usize == frame.height
                {
                    starts.push(i);
                }
            }
        }
        out.push(starts);
    }
    Ok(out)
}

/// The regions of a body, in the order of their starts: the body of each `block` and each arm
/// of each `if` (entered only at its start), and each tail, the rest of such a body after a
/// `br_if` out of it (`tails`, from `tail_starts`), entered only by not taking the branch. A
/// tail leaves by its construct's end, as the body does, with what is on the stack there.
pub fn regions(
    o: &Ops,
    types: &Types,
    func_results: &[wp::ValType],
    tails: &[usize],
) -> Vec<Region> {
    // An open construct: where its current region starts, what a branch to its label carries,
    // what it takes and gives, and whether its body is a region (a loop's is not: it is entered
    // again at every iteration).
    struct Open {
        start: usize,
        label: Vec<wp::ValType>,
        params: usize,
        results: Vec<wp::ValType>,
        region: bool,
        /// Where the tails in its current body or arm start.
        tails: Vec<usize>,
    }
    let mut open = vec![Open {
        start: 0,
        label: func_results.to_vec(),
        params: 0,
        results: func_results.to_vec(),
        region: false,
        tails: Vec::new(),
    }];
    let mut out = Vec::new();
    let mut tail_regions = Vec::new();
    let mut next_tail = tails.iter().copied().peekable();
    // The region of the innermost open construct from `start` (its body's or a tail's), ending
    // at operator `end`.
    let region = |open: &[Open], start: usize, params: usize, end: usize| {
        let c = &open[open.len() - 1];
        let outer = open[..open.len() - 1]
            .iter()
            .rev()
            .map(|c| c.label.clone())
            .collect();
        Region {
            id: 0,
            tail: false,
            start,
            end,
            params,
            results: c.results.clone(),
            outer,
        }
    };
    // The regions a body or arm ending at `end` closes: its own, and its tails'.
    let close = |open: &mut Vec<Open>,
                 end: usize,
                 out: &mut Vec<Region>,
                 tail_regions: &mut Vec<Region>| {
        let c = open.last().expect("invariant: a construct is open");
        if c.region {
            out.push(region(open, c.start, c.params, end));
            for &t in &c.tails {
                if t < end {
                    tail_regions.push(region(open, t, 0, end));
                }
            }
        }
        open.last_mut()
            .expect("invariant: a construct is open")
            .tails
            .clear();
    };
    for (i, op) in o.ops.iter().enumerate() {
        while next_tail.peek().is_some_and(|&t| t <= i) {
            let t = next_tail.next().expect("invariant: peeked");
            if t == i {
                open.last_mut()
                    .expect("invariant: a construct is open")
                    .tails
                    .push(t);
            }
        }
        match op {
            wp::Operator::Block { blockty } | wp::Operator::If { blockty } => {
                let (p, r) = types.block(*blockty);
                open.push(Open {
                    start: i + 1,
                    label: r.clone(),
                    params: p.len(),
                    results: r,
                    region: true,
                    tails: Vec::new(),
                });
            }
            wp::Operator::Loop { blockty } => {
                let (p, r) = types.block(*blockty);
                open.push(Open {
                    start: i + 1,
                    label: p.clone(),
                    params: p.len(),
                    results: r,
                    region: false,
                    tails: Vec::new(),
                });
            }
            wp::Operator::Else => {
                close(&mut open, i, &mut out, &mut tail_regions);
                open.last_mut().expect("invariant: an if is open").start = i + 1;
            }
            wp::Operator::End => {
                close(&mut open, i, &mut out, &mut tail_regions);
                open.pop();
                if open.is_empty() {
                    break;
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|r| r.start);
    tail_regions.sort_by_key(|r| r.start);
    for (k, r) in out.iter_mut().enumerate() {
        r.id = k;
    }
    for (k, r) in tail_regions.iter_mut().enumerate() {
        r.id = k;
        r.tail = true;
    }
    out.extend(tail_regions);
    out.sort_by_key(|r| r.start);
    out
}

/// Module-wide region numbers: every function's bodies and arms, function after function, then
/// every function's tails, so that adding tails left the numbers of the others as they were.
pub struct Numbering {
    bodies: Vec<usize>,
    tails: Vec<usize>,
}

impl Numbering {
    /// From each function's regions.
    pub fn new(per_function: &[Vec<Region>]) -> Numbering {
        let (mut bodies, mut tails) = (Vec::new(), Vec::new());
        let (mut b, mut t) = (0, 0);
        for rs in per_function {
            bodies.push(b);
            tails.push(t);
            b += rs.iter().filter(|r| !r.tail).count();
            t += rs.iter().filter(|r| r.tail).count();
        }
        let total = b;
        for x in &mut tails {
            *x += total;
        }
        Numbering { bodies, tails }
    }

    pub fn number(&self, f: usize, r: &Region) -> usize {
        if r.tail {
            self.tails[f] + r.id
        } else {
            self.bodies[f] + r.id
        }
    }
}

/// Why a region cannot be moved, or what moving it needs.
enum Shape {
    Movable(Move),
    Params,
    /// A branch out of it to a label that carries values.
    Carries,
}

fn shape(o: &Ops, r: &Region) -> Shape {
    if r.params > 0 {
        return Shape::Params;
    }
    let (mut used, mut written, mut exits) = (BTreeSet::new(), BTreeSet::new(), Vec::new());
    let mut table_out = false;
    let mut nest = 0u32;
    // An outer label a branch at depth `d` reaches, if it leaves the region.
    let out_of =
        |d: u32, nest: u32| -> Option<usize> { (d > nest).then(|| (d - nest - 1) as usize) };
    // A `br_table` out of the region to a label that carries values is not moved (its targets
    // inside would need the values too); a `br`, `br_if` or `return` is.
    let leave = |k: usize, exits: &mut Vec<usize>, values: bool| {
        if !values && !r.outer[k].is_empty() {
            return false;
        }
        if !exits.contains(&k) {
            exits.push(k);
        }
        true
    };
    for op in &o.ops[r.start..r.end] {
        let target = match op {
            wp::Operator::Block { .. } | wp::Operator::Loop { .. } | wp::Operator::If { .. } => {
                nest += 1;
                None
            }
            wp::Operator::End => {
                nest -= 1;
                None
            }
            wp::Operator::LocalGet { local_index } => {
                used.insert(*local_index);
                None
            }
            wp::Operator::LocalSet { local_index } | wp::Operator::LocalTee { local_index } => {
                used.insert(*local_index);
                written.insert(*local_index);
                None
            }
            wp::Operator::Br { relative_depth } | wp::Operator::BrIf { relative_depth } => {
                out_of(*relative_depth, nest)
            }
            wp::Operator::Return => Some(r.outer.len() - 1),
            wp::Operator::BrTable { targets } => {
                for d in table_targets(targets) {
                    if let Some(k) = out_of(d, nest) {
                        table_out = true;
                        if !leave(k, &mut exits, false) {
                            return Shape::Carries;
                        }
                    }
                }
                None
            }
            _ => None,
        };
        if let Some(k) = target {
            leave(k, &mut exits, true);
        }
    }
    Shape::Movable(Move {
        used: used.into_iter().collect(),
        written: written.into_iter().collect(),
        exits,
        table_out,
    })
}

/// A `br_table`'s targets, its default last.
fn table_targets(t: &wp::BrTable) -> Vec<u32> {
    let mut all: Vec<u32> = t.targets().filter_map(|t| t.ok()).collect();
    all.push(t.default());
    all
}

/// A constant of type `t` (what the new function returns in place of results it does not have
/// when it leaves the region by a branch: the caller branches on and never reads them).
fn zero(t: wp::ValType) -> Result<we::Instruction<'static>> {
    Ok(match t {
        wp::ValType::I32 => we::Instruction::I32Const(0),
        wp::ValType::I64 => we::Instruction::I64Const(0),
        wp::ValType::F32 => we::Instruction::F32Const(0.0.into()),
        wp::ValType::F64 => we::Instruction::F64Const(0.0.into()),
        wp::ValType::V128 => we::Instruction::V128Const(0),
        wp::ValType::Ref(r) => we::Instruction::RefNull(re(Same.heap_type(r.heap_type()))?),
    })
}

/// What moving a region needs: the locals it reads or writes, those it writes, and the outer
/// labels it branches to (by their index in `Region::outer`), in the order their exit codes are
/// given (from 1); whether a `br_table` in it leaves it.
pub struct Move {
    used: Vec<u32>,
    written: Vec<u32>,
    exits: Vec<usize>,
    table_out: bool,
}

impl Move {
    /// What the primary module keeps in a moved region's place, in bytes, about: the call and
    /// its stub (`ensure`, the slot, `call_indirect`: inlined into the caller), a `local.get` for
    /// each local the region uses and a `local.set` for each it writes, and a test of the exit
    /// code for each way out.
    fn cost(&self) -> usize {
        8 + 2 * (self.used.len() + self.written.len()) + 5 * self.exits.len()
    }

    /// The same move with the locals it reads and writes ordered by type, then by index: the
    /// new function's parameters and results are then, for most regions, a few of each type in
    /// one order, and regions alike share a function type (`cairn.wasm`: 323 types before).
    fn canonical(&self, local_types: &[wp::ValType]) -> Move {
        let rank = |t: wp::ValType| match t {
            wp::ValType::I32 => 0,
            wp::ValType::I64 => 1,
            wp::ValType::F32 => 2,
            wp::ValType::F64 => 3,
            wp::ValType::V128 => 4,
            wp::ValType::Ref(_) => 5,
        };
        let order = |ls: &[u32]| {
            let mut v = ls.to_vec();
            v.sort_by_key(|&l| (rank(local_types[l as usize]), l));
            v
        };
        Move {
            used: order(&self.used),
            written: order(&self.written),
            exits: self.exits.clone(),
            table_out: self.table_out,
        }
    }

    /// The exits whose labels carry values, as (exit code, what the label carries), in the
    /// order the new function returns those values.
    fn carrying<'r>(&self, r: &'r Region) -> Vec<(i32, &'r [wp::ValType])> {
        (self.exits.iter().enumerate())
            .filter(|(_, &k)| !r.outer[k].is_empty())
            .map(|(j, &k)| (j as i32 + 1, r.outer[k].as_slice()))
            .collect()
    }
}

/// What `outline` reports.
#[derive(Default)]
pub struct Stats {
    pub cold: usize,
    pub moved: usize,
    pub moved_bytes: usize,
    pub small_bytes: usize,
    pub params_bytes: usize,
    pub carries_bytes: usize,
}

/// Chooses the regions to move in function `f`: each outermost region the run did not enter,
/// at least `min` bytes and, when `min` is not 0, larger than the call left in its place
/// (`Move::cost`), that can be moved (a region that cannot, or costs more to call, may hold one
/// that can). `min` 0 moves every cold region that can move.
pub fn choose(
    o: &Ops,
    regions: Vec<Region>,
    number: &dyn Fn(&Region) -> usize,
    hit: &BTreeSet<usize>,
    min: usize,
    stats: &mut Stats,
) -> Vec<(Region, Move)> {
    let mut chosen = Vec::new();
    let (mut covered, mut cold_until) = (0, 0);
    for r in regions {
        if r.start < covered || hit.contains(&number(&r)) {
            continue;
        }
        let bytes = o.at[r.end] - o.at[r.start];
        if r.start >= cold_until {
            stats.cold += bytes;
            cold_until = r.end;
        }
        if bytes < min {
            stats.small_bytes += bytes;
            covered = r.end;
            continue;
        }
        match shape(o, &r) {
            Shape::Movable(m) if min > 0 && bytes < m.cost() => {
                // Dearer to call than to keep: a region inside it may use fewer locals.
                stats.small_bytes += bytes;
            }
            Shape::Movable(m) => {
                stats.moved += 1;
                stats.moved_bytes += bytes;
                covered = r.end;
                chosen.push((r, m));
            }
            Shape::Params => stats.params_bytes += bytes,
            Shape::Carries => stats.carries_bytes += bytes,
        }
    }
    chosen
}

/// New function types, deduplicated, after the module's own.
pub struct NewTypes {
    pub first: u32,
    pub list: Vec<we::FuncType>,
    index: HashMap<(Vec<we::ValType>, Vec<we::ValType>), u32>,
}

impl NewTypes {
    pub fn new(first: u32) -> NewTypes {
        NewTypes {
            first,
            list: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn get(&mut self, params: Vec<we::ValType>, results: Vec<we::ValType>) -> u32 {
        let n = self.first + self.list.len() as u32;
        *self
            .index
            .entry((params.clone(), results.clone()))
            .or_insert_with(|| {
                self.list.push(we::FuncType::new(params, results));
                n
            })
    }
}

fn val(t: wp::ValType) -> Result<we::ValType> {
    re(Same.val_type(t))
}

/// Function `f`'s body with its chosen regions replaced by calls to new functions, numbered from
/// `next_func`; returns the body and the new functions (type index, body).
#[allow(clippy::too_many_arguments)]
pub fn rewrite(
    bytes: &[u8],
    body: &wp::FunctionBody,
    o: &Ops,
    local_types: &[wp::ValType],
    chosen: &[(Region, Move)],
    next_func: u32,
    types: &mut NewTypes,
) -> Result<(we::Function, Vec<(u32, we::Function)>)> {
    // The caller keeps the exit code in one new local, after its own, and the values an exit
    // carries in new locals after that, each region its own.
    let code_local = local_types.len() as u32;
    let mut locals = Vec::new();
    for pair in body.get_locals_reader().map_err(|e| e.to_string())? {
        let (n, t) = pair.map_err(|e| e.to_string())?;
        locals.push((n, val(t)?));
    }
    if chosen.iter().any(|(_, s)| !s.exits.is_empty()) {
        locals.push((1, we::ValType::I32));
    }
    let mut carried_locals = Vec::new();
    let mut next_local = code_local + 1;
    for (r, s) in chosen {
        let mut mine = Vec::new();
        for (_, ts) in s.carrying(r) {
            let mut ls = Vec::new();
            for &t in ts {
                locals.push((1, val(t)?));
                ls.push(next_local);
                next_local += 1;
            }
            mine.push(ls);
        }
        carried_locals.push(mine);
    }
    let mut f = we::Function::new(locals);
    let mut new = Vec::new();
    let mut from = 0;
    for (n, (r, s)) in chosen.iter().enumerate() {
        let s = &s.canonical(local_types);
        f.raw(bytes[o.at[from]..o.at[r.start]].iter().copied());
        from = r.end;
        let params: Vec<we::ValType> = s
            .used
            .iter()
            .map(|&l| val(local_types[l as usize]))
            .collect::<Result<_>>()?;
        let carrying = s.carrying(r);
        let mut results: Vec<we::ValType> =
            r.results.iter().map(|&t| val(t)).collect::<Result<_>>()?;
        for (_, ts) in &carrying {
            for &t in *ts {
                results.push(val(t)?);
            }
        }
        results.extend(
            s.written
                .iter()
                .map(|&l| val(local_types[l as usize]))
                .collect::<Result<Vec<_>>>()?,
        );
        if !s.exits.is_empty() {
            results.push(we::ValType::I32);
        }
        let ty = types.get(params, results);
        let g = next_func + n as u32;
        // The call in the region's place.
        for &l in &s.used {
            f.instruction(&we::Instruction::LocalGet(l));
        }
        f.instruction(&we::Instruction::Call(g));
        if !s.exits.is_empty() {
            f.instruction(&we::Instruction::LocalSet(code_local));
        }
        for &l in s.written.iter().rev() {
            f.instruction(&we::Instruction::LocalSet(l));
        }
        let carried = &carried_locals[n];
        for l in carried.iter().flatten().rev() {
            f.instruction(&we::Instruction::LocalSet(*l));
        }
        // An outer label `k` is at depth k + 1 from the region's top level; inside one more block, k + 2.
        match s.exits.as_slice() {
            [] => {}
            ks if !carrying.is_empty() => {
                // Inside a block that ends where the region did, one block for each exit that
                // carries values, innermost first: a `br_table` on the code goes to the end of
                // the outer block (0), to the end of an exit's own block, or straight to an
                // outer label; after each exit's block, its values and a branch to its label.
                let m = carrying.len() as u32;
                let landing = |j: usize| carrying.iter().position(|&(c, _)| c == j as i32 + 1);
                f.instruction(&we::Instruction::Block(we::BlockType::Empty));
                for _ in 0..m {
                    f.instruction(&we::Instruction::Block(we::BlockType::Empty));
                }
                f.instruction(&we::Instruction::LocalGet(code_local));
                let targets: Vec<u32> = std::iter::once(m)
                    .chain(ks.iter().enumerate().map(|(j, &k)| match landing(j) {
                        Some(c) => c as u32,
                        None => k as u32 + m + 2,
                    }))
                    .collect();
                f.instruction(&we::Instruction::BrTable(targets.into(), m));
                for (c, (code, _)) in carrying.iter().enumerate() {
                    f.instruction(&we::Instruction::End);
                    for &l in &carried[c] {
                        f.instruction(&we::Instruction::LocalGet(l));
                    }
                    let k = ks[*code as usize - 1] as u32;
                    // Inside the blocks of the later exits and the outer one.
                    f.instruction(&we::Instruction::Br(k + 1 + (m - c as u32 - 1) + 1));
                }
                f.instruction(&we::Instruction::End);
            }
            [k] => {
                f.instruction(&we::Instruction::LocalGet(code_local));
                f.instruction(&we::Instruction::BrIf(*k as u32 + 1));
            }
            ks => {
                f.instruction(&we::Instruction::Block(we::BlockType::Empty));
                f.instruction(&we::Instruction::LocalGet(code_local));
                let targets: Vec<u32> = std::iter::once(0)
                    .chain(ks.iter().map(|&k| k as u32 + 2))
                    .collect();
                f.instruction(&we::Instruction::BrTable(targets.into(), 0));
                f.instruction(&we::Instruction::End);
            }
        }
        new.push((ty, outlined(o, r, s, types)?));
    }
    f.raw(bytes[o.at[from]..o.at[o.ops.len()]].iter().copied());
    Ok((f, new))
}

/// The new function for region `r`.
fn outlined(o: &Ops, r: &Region, s: &Move, types: &mut NewTypes) -> Result<we::Function> {
    let param: HashMap<u32, u32> = (s.used.iter().enumerate())
        .map(|(i, &l)| (l, i as u32))
        .collect();
    let local = |l: u32| param[&l];
    // A `br_table` that leaves the region keeps its index in a local of its own, after the
    // parameters, while it branches through the blocks of its exits.
    // Locals after the parameters: that index; a `br_if`'s condition and the values of an exit
    // that carries them, while the others are put in place (`held`, one list per such exit).
    let carrying = s.carrying(r);
    let mut locals = Vec::new();
    let mut next = s.used.len() as u32;
    let index = next;
    if s.table_out {
        locals.push((1, we::ValType::I32));
        next += 1;
    }
    let cond = next;
    let mut held: Vec<Vec<u32>> = Vec::new();
    if !carrying.is_empty() {
        locals.push((1, we::ValType::I32));
        next += 1;
        for (_, ts) in &carrying {
            let mut ls = Vec::new();
            for &t in *ts {
                locals.push((1, val(t)?));
                ls.push(next);
                next += 1;
            }
            held.push(ls);
        }
    }
    let mut g = we::Function::new(locals);
    // The list of held values of the exit with this code, if it carries any.
    let held_of = |code: i32| {
        carrying
            .iter()
            .position(|&(c, _)| c == code)
            .map(|c| &held[c])
    };
    let block = match r.results.as_slice() {
        [] => we::BlockType::Empty,
        [t] => we::BlockType::Result(val(*t)?),
        ts => we::BlockType::FunctionType(types.get(
            Vec::new(),
            ts.iter().map(|&t| val(t)).collect::<Result<_>>()?,
        )),
    };
    // Leaving by exit `code`: stand-ins for the results, the values of the exits that carry
    // them (held, for this exit; stand-ins for the others), the written locals, the code.
    let leave = |g: &mut we::Function, code: Option<i32>| -> Result<()> {
        if code.is_some() {
            for &t in &r.results {
                g.instruction(&zero(t)?);
            }
        }
        for (c, (exit, ts)) in carrying.iter().enumerate() {
            if code == Some(*exit) {
                for &l in &held[c] {
                    g.instruction(&we::Instruction::LocalGet(l));
                }
            } else {
                for &t in *ts {
                    g.instruction(&zero(t)?);
                }
            }
        }
        for &l in &s.written {
            g.instruction(&we::Instruction::LocalGet(local(l)));
        }
        if !s.exits.is_empty() {
            g.instruction(&we::Instruction::I32Const(code.unwrap_or(0)));
        }
        Ok(())
    };
    g.instruction(&we::Instruction::Block(block));
    let mut nest = 0u32;
    let exit = |k: usize| s.exits.iter().position(|&e| e == k).unwrap() as i32 + 1;
    for op in &o.ops[r.start..r.end] {
        match op {
            wp::Operator::Block { .. } | wp::Operator::Loop { .. } | wp::Operator::If { .. } => {
                nest += 1;
                g.instruction(&re(Same.instruction(op.clone()))?);
            }
            wp::Operator::End => {
                nest -= 1;
                g.instruction(&we::Instruction::End);
            }
            wp::Operator::LocalGet { local_index } => {
                g.instruction(&we::Instruction::LocalGet(local(*local_index)));
            }
            wp::Operator::LocalSet { local_index } => {
                g.instruction(&we::Instruction::LocalSet(local(*local_index)));
            }
            wp::Operator::LocalTee { local_index } => {
                g.instruction(&we::Instruction::LocalTee(local(*local_index)));
            }
            wp::Operator::Br { relative_depth } if *relative_depth > nest => {
                let code = exit((relative_depth - nest - 1) as usize);
                // The values it carries, from the top of the stack into their locals.
                for &l in held_of(code).into_iter().flatten().rev() {
                    g.instruction(&we::Instruction::LocalSet(l));
                }
                leave(&mut g, Some(code))?;
                g.instruction(&we::Instruction::Return);
            }
            wp::Operator::BrIf { relative_depth } if *relative_depth > nest => {
                let code = exit((relative_depth - nest - 1) as usize);
                let values = held_of(code);
                if let Some(ls) = values {
                    // The condition and the values under it into locals; the values back on
                    // the stack when the branch is not taken, as `br_if` leaves them.
                    g.instruction(&we::Instruction::LocalSet(cond));
                    for &l in ls.iter().rev() {
                        g.instruction(&we::Instruction::LocalSet(l));
                    }
                    g.instruction(&we::Instruction::LocalGet(cond));
                }
                g.instruction(&we::Instruction::If(we::BlockType::Empty));
                leave(&mut g, Some(code))?;
                g.instruction(&we::Instruction::Return);
                g.instruction(&we::Instruction::End);
                for &l in values.into_iter().flatten() {
                    g.instruction(&we::Instruction::LocalGet(l));
                }
            }
            wp::Operator::Return => {
                let code = exit(r.outer.len() - 1);
                for &l in held_of(code).into_iter().flatten().rev() {
                    g.instruction(&we::Instruction::LocalSet(l));
                }
                leave(&mut g, Some(code))?;
                g.instruction(&we::Instruction::Return);
            }
            wp::Operator::BrTable { targets }
                if table_targets(targets).iter().any(|&d| d > nest) =>
            {
                // One block around the `br_table` for each outer label it reaches, innermost
                // first; a target inside the region moves out past those blocks; the end of
                // each block leaves by that label's exit.
                let all = table_targets(targets);
                let mut outs: Vec<usize> = Vec::new();
                for &d in &all {
                    if d > nest && !outs.contains(&((d - nest - 1) as usize)) {
                        outs.push((d - nest - 1) as usize);
                    }
                }
                let m = outs.len() as u32;
                let mapped: Vec<u32> = all
                    .iter()
                    .map(|&d| match d > nest {
                        true => outs
                            .iter()
                            .position(|&k| k == (d - nest - 1) as usize)
                            .unwrap() as u32,
                        false => d + m,
                    })
                    .collect();
                let (default, targets) = mapped.split_last().unwrap();
                g.instruction(&we::Instruction::LocalSet(index));
                for _ in 0..m {
                    g.instruction(&we::Instruction::Block(we::BlockType::Empty));
                }
                g.instruction(&we::Instruction::LocalGet(index));
                g.instruction(&we::Instruction::BrTable(targets.to_vec().into(), *default));
                for &k in &outs {
                    g.instruction(&we::Instruction::End);
                    leave(&mut g, Some(exit(k)))?;
                    g.instruction(&we::Instruction::Return);
                }
            }
            op => {
                g.instruction(&re(Same.instruction(op.clone()))?);
            }
        }
    }
    g.instruction(&we::Instruction::End);
    leave(&mut g, None)?;
    g.instruction(&we::Instruction::End);
    Ok(g)
}

/// Every local's type: the function's parameters, then its declared locals.
pub fn local_types(params: &[wp::ValType], body: &wp::FunctionBody) -> Result<Vec<wp::ValType>> {
    let mut t = params.to_vec();
    for pair in body.get_locals_reader().map_err(|e| e.to_string())? {
        let (n, ty) = pair.map_err(|e| e.to_string())?;
        t.extend(std::iter::repeat_n(ty, n as usize));
    }
    Ok(t)
}
