//! Golden-script tests: every `testscripts/*.txt` holds commands, a line `---`, and the output
//! they must produce. Each script runs over a `MemoryFile`, a `StdFile` and a `FaultFile`, and
//! must give the same output on all three. `UPDATE_GOLDEN=1 cargo test --test scripts` rewrites
//! the expected output (review the diff before committing it).
//!
//! Commands (keys and values are words, `"quoted strings"` or `0x` hex):
//! `options page_size=N` (first line only), `create T [index-of TABLE]`, `drop T`, `trees`,
//! `insert T K V`, `get T K`, `delete T K`, `len T`, `scan T [from K|after K] [to K|before K] [rev]`,
//! `seek T ge|gt|le|lt K [next|prev N]`, `fill T FROM TO [VALUE_LEN]`, `erase T FROM TO [STEP]`,
//! `bulk T FROM TO`, `big T K LEN`, `meta T TEXT`, `commit`, `rollback`, `reopen`, `check`,
//! `vacuum`, `stats`.

use std::fmt::Write as _;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use cairn_store::fault::FaultFile;
use cairn_store::{BlockFile, Db, MemoryFile, Options, Seek, StdFile, Tree, TreeKind, WriteTx};

trait Backend {
    type F: BlockFile;
    fn fresh(&mut self) -> Self::F;
    fn reopen(&mut self, f: Self::F) -> Self::F;
}

struct Mem;
impl Backend for Mem {
    type F = MemoryFile;
    fn fresh(&mut self) -> MemoryFile {
        MemoryFile::new()
    }
    fn reopen(&mut self, f: MemoryFile) -> MemoryFile {
        f
    }
}

struct Disk(PathBuf);
impl Backend for Disk {
    type F = StdFile;
    fn fresh(&mut self) -> StdFile {
        let _ = std::fs::remove_file(&self.0);
        StdFile::open(&self.0, true).expect("temp file")
    }
    fn reopen(&mut self, mut f: StdFile) -> StdFile {
        f.close().expect("close");
        StdFile::open(&self.0, false).expect("reopen")
    }
}

struct Fault;
impl Backend for Fault {
    type F = FaultFile;
    fn fresh(&mut self) -> FaultFile {
        FaultFile::new()
    }
    fn reopen(&mut self, f: FaultFile) -> FaultFile {
        // What survives a crash right now: commits are flushed, so nothing may be lost.
        FaultFile::from_bytes(f.crash_image(cairn_store::fault::CrashMode::DropUnflushed))
    }
}

fn tokens(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

fn bytes(t: &str) -> Vec<u8> {
    match t.strip_prefix("0x") {
        Some(h) => (0..h.len() / 2)
            .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).expect("hex"))
            .collect(),
        None => t.as_bytes().to_vec(),
    }
}

fn show(b: &[u8]) -> String {
    if b.len() > 48 {
        return format!(
            "<{} bytes, xxh64 {:016x}>",
            b.len(),
            cairn_store::xxh64(b, 0)
        );
    }
    match std::str::from_utf8(b) {
        Ok(s) if s.chars().all(|c| !c.is_control()) => s.to_string(),
        _ => format!(
            "0x{}",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
    }
}

fn as_ref(x: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match x {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn fill_key(i: u64) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

struct Runner<B: Backend> {
    backend: B,
    opts: Options,
    db: Option<Db<B::F>>,
    tx: Option<WriteTx<B::F>>,
}

impl<B: Backend> Runner<B> {
    fn tx(&mut self) -> Result<&mut WriteTx<B::F>, cairn_store::Error> {
        if self.tx.is_none() {
            self.tx = Some(self.db.as_ref().expect("db").begin_write()?);
        }
        Ok(self.tx.as_mut().expect("just set"))
    }

    fn tree(&mut self, name: &str) -> Result<Tree, cairn_store::Error> {
        self.tx()?.open_tree(name)
    }

    fn run(&mut self, line: &str, out: &mut String) -> Result<(), cairn_store::Error> {
        let t = tokens(line);
        let arg = |i: usize| t.get(i).cloned().unwrap_or_default();
        let num = |i: usize| t.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        match t[0].as_str() {
            "options" => {}
            "create" => {
                let kind = if arg(2) == "index-of" {
                    TreeKind::Index { table: arg(3) }
                } else {
                    TreeKind::Table
                };
                self.tx()?.create_tree(&arg(1), kind)?;
                writeln!(out, "ok").ok();
            }
            "drop" => {
                self.tx()?.drop_tree(&arg(1))?;
                writeln!(out, "ok").ok();
            }
            "trees" => {
                for i in self.tx()?.list_trees()? {
                    writeln!(
                        out,
                        "{} {:?} len={} meta={}",
                        i.name,
                        i.kind,
                        i.len,
                        show(&i.meta)
                    )
                    .ok();
                }
            }
            "meta" => {
                let tr = self.tree(&arg(1))?;
                self.tx()?.set_meta(tr, arg(2).as_bytes())?;
                writeln!(out, "ok").ok();
            }
            "insert" => {
                let tr = self.tree(&arg(1))?;
                let old = self.tx()?.insert(tr, &bytes(&arg(2)), &bytes(&arg(3)))?;
                writeln!(out, "{}", if old { "replaced" } else { "new" }).ok();
            }
            "big" => {
                let tr = self.tree(&arg(1))?;
                let v: Vec<u8> = (0..num(3)).map(|i| (i % 251) as u8).collect();
                self.tx()?.insert(tr, &bytes(&arg(2)), &v)?;
                writeln!(out, "ok").ok();
            }
            "get" => {
                let tr = self.tree(&arg(1))?;
                match self.tx()?.get(tr, &bytes(&arg(2)))? {
                    Some(v) => writeln!(out, "{}", show(&v)).ok(),
                    None => writeln!(out, "(none)").ok(),
                };
            }
            "delete" => {
                let tr = self.tree(&arg(1))?;
                let had = self.tx()?.remove(tr, &bytes(&arg(2)))?;
                writeln!(out, "{}", if had { "deleted" } else { "absent" }).ok();
            }
            "len" => {
                let tr = self.tree(&arg(1))?;
                writeln!(out, "{}", self.tx()?.len(tr)?).ok();
            }
            "fill" | "bulk" => {
                let tr = self.tree(&arg(1))?;
                let vlen = num(4) as usize;
                let val = |i: u64| {
                    if vlen == 0 {
                        format!("v{i}").into_bytes()
                    } else {
                        vec![b'a' + (i % 26) as u8; vlen]
                    }
                };
                let (a, b) = (num(2), num(3));
                if t[0] == "fill" {
                    for i in a..b {
                        self.tx()?.insert(tr, &fill_key(i), &val(i))?;
                    }
                } else {
                    self.tx()?
                        .bulk_load(tr, (a..b).map(|i| (fill_key(i), val(i))))?;
                }
                writeln!(out, "{} rows", b - a).ok();
            }
            "erase" => {
                let tr = self.tree(&arg(1))?;
                let step = num(4).max(1);
                let mut n = 0;
                let mut i = num(2);
                while i < num(3) {
                    n += self.tx()?.remove(tr, &fill_key(i))? as u64;
                    i += step;
                }
                writeln!(out, "{n} deleted").ok();
            }
            "scan" => {
                let tr = self.tree(&arg(1))?;
                let (mut lo, mut hi, mut rev) = (Bound::Unbounded, Bound::Unbounded, false);
                let mut i = 2;
                while i < t.len() {
                    match t[i].as_str() {
                        "from" => lo = Bound::Included(bytes(&t[i + 1])),
                        "after" => lo = Bound::Excluded(bytes(&t[i + 1])),
                        "to" => hi = Bound::Included(bytes(&t[i + 1])),
                        "before" => hi = Bound::Excluded(bytes(&t[i + 1])),
                        "rev" => {
                            rev = true;
                            i -= 1;
                        }
                        w => panic!("scan: unknown word {w}"),
                    }
                    i += 2;
                }
                let b = |x: &Bound<Vec<u8>>| match x {
                    Bound::Included(v) => Bound::Included(v.clone()),
                    Bound::Excluded(v) => Bound::Excluded(v.clone()),
                    Bound::Unbounded => Bound::Unbounded,
                };
                let (lo, hi) = (b(&lo), b(&hi));
                let mut r = self.tx()?.range(tr, as_ref(&lo), as_ref(&hi), rev)?;
                let mut n = 0;
                while r.next()? {
                    n += 1;
                    let k = show(r.key());
                    writeln!(out, "{k} = {}", show(r.value()?)).ok();
                }
                writeln!(out, "({n} entries)").ok();
            }
            "seek" => {
                let tr = self.tree(&arg(1))?;
                let op = match arg(2).as_str() {
                    "ge" => Seek::Ge,
                    "gt" => Seek::Gt,
                    "le" => Seek::Le,
                    _ => Seek::Lt,
                };
                let mut c = self.tx()?.cursor(tr)?;
                let mut ok = c.seek(&bytes(&arg(3)), op)?;
                let steps = num(5);
                let mut line = String::new();
                for s in 0..=steps {
                    if s > 0 {
                        ok = if arg(4) == "prev" {
                            c.prev()?
                        } else {
                            c.next()?
                        };
                    }
                    if !ok {
                        line.push_str("(end)");
                        break;
                    }
                    line.push_str(&show(c.key().expect("valid")));
                    line.push(' ');
                }
                writeln!(out, "{}", line.trim_end()).ok();
            }
            "commit" => {
                if let Some(tx) = self.tx.take() {
                    tx.commit()?;
                }
                writeln!(out, "ok").ok();
            }
            "rollback" => {
                self.tx.take();
                writeln!(out, "ok").ok();
            }
            "reopen" => {
                self.tx.take();
                let f = self.db.take().expect("db").into_file()?;
                let f = self.backend.reopen(f);
                self.db = Some(Db::open(f, self.opts.clone())?);
                writeln!(out, "ok").ok();
            }
            "check" => {
                self.tx.take();
                let rep = self.db.as_ref().expect("db").check()?;
                if rep.is_ok() {
                    writeln!(out, "ok: {} trees, {} entries", rep.trees, rep.entries).ok();
                } else {
                    write!(out, "{rep}").ok();
                }
            }
            "stats" => {
                self.tx.take();
                let rep = self.db.as_ref().expect("db").check()?;
                writeln!(
                    out,
                    "pages={} used={} free={} free_tree={}",
                    rep.page_count, rep.used_pages, rep.free_pages, rep.free_tree_pages
                )
                .ok();
            }
            "vacuum" => {
                self.tx.take();
                let (a, b) = self.db.as_ref().expect("db").vacuum()?;
                writeln!(out, "{a} -> {b} pages").ok();
            }
            w => panic!("unknown command {w}"),
        }
        Ok(())
    }
}

fn run_script<B: Backend>(backend: B, input: &str) -> String {
    let mut opts = Options::default();
    if let Some(first) = input.lines().next() {
        for w in tokens(first).iter().skip(1) {
            if let Some(v) = w.strip_prefix("page_size=") {
                opts.page_size = v.parse().expect("page size");
            }
        }
    }
    let mut r = Runner {
        backend,
        opts: opts.clone(),
        db: None,
        tx: None,
    };
    let f = r.backend.fresh();
    r.db = Some(Db::create(f, opts).expect("create"));
    let mut out = String::new();
    for line in input.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        writeln!(out, "> {line}").ok();
        if let Err(e) = r.run(line, &mut out) {
            writeln!(out, "error {}: {e}", e.code()).ok();
        }
    }
    out
}

/// A script's output with each `stats` line cut to what memory and a file must agree on:
/// the pages the trees use, and the pages in the file less the free ones, both without the
/// free tree's own pages (and of `vacuum`'s line, nothing). In memory a write changes committed pages under their own numbers, where
/// a file copies them to new pages; so the same script leaves a file with more pages, every
/// one of them free.
fn same_shape(out: &str) -> String {
    out.lines()
        .map(|l| {
            let n = |f: &str| -> Option<u64> {
                l.split(' ')
                    .find_map(|w| w.strip_prefix(f))
                    .and_then(|v| v.parse().ok())
            };
            match (n("pages="), n("used="), n("free="), n("free_tree=")) {
                // The free tree's own pages are left out: a file lists more free pages.
                (Some(p), Some(u), Some(f), Some(t)) if l.starts_with("pages=") => {
                    format!("used={} pages less free={}\n", u - t, p - f - t)
                }
                // `vacuum`'s page counts, which such free pages raise (before) and which a
                // free page kept at the end can (after); the `stats` after it compares.
                _ if l.ends_with(" pages") && l.contains(" -> ") => "vacuumed\n".to_string(),
                _ => format!("{l}\n"),
            }
        })
        .collect()
}

#[test]
fn golden_scripts() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testscripts");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("testscripts dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty());
    let tmp = std::env::temp_dir().join(format!("cairn-scripts-{}.db", std::process::id()));
    let mut failures = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("script");
        let (input, expected) = match text.split_once("\n---\n") {
            Some((i, e)) => (i.to_string(), e.to_string()),
            None => (text.clone(), String::new()),
        };
        let mem = run_script(Mem, &input);
        let disk = run_script(Disk(tmp.clone()), &input);
        let fault = run_script(Fault, &input);
        assert_eq!(
            same_shape(&mem),
            same_shape(&disk),
            "{}: memory and file backends differ",
            path.display()
        );
        assert_eq!(
            same_shape(&mem),
            same_shape(&fault),
            "{}: memory and fault backends differ",
            path.display()
        );
        if std::env::var("UPDATE_GOLDEN").is_ok() {
            std::fs::write(&path, format!("{input}\n---\n{mem}")).expect("write");
        } else if mem != expected {
            failures.push(format!(
                "{}:\n--- expected\n{expected}\n--- got\n{mem}",
                path.display()
            ));
        }
    }
    let _ = std::fs::remove_file(&tmp);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
