//! Ordering resourceVersions. Kubernetes long told clients to treat them as opaque; since 1.34 an
//! API server backed by etcd promises they compare (KEP-5504, client-go's
//! `CompareResourceVersion`): decimal integers without leading zeros, the longer one newer, equal
//! lengths compared digit by digit. Anything else does not compare.

use std::cmp::Ordering;

/// How resourceVersion `a` orders against `b`; `None` when either is not a comparable one (empty,
/// not decimal, a leading zero), so callers fall back to what they did without an order.
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    (comparable(a) && comparable(b)).then(|| a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

/// Whether `rv` is a decimal integer without a leading zero.
fn comparable(rv: &str) -> bool {
    !rv.is_empty() && rv.bytes().all(|b| b.is_ascii_digit()) && (rv == "0" || !rv.starts_with('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longer_is_newer_and_equal_lengths_compare_by_digit() {
        assert_eq!(compare("10", "9"), Some(Ordering::Greater));
        assert_eq!(compare("123", "124"), Some(Ordering::Less));
        assert_eq!(compare("777", "777"), Some(Ordering::Equal));
        // Beyond u64: still ordered.
        assert_eq!(
            compare("184467440737095516160", "18446744073709551615"),
            Some(Ordering::Greater)
        );
    }

    #[test]
    fn what_is_not_a_comparable_version_does_not_compare() {
        for odd in ["", "01", "12a", "-3", " 5"] {
            assert_eq!(compare(odd, "5"), None, "{odd:?}");
            assert_eq!(compare("5", odd), None, "{odd:?}");
        }
        assert_eq!(compare("0", "1"), Some(Ordering::Less));
    }
}
