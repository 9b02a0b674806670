//! Per-item rate limiters for the work queue, modelled on client-go's `workqueue` limiters:
//! per-key exponential failure backoff, an overall token bucket, and "max of" several limiters.

use std::hash::Hash;
use std::time::Duration;

use ahash::AHashMap;
use parking_lot::Mutex;

use super::token_bucket::TokenBucket;

/// Decides how long an item waits before it is retried.
pub trait RateLimiter<T>: Send + Sync {
    /// Records one more retry of `item` and returns how long it must wait.
    fn when(&self, item: &T) -> Duration;
    /// Clears the retry history of `item` (called after a successful run).
    fn forget(&self, item: &T);
    /// How many retries of `item` have been recorded since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

/// Per-item exponential backoff: `base * 2^failures`, capped at `max`.
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<AHashMap<T, u32>>,
}

impl<T: Hash + Eq + Clone> ItemExponentialFailureRateLimiter<T> {
    /// Creates a limiter with the given base and maximum delay.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(AHashMap::new()),
        }
    }

    /// Number of items with a recorded failure (for tests and leak checks).
    pub fn tracked(&self) -> usize {
        self.failures.lock().len()
    }
}

/// `base * 2^exp`, saturating at `max`.
pub(crate) fn exponential(base: Duration, max: Duration, exp: u32) -> Duration {
    let factor = 2f64.powi(exp.min(1024) as i32);
    let secs = base.as_secs_f64() * factor;
    if !secs.is_finite() || secs >= max.as_secs_f64() {
        max
    } else {
        Duration::from_secs_f64(secs)
    }
}

impl<T: Hash + Eq + Clone + Send> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let mut failures = self.failures.lock();
        let exp = match failures.get_mut(item) {
            Some(n) => {
                let e = *n;
                *n = n.saturating_add(1);
                e
            }
            None => {
                failures.insert(item.clone(), 1);
                0
            }
        };
        exponential(self.base, self.max, exp)
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

/// An overall token bucket: every rate-limited add takes a token (client-go's `BucketRateLimiter`).
/// It has no per-item state.
#[derive(Debug)]
pub struct BucketRateLimiter {
    bucket: TokenBucket,
}

impl BucketRateLimiter {
    /// Creates a bucket refilled at `qps` per second holding `burst` tokens.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            bucket: TokenBucket::new(qps, burst),
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.bucket.reserve()
    }
    fn forget(&self, _item: &T) {}
    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// The longest delay of several limiters (client-go's `MaxOfRateLimiter`).
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines the given limiters.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or(Duration::ZERO)
    }
    fn forget(&self, item: &T) {
        for l in &self.limiters {
            l.forget(item);
        }
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Options of the default controller rate limiter (what `--rate-limiter-*` style flags set).
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimiterOptions {
    /// First retry delay of a failing key (default 5 ms).
    pub base_delay: Duration,
    /// Largest retry delay of a failing key (default 1000 s).
    pub max_delay: Duration,
    /// Overall token bucket as `(qps, burst)`; `None` disables it (default `Some((10.0, 100))`).
    pub bucket: Option<(f64, u32)>,
}

impl Default for RateLimiterOptions {
    fn default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            bucket: Some((10.0, 100)),
        }
    }
}

impl RateLimiterOptions {
    /// Builds the limiter: per-key exponential backoff, combined by "max of" with the overall bucket
    /// when one is configured.
    pub fn build<T: Hash + Eq + Clone + Send + Sync + 'static>(&self) -> Box<dyn RateLimiter<T>> {
        let exp = ItemExponentialFailureRateLimiter::new(self.base_delay, self.max_delay);
        match self.bucket {
            Some((qps, burst)) => Box::new(MaxOfRateLimiter::new(vec![
                Box::new(exp),
                Box::new(BucketRateLimiter::new(qps, burst)),
            ])),
            None => Box::new(exp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_doubles_and_caps() {
        let l = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        );
        let k = "a".to_string();
        assert_eq!(l.when(&k), Duration::from_millis(5));
        assert_eq!(l.when(&k), Duration::from_millis(10));
        assert_eq!(l.when(&k), Duration::from_millis(20));
        assert_eq!(l.num_requeues(&k), 3);
        for _ in 0..100 {
            l.when(&k);
        }
        assert_eq!(l.when(&k), Duration::from_secs(1000));
        l.forget(&k);
        assert_eq!(l.num_requeues(&k), 0);
        assert_eq!(l.when(&k), Duration::from_millis(5));
        assert_eq!(l.tracked(), 1);
        l.forget(&k);
        assert_eq!(l.tracked(), 0);
    }

    #[test]
    fn exponential_survives_huge_exponents() {
        assert_eq!(
            exponential(
                Duration::from_millis(5),
                Duration::from_secs(1000),
                u32::MAX
            ),
            Duration::from_secs(1000)
        );
    }

    #[test]
    fn max_of_takes_bucket_delay_when_larger() {
        let opts = RateLimiterOptions {
            bucket: Some((1.0, 1)),
            ..Default::default()
        };
        let l = opts.build::<String>();
        // first: exp 5ms, bucket 0 → 5ms
        assert_eq!(l.when(&"a".to_string()), Duration::from_millis(5));
        // second (other key): exp 5ms, bucket ≈1s → ≈1s
        let d = l.when(&"b".to_string());
        assert!(d > Duration::from_millis(900), "{d:?}");
        assert_eq!(l.num_requeues(&"a".to_string()), 1);
        l.forget(&"a".to_string());
        assert_eq!(l.num_requeues(&"a".to_string()), 0);
    }
}
