//! A pool of shared values for controller memos that name the same few values many times (the
//! clusters of every binding, the binding of each of its Works): each distinct value is allocated
//! once and handed out as an `Arc`, and leaves the pool when the last clone handed out is
//! released through it.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

/// The pool. It holds one `Arc` per value; every other clone lives with the caller, who gives it
/// back through [`release`](Self::release) rather than dropping it, so a value whose count is down
/// to the pool's and the one being released is held by nobody else.
pub struct SharedValues<T: ?Sized> {
    values: HashSet<Arc<T>>,
}

impl<T: ?Sized> Default for SharedValues<T> {
    fn default() -> Self {
        SharedValues {
            values: HashSet::new(),
        }
    }
}

impl<T> SharedValues<T>
where
    T: ?Sized + Hash + Eq + ToOwned,
    Arc<T>: From<T::Owned>,
{
    /// The pool's `Arc` for `value`, added when it has none.
    pub fn share(&mut self, value: &T) -> Arc<T> {
        if let Some(v) = self.values.get(value) {
            return v.clone();
        }
        let v: Arc<T> = Arc::from(value.to_owned());
        self.values.insert(v.clone());
        v
    }

    /// Gives back a clone [`share`](Self::share) handed out; the value leaves the pool when no
    /// other clone is left.
    pub fn release(&mut self, value: Arc<T>) {
        if Arc::strong_count(&value) == 2 {
            self.values.remove(&*value);
        }
    }

    /// The pool's `Arc` for `value`, if some clone of it is out.
    pub fn get(&self, value: &T) -> Option<&Arc<T>> {
        self.values.get(value)
    }

    /// How many distinct values are out.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no value is out.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::SharedValues;

    #[test]
    fn a_value_is_allocated_once_and_leaves_with_its_last_clone() {
        let mut pool: SharedValues<str> = SharedValues::default();
        let a = pool.share("member1");
        let b = pool.share("member1");
        let c = pool.share("member2");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(pool.len(), 2);
        pool.release(a);
        assert!(pool.get("member1").is_some(), "b still holds it");
        pool.release(b);
        assert!(pool.get("member1").is_none());
        pool.release(c);
        assert!(pool.is_empty());
    }
}
