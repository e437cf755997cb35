//! Cases every [`Storage`] implementation must pass (as cairn-store's block files have their
//! conformance suite): call [`run`] from a test with a constructor for a fresh,
//! empty storage. They panic on the first failure, naming it.

use super::*;

fn keys(s: &dyn Storage, t: TreeId, lo: Bound<&[u8]>, hi: Bound<&[u8]>, rev: bool) -> Vec<Vec<u8>> {
    let mut c = s.scan(t, lo, hi, rev).expect("scan");
    let mut v = Vec::new();
    while c.next().expect("next") {
        v.push(c.key().to_vec());
    }
    v
}

pub fn run(make: &dyn Fn() -> Box<dyn Storage>) {
    writes_need_a_transaction(make());
    commit_keeps_and_rollback_restores(make());
    savepoints_undo_only_what_followed(make());
    scans_honour_bounds_and_direction(make());
    scans_return_each_entry_whole(make());
    bytes_beside_a_tree_commit_and_roll_back_like_a_put(make());
    root_bytes_commit_and_roll_back_like_a_put(make());
}

/// `set_root_meta`: empty until set, kept by a commit (and by commits that do not set
/// them), undone by a rollback and by a rollback to a savepoint; more than the room refused.
fn root_bytes_commit_and_roll_back_like_a_put(mut s: Box<dyn Storage>) {
    let room = s.root_meta_room();
    assert!(room >= 128, "room for a few records: {room}");
    assert_eq!(s.root_meta().expect("root"), b"");
    assert!(s.set_root_meta(b"x").is_err(), "outside a transaction");
    s.begin().expect("begin");
    s.set_root_meta(b"one").expect("set");
    assert_eq!(s.root_meta().expect("root"), b"one");
    s.commit().expect("commit");
    assert_eq!(s.root_meta().expect("root"), b"one", "read outside");
    s.begin().expect("begin");
    s.create_tree(5).expect("create");
    s.put(5, b"k", b"v").expect("put");
    s.commit().expect("commit");
    assert_eq!(s.root_meta().expect("root"), b"one", "kept");
    s.begin().expect("begin");
    s.set_root_meta(&vec![7; room]).expect("set the whole room");
    s.rollback().expect("rollback");
    assert_eq!(s.root_meta().expect("root"), b"one");
    s.begin().expect("begin");
    assert!(
        s.set_root_meta(&vec![7; room + 1]).is_err(),
        "past the room"
    );
    s.set_root_meta(b"two").expect("set");
    let sp = s.savepoint().expect("savepoint");
    s.set_root_meta(b"three").expect("set");
    s.put(5, b"k2", b"v").expect("put");
    s.set_root_meta(b"four").expect("set");
    s.rollback_to(sp).expect("rollback to");
    assert_eq!(s.root_meta().expect("root"), b"two");
    s.release(sp).expect("release");
    s.commit().expect("commit");
    assert_eq!(s.root_meta().expect("root"), b"two");
}

/// `set_tree_meta`: empty until set, kept by a commit, undone by a rollback and by a
/// rollback to a savepoint, and gone with its tree.
fn bytes_beside_a_tree_commit_and_roll_back_like_a_put(mut s: Box<dyn Storage>) {
    s.begin().expect("begin");
    s.create_tree(5).expect("create");
    assert_eq!(s.tree_meta(5).expect("meta"), b"");
    s.set_tree_meta(5, b"one").expect("set");
    assert_eq!(s.tree_meta(5).expect("meta"), b"one");
    s.commit().expect("commit");
    assert_eq!(
        s.tree_meta(5).expect("meta"),
        b"one",
        "read outside a transaction"
    );
    s.begin().expect("begin");
    s.set_tree_meta(5, &[7; 900]).expect("set");
    s.rollback().expect("rollback");
    assert_eq!(s.tree_meta(5).expect("meta"), b"one");
    s.begin().expect("begin");
    s.set_tree_meta(5, b"two").expect("set");
    let sp = s.savepoint().expect("savepoint");
    s.set_tree_meta(5, b"three").expect("set");
    s.put(5, b"k", b"v").expect("put");
    s.set_tree_meta(5, b"four").expect("set");
    s.rollback_to(sp).expect("rollback to");
    assert_eq!(s.tree_meta(5).expect("meta"), b"two");
    assert_eq!(s.get(5, b"k").expect("get"), None);
    s.release(sp).expect("release");
    s.commit().expect("commit");
    assert_eq!(s.tree_meta(5).expect("meta"), b"two");
    // Set first thing in a transaction (the paged store then leaves the tree unopened),
    // read back, dropped with the tree.
    s.begin().expect("begin");
    s.set_tree_meta(5, b"five").expect("set");
    s.set_tree_meta(5, b"six").expect("set");
    assert_eq!(s.tree_meta(5).expect("meta"), b"six");
    s.drop_tree(5).expect("drop");
    assert!(s.set_tree_meta(5, b"x").is_err(), "the tree is dropped");
    s.commit().expect("commit");
    s.begin().expect("begin");
    s.create_tree(5).expect("create again");
    assert_eq!(s.tree_meta(5).expect("meta"), b"", "a new tree has none");
    s.commit().expect("commit");
}

/// Values small and too big for a page, interleaved: a cursor's key and value are the
/// entry's, whichever is asked first, in both directions.
fn scans_return_each_entry_whole(mut s: Box<dyn Storage>) {
    s.begin().expect("begin");
    s.create_tree(4).expect("create");
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..40u8)
        .map(|i| {
            let len = if i % 3 == 0 {
                20_000 + i as usize
            } else {
                i as usize
            };
            (vec![b'k', i], vec![i.wrapping_mul(7); len])
        })
        .collect();
    for (k, v) in &entries {
        s.put(4, k, v).expect("put");
    }
    s.commit().expect("commit");
    for rev in [false, true] {
        let mut c = s
            .scan(4, Bound::Unbounded, Bound::Unbounded, rev)
            .expect("scan");
        let mut got = Vec::new();
        let mut i = 0;
        while c.next().expect("next") {
            let e = if i % 2 == 0 {
                let v = c.value().to_vec();
                (c.key().to_vec(), v)
            } else {
                (c.key().to_vec(), c.value().to_vec())
            };
            got.push(e);
            i += 1;
        }
        if rev {
            got.reverse();
        }
        assert!(
            got == entries,
            "scan (reverse: {rev}) returns every entry whole"
        );
    }
}

fn writes_need_a_transaction(mut s: Box<dyn Storage>) {
    assert!(
        s.put(SCHEMA_TREE, b"k", b"v").is_err(),
        "put outside a transaction must fail"
    );
    assert!(s.commit().is_err(), "commit without begin must fail");
    s.begin().expect("begin");
    assert!(s.begin().is_err(), "nested begin must fail");
    s.put(SCHEMA_TREE, b"k", b"v")
        .expect("put in the schema tree");
    s.commit().expect("commit");
    assert_eq!(s.get(SCHEMA_TREE, b"k").expect("get"), Some(b"v".to_vec()));
}

fn commit_keeps_and_rollback_restores(mut s: Box<dyn Storage>) {
    s.begin().expect("begin");
    s.create_tree(7).expect("create");
    s.put(7, b"a", b"1").expect("put");
    s.put(7, b"b", b"2").expect("put");
    s.commit().expect("commit");
    s.begin().expect("begin");
    s.put(7, b"a", b"changed").expect("put");
    assert!(
        s.delete(7, b"b").expect("delete"),
        "delete of a present key says so"
    );
    assert!(
        !s.delete(7, b"zz").expect("delete"),
        "delete of an absent key says so"
    );
    s.create_tree(8).expect("create");
    s.put(8, b"x", b"").expect("put");
    s.drop_tree(7).expect("drop");
    s.rollback().expect("rollback");
    assert_eq!(
        s.get(7, b"a").expect("get"),
        Some(b"1".to_vec()),
        "rollback restores values"
    );
    assert_eq!(
        s.get(7, b"b").expect("get"),
        Some(b"2".to_vec()),
        "rollback restores deletes"
    );
    assert!(s.get(8, b"x").is_err(), "rollback removes created trees");
    assert_eq!(s.last_key(7).expect("last"), Some(b"b".to_vec()));
}

fn savepoints_undo_only_what_followed(mut s: Box<dyn Storage>) {
    s.begin().expect("begin");
    s.create_tree(1).expect("create");
    s.put(1, b"a", b"1").expect("put");
    let sp = s.savepoint().expect("savepoint");
    s.put(1, b"a", b"2").expect("put");
    s.put(1, b"b", b"3").expect("put");
    s.rollback_to(sp).expect("rollback_to");
    assert_eq!(s.get(1, b"a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(s.get(1, b"b").expect("get"), None);
    s.put(1, b"c", b"4").expect("the transaction goes on");
    s.commit().expect("commit");
    assert_eq!(
        keys(s.as_ref(), 1, Bound::Unbounded, Bound::Unbounded, false),
        vec![b"a".to_vec(), b"c".to_vec()]
    );
}

fn scans_honour_bounds_and_direction(mut s: Box<dyn Storage>) {
    s.begin().expect("begin");
    s.create_tree(3).expect("create");
    for k in [&b"a"[..], b"ab", b"b", b"b\x00", b"c", b"\xff"] {
        s.put(3, k, k).expect("put");
    }
    s.commit().expect("commit");
    let all = keys(s.as_ref(), 3, Bound::Unbounded, Bound::Unbounded, false);
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "keys sort bytewise");
    let mut rev = keys(s.as_ref(), 3, Bound::Unbounded, Bound::Unbounded, true);
    rev.reverse();
    assert_eq!(rev, all, "reverse scans see the same keys backwards");
    assert_eq!(
        keys(
            s.as_ref(),
            3,
            Bound::Included(b"ab"),
            Bound::Excluded(b"c"),
            false
        ),
        vec![b"ab".to_vec(), b"b".to_vec(), b"b\x00".to_vec()]
    );
    assert_eq!(
        keys(
            s.as_ref(),
            3,
            Bound::Excluded(b"ab"),
            Bound::Included(b"c"),
            true
        ),
        vec![b"c".to_vec(), b"b\x00".to_vec(), b"b".to_vec()]
    );
    assert!(
        keys(
            s.as_ref(),
            3,
            Bound::Included(b"c"),
            Bound::Excluded(b"b"),
            false
        )
        .is_empty(),
        "an inverted range is empty"
    );
    assert!(keys(
        s.as_ref(),
        3,
        Bound::Excluded(b"b"),
        Bound::Excluded(b"b"),
        false
    )
    .is_empty());
    let mut c = s
        .scan(3, Bound::Included(b"b"), Bound::Included(b"b"), false)
        .expect("scan");
    assert!(c.next().expect("next"));
    assert_eq!((c.key(), c.value()), (&b"b"[..], &b"b"[..]));
    assert!(!c.next().expect("next"));
}
