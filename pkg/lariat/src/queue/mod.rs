//! Work queue and rate limiters.

pub mod rate_limiter;
pub mod token_bucket;
pub mod workqueue;

pub use rate_limiter::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, RateLimiter,
    RateLimiterOptions,
};
pub use token_bucket::TokenBucket;
pub use workqueue::{Priority, QueueItem, Ranker, WorkQueue};

#[cfg(test)]
mod tests;
