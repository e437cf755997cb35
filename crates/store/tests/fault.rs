//! The fault-injecting block file keeps written and durable bytes apart and fails on cue.

use cairn_store::fault::{CrashMode, FaultFile};
use cairn_store::BlockFile;

#[test]
fn unflushed_writes_are_lost_or_kept_or_torn_by_mode() {
    let mut f = FaultFile::new();
    f.write(0, &[1; 8]).unwrap();
    f.flush().unwrap();
    f.write(8, &[2; 8]).unwrap();
    f.write(0, &[3; 8]).unwrap();

    assert_eq!(f.crash_image(CrashMode::DropUnflushed), vec![1; 8]);
    let mut kept = vec![3; 8];
    kept.extend([2; 8]);
    assert_eq!(f.crash_image(CrashMode::KeepUnflushed), kept);
    // The last write (eight 3s at 0) lands only halfway.
    let mut torn = vec![3, 3, 3, 3, 1, 1, 1, 1];
    torn.extend([2; 8]);
    assert_eq!(f.crash_image(CrashMode::TearLast), torn);
    assert_eq!(f.durable_bytes(), vec![1; 8]);
    assert_eq!(f.written_bytes(), kept);
}

#[test]
fn nth_call_fails_and_sticky_fails_all_after() {
    let mut f = FaultFile::new();
    f.fail_at(2, true);
    f.write(0, b"a").unwrap();
    f.write(1, b"b").unwrap();
    assert_eq!(f.flush().unwrap_err().code(), "IO");
    assert!(
        f.write(2, b"c").is_err(),
        "sticky fault must fail later calls"
    );
    let mut buf = [0; 1];
    assert!(
        f.read(0, &mut buf).is_err(),
        "a crashed file must not serve reads"
    );
    f.heal();
    f.flush().unwrap();
    assert_eq!(f.durable_bytes(), b"ab");
}

#[test]
fn non_sticky_fault_fails_one_call() {
    let mut f = FaultFile::new();
    f.fail_at(0, false);
    assert!(f.write(0, b"a").is_err());
    f.write(0, b"b").unwrap();
    f.flush().unwrap();
    assert_eq!(f.durable_bytes(), b"b");
    assert_eq!(f.ops(), 3);
}
