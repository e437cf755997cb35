//! `check_with` compares index trees with their tables through a hook the SQL layer implements.
//! Here: a table keyed by an integer row id holding (name, age) records, and an index on name
//! whose keys are (name, row id), both encoded with `codec`.

use cairn_store::{Db, IndexHook, MemoryFile, Options, TreeInfo, TreeKind};
use cairn_value::codec::{decode_key, encode_key, encode_record, Record};
use cairn_value::Value;

/// The index's metadata holds the indexed column's number.
struct ColumnIndex;

impl IndexHook for ColumnIndex {
    fn entries(
        &self,
        index: &TreeInfo,
        _table: &TreeInfo,
        row_key: &[u8],
        row_value: &[u8],
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> cairn_store::Result<()> {
        let col: usize = std::str::from_utf8(&index.meta).unwrap().parse().unwrap();
        let corrupt = |e: cairn_value::Error| cairn_store::Error::Corrupt(e.0);
        let v = Record::new(row_value)
            .and_then(|r| r.get(col))
            .map_err(corrupt)?;
        let id = decode_key(row_key).map_err(corrupt)?.remove(0);
        out.push((encode_key(&[v, id]), Vec::new()));
        Ok(())
    }
}

fn build() -> Db<MemoryFile> {
    let db = Db::create(MemoryFile::new(), Options::default()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("people", TreeKind::Table).unwrap();
    let names = ["ada", "grace", "edsger", "barbara", "ken", "dennis", "ada"];
    let mut rows: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let key = encode_key(&[Value::Integer(i as i64 + 1)]);
        let rec = encode_record(&[Value::Text(n.to_string()), Value::Integer(30 + i as i64)]);
        tx.insert(t, &key, &rec).unwrap();
        rows.push((key, rec));
    }
    // CREATE INDEX: derive the entries, sort them, build the tree bottom-up.
    let ix = tx
        .create_tree(
            "people_name",
            TreeKind::Index {
                table: "people".into(),
            },
        )
        .unwrap();
    tx.set_meta(ix, b"0").unwrap();
    let info = tx.tree_info(ix).unwrap();
    let tinfo = tx.tree_info(t).unwrap();
    let mut entries = Vec::new();
    for (k, v) in &rows {
        ColumnIndex
            .entries(&info, &tinfo, k, v, &mut entries)
            .unwrap();
    }
    entries.sort();
    assert_eq!(tx.bulk_load(ix, entries).unwrap(), 7);
    tx.commit().unwrap();
    db
}

#[test]
fn a_consistent_index_passes() {
    let db = build();
    let rep = db.check_with(&ColumnIndex).unwrap();
    assert!(rep.is_ok(), "{rep}");
}

#[test]
fn a_missing_and_an_extra_index_entry_are_both_reported() {
    let db = build();
    let mut tx = db.begin_write().unwrap();
    let ix = tx.open_tree("people_name").unwrap();
    let gone = encode_key(&[Value::Text("ken".into()), Value::Integer(5)]);
    assert!(tx.remove(ix, &gone).unwrap());
    let bogus = encode_key(&[Value::Text("zed".into()), Value::Integer(99)]);
    tx.insert(ix, &bogus, b"").unwrap();
    tx.commit().unwrap();
    // The plain check cannot see it; the index check can.
    assert!(db.check().unwrap().is_ok());
    let rep = db.check_with(&ColumnIndex).unwrap();
    assert_eq!(rep.problems.len(), 2, "{rep}");
    assert!(
        rep.problems.iter().any(|p| p.message.contains("lacks")),
        "{rep}"
    );
    assert!(
        rep.problems.iter().any(|p| p.message.contains("no row")),
        "{rep}"
    );
}

#[test]
fn a_row_changed_without_its_index_is_reported() {
    let db = build();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("people").unwrap();
    let key = encode_key(&[Value::Integer(2)]);
    let rec = encode_record(&[Value::Text("hopper".into()), Value::Integer(31)]);
    tx.insert(t, &key, &rec).unwrap();
    tx.commit().unwrap();
    let rep = db.check_with(&ColumnIndex).unwrap();
    assert_eq!(rep.problems.len(), 2, "{rep}");
}
