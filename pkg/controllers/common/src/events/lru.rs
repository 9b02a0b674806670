//! A bounded least-recently-used map (client-go's `k8s.io/utils/lru`), so the Event correlator's
//! memory stays bounded however many objects it sees.

use std::collections::{BTreeMap, HashMap};

/// At most `capacity` entries; inserting into a full cache evicts the entry used longest ago.
/// Reading an entry with [`Lru::get_mut`] counts as a use.
#[derive(Debug)]
pub struct Lru<V> {
    capacity: usize,
    tick: u64,
    entries: HashMap<String, (u64, V)>,
    /// Last use → key, oldest first.
    order: BTreeMap<u64, String>,
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

    fn touch(&mut self, key: &str) -> u64 {
        self.tick += 1;
        if let Some((used, _)) = self.entries.get(key) {
            self.order.remove(used);
        }
        self.order.insert(self.tick, key.to_owned());
        self.tick
    }

    /// The entry of `key`, marked as just used.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        if !self.entries.contains_key(key) {
            return None;
        }
        let tick = self.touch(key);
        let entry = self.entries.get_mut(key)?;
        entry.0 = tick;
        Some(&mut entry.1)
    }

    /// Sets the entry of `key`, evicting the least recently used one when the cache is full.
    pub fn insert(&mut self, key: &str, value: V) {
        let tick = self.touch(key);
        self.entries.insert(key.to_owned(), (tick, value));
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
