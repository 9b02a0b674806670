//! Karmada's eviction rate limiting (`dynamic_rate_limiter.go`): a limiter whose delay is
//! `1 / --resource-eviction-rate` (30 minutes when the rate is 0), combined by "max of" with the
//! default controller rate limiter; the same limiter retries failed items and paces the workers.

use std::sync::Arc;
use std::time::Duration;

use lariat::RateLimiterOptions;
use lariat::queue::RateLimiter;
use lariat::queue::rate_limiter::MaxOfRateLimiter;

use super::EvictionKey;

/// The longest delay: used when the rate is 0 (Karmada's `maxEvictionDelay`).
pub const MAX_EVICTION_DELAY: Duration = Duration::from_secs(1800);

/// A delay of `1 / rate` seconds for every item, whatever its history.
#[derive(Debug, Clone, Copy)]
pub struct DynamicRateLimiter {
    rate: f32,
}

impl DynamicRateLimiter {
    /// A limiter for `rate` evictions per second.
    pub fn new(rate: f32) -> Self {
        Self { rate }
    }
}

impl<T> RateLimiter<T> for DynamicRateLimiter {
    fn when(&self, _: &T) -> Duration {
        if self.rate <= 0.0 || !self.rate.is_finite() {
            return MAX_EVICTION_DELAY;
        }
        Duration::try_from_secs_f32(1.0 / self.rate).unwrap_or(MAX_EVICTION_DELAY)
    }

    fn forget(&self, _: &T) {}

    fn num_requeues(&self, _: &T) -> u32 {
        0
    }
}

/// Karmada's `NewGracefulEvictionRateLimiter`: the max of the dynamic limiter and the default one.
pub fn graceful_eviction_limiter(
    rate: f32,
    defaults: &RateLimiterOptions,
) -> Arc<dyn RateLimiter<EvictionKey>> {
    Arc::new(MaxOfRateLimiter::new(vec![
        Box::new(DynamicRateLimiter::new(rate)),
        defaults.build(),
    ]))
}

/// A shared limiter handed to the queue while the workers keep using it as their pacer.
pub struct Shared(pub Arc<dyn RateLimiter<EvictionKey>>);

impl RateLimiter<EvictionKey> for Shared {
    fn when(&self, item: &EvictionKey) -> Duration {
        self.0.when(item)
    }

    fn forget(&self, item: &EvictionKey) {
        self.0.forget(item);
    }

    fn num_requeues(&self, item: &EvictionKey) -> u32 {
        self.0.num_requeues(item)
    }
}
