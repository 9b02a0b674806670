//! Deserialisation that keeps cached objects small.
//!
//! serde builds a `Vec` by pushing one element at a time (JSON gives no length up front), so a
//! list of one or two elements ends with room for four. For the lists every Work and binding
//! carries (conditions, manifest statuses, target clusters, aggregated statuses) that spare room
//! is most of the list: ≈ 1 KiB per Work, held for as long as the object sits in a cache. Fields
//! tagged `#[serde(deserialize_with = "crate::compact::vec")]` are trimmed to their length.

use serde::{Deserialize, Deserializer};

/// A `Vec` trimmed to its length after deserialisation.
pub(crate) fn vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut v = Vec::<T>::deserialize(deserializer)?;
    v.shrink_to_fit();
    Ok(v)
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize)]
    struct Holder {
        #[serde(default, deserialize_with = "super::vec")]
        items: Vec<u64>,
    }

    #[test]
    fn trims_to_length_and_keeps_defaults() {
        let h: Holder = serde_json::from_str(r#"{"items":[1,2]}"#).unwrap();
        assert_eq!(h.items, vec![1, 2]);
        assert_eq!(h.items.capacity(), 2);
        let h: Holder = serde_json::from_str("{}").unwrap();
        assert!(h.items.is_empty());
    }
}
