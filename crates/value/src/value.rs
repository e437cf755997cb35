//! A SQL value as the storage engine keeps it, and the order SQL sorts values in.
//!
//! The order is SQLite's: NULL < INTEGER and REAL (compared by numeric value) < TEXT (bytewise,
//! which for UTF-8 is code point order, SQLite's BINARY collation) < BLOB (bytewise).

use std::cmp::Ordering;

#[derive(Debug, Clone)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    /// The storage class rank used to order values of different kinds.
    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Integer(_) | Value::Real(_) => 1,
            Value::Text(_) => 2,
            Value::Blob(_) => 3,
        }
    }

    /// SQLite's `typeof()` name.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Integer(_) => "integer",
            Value::Real(_) => "real",
            Value::Text(_) => "text",
            Value::Blob(_) => "blob",
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Total order over values (SQLite's sort order; NaN, which SQLite stores as NULL, sorts
    /// below every other number here so the order stays total).
    pub fn total_cmp(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Integer(a), Value::Integer(b)) => a.cmp(b),
            (Value::Real(a), Value::Real(b)) => cmp_f64(*a, *b),
            (Value::Integer(a), Value::Real(b)) => cmp_int_real(*a, *b),
            (Value::Real(a), Value::Integer(b)) => cmp_int_real(*b, *a).reverse(),
            (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Value::Blob(a), Value::Blob(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

fn cmp_f64(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Compares an integer with a real exactly, without losing precision for large integers.
fn cmp_int_real(i: i64, r: f64) -> Ordering {
    if r.is_nan() {
        return Ordering::Greater;
    }
    // 2^63 as f64 is exact; every i64 is below it and at or above -2^63.
    if r >= 9_223_372_036_854_775_808.0 {
        return Ordering::Less;
    }
    if r < -9_223_372_036_854_775_808.0 {
        return Ordering::Greater;
    }
    let t = r.trunc();
    // `t` is within i64 range here, so the cast is exact.
    match i.cmp(&(t as i64)) {
        Ordering::Equal => cmp_f64(0.0, r - t),
        o => o,
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.total_cmp(other) == Ordering::Equal
    }
}
impl Eq for Value {}
impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Value {
    fn cmp(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

#[cfg(test)]
mod tests {
    use super::Value::*;
    use super::*;

    #[test]
    fn sqlite_order_across_types() {
        let mut v = [
            Blob(vec![0]),
            Text("b".into()),
            Real(1.5),
            Null,
            Integer(1),
            Text("a".into()),
            Integer(2),
            Real(-0.5),
        ];
        v.sort();
        let names: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
        assert_eq!(
            names,
            [
                "Null",
                "Real(-0.5)",
                "Integer(1)",
                "Real(1.5)",
                "Integer(2)",
                "Text(\"a\")",
                "Text(\"b\")",
                "Blob([0])"
            ]
        );
    }

    #[test]
    fn large_integers_compare_exactly_with_reals() {
        let big = i64::MAX;
        assert_eq!(
            Integer(big).cmp(&Real(9.223_372_036_854_776e18)),
            Ordering::Less
        );
        assert_eq!(
            Integer(1 << 53).cmp(&Real((1u64 << 53) as f64)),
            Ordering::Equal
        );
        assert_eq!(
            Integer((1 << 53) + 1).cmp(&Real((1u64 << 53) as f64)),
            Ordering::Greater
        );
        assert_eq!(Integer(i64::MIN).cmp(&Real(-9.3e18)), Ordering::Greater);
        assert_eq!(Integer(3).cmp(&Real(3.0)), Ordering::Equal);
    }
}
