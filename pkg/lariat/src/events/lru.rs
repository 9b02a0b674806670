//! A bounded least-recently-used map (client-go's `k8s.io/utils/lru`), so the Event correlator's
//! memory stays bounded however many objects it sees.
//!
//! Keys are stored as a 128-bit digest (the first half of their SHA-256), not as text: the
//! correlator's keys join an Event's source, object, reason and message (a few hundred bytes
//! each), and three full caches of 4,096 would otherwise hold ≈ 6 MiB of key text. A digest
//! collision between two keys is as likely as guessing a random 128-bit number.

use std::collections::{BTreeMap, HashMap};

/// A key's digest.
pub(super) type Digest = u128;

/// The digest of `key` (also used by the correlator to count distinct messages without keeping them).
pub(super) fn digest(key: &str) -> Digest {
    let d = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let mut half = [0u8; 16];
    half.copy_from_slice(&d.as_ref()[..16]);
    u128::from_le_bytes(half)
}

/// At most `capacity` entries; inserting into a full cache evicts the entry used longest ago.
/// Reading an entry with [`Lru::get_mut`] counts as a use.
#[derive(Debug)]
pub struct Lru<V> {
    capacity: usize,
    tick: u64,
    entries: HashMap<Digest, (u64, V)>,
    /// Last use → key, oldest first.
    order: BTreeMap<u64, Digest>,
}

impl<V> Lru<V> {
    /// An empty cache holding at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        Lru {
            capacity: capacity.max(1),
            tick: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    fn touch(&mut self, key: Digest) -> u64 {
        self.tick += 1;
        if let Some((used, _)) = self.entries.get(&key) {
            self.order.remove(used);
        }
        self.order.insert(self.tick, key);
        self.tick
    }

    /// The entry of `key`, marked as just used.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let key = digest(key);
        if !self.entries.contains_key(&key) {
            return None;
        }
        let tick = self.touch(key);
        let entry = self.entries.get_mut(&key)?;
        entry.0 = tick;
        Some(&mut entry.1)
    }

    /// Sets the entry of `key`, evicting the least recently used one when the cache is full.
    pub fn insert(&mut self, key: &str, value: V) {
        let key = digest(key);
        let tick = self.touch(key);
        self.entries.insert(key, (tick, value));
        while self.entries.len() > self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }

    /// Entries held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_entry() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        // Using `a` makes `b` the oldest.
        assert_eq!(lru.get_mut("a").copied(), Some(1));
        lru.insert("c", 3);
        assert_eq!(lru.len(), 2);
        assert!(lru.get_mut("b").is_none());
        assert_eq!(lru.get_mut("a").copied(), Some(1));
        assert_eq!(lru.get_mut("c").copied(), Some(3));
        // Replacing an entry does not grow the cache.
        lru.insert("c", 4);
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.get_mut("c").copied(), Some(4));
    }
}
