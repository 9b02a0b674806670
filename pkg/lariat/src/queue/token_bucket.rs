//! A reservation-based token bucket (the model of Go's `rate.Limiter.Reserve`): each call takes one
//! token now and says how long the caller must wait for it. Used both by the queue's overall rate
//! limiter and by the client-side QPS/burst limit.

use std::time::Duration;

use tokio::time::Instant;

use parking_lot::Mutex;

/// A token bucket refilled at `qps` tokens per second and holding at most `burst` tokens.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    /// Tokens available at `last`; negative when future tokens are already reserved.
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// Creates a full bucket. A `qps` of zero or less, or a non-finite one, means "unlimited".
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            state: Mutex::new(BucketState {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// The refill rate in tokens per second.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// The bucket size.
    pub fn burst(&self) -> u32 {
        self.burst as u32
    }

    fn unlimited(&self) -> bool {
        !(self.qps.is_finite() && self.qps > 0.0)
    }

    /// Takes one token and returns how long the caller must wait before using it.
    pub fn reserve(&self) -> Duration {
        self.reserve_at(Instant::now())
    }

    /// [`reserve`](Self::reserve) at an explicit instant (for tests).
    pub fn reserve_at(&self, now: Instant) -> Duration {
        if self.unlimited() {
            return Duration::ZERO;
        }
        let mut st = self.state.lock();
        let elapsed = now.saturating_duration_since(st.last).as_secs_f64();
        st.tokens = (st.tokens + elapsed * self.qps).min(self.burst);
        if now > st.last {
            st.last = now;
        }
        st.tokens -= 1.0;
        if st.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-st.tokens / self.qps)
        }
    }

    /// Takes one token only if that leaves at least half the burst in the bucket — no token
    /// reserved ahead by other callers and no refill borrowed — and otherwise says how long until
    /// that may be so. Background work (Events) uses it to spend only budget the foreground leaves
    /// idle: while foreground callers keep the bucket drained it waits, and they never wait for it
    /// beyond the half burst it could have taken.
    pub fn try_spare(&self) -> Result<(), Duration> {
        self.try_spare_at(Instant::now())
    }

    /// [`try_spare`](Self::try_spare) at an explicit instant (for tests).
    pub fn try_spare_at(&self, now: Instant) -> Result<(), Duration> {
        if self.unlimited() {
            return Ok(());
        }
        let mut st = self.state.lock();
        let elapsed = now.saturating_duration_since(st.last).as_secs_f64();
        st.tokens = (st.tokens + elapsed * self.qps).min(self.burst);
        if now > st.last {
            st.last = now;
        }
        let needed = (self.burst / 2.0).floor() + 1.0;
        if st.tokens >= needed {
            st.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((needed - st.tokens) / self.qps))
        }
    }

    /// Waits until one token is available and takes it.
    pub async fn acquire(&self) {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let b = TokenBucket::new(10.0, 100);
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(b.reserve_at(now), Duration::ZERO);
        }
        // the 101st token is 100ms away, the 102nd 200ms
        let d1 = b.reserve_at(now);
        let d2 = b.reserve_at(now);
        assert!((d1.as_secs_f64() - 0.1).abs() < 1e-6, "{d1:?}");
        assert!((d2.as_secs_f64() - 0.2).abs() < 1e-6, "{d2:?}");
        // one second later, 10 tokens have refilled but 2 were borrowed
        let later = now + Duration::from_secs(1);
        for _ in 0..8 {
            assert_eq!(b.reserve_at(later), Duration::ZERO);
        }
        assert!(b.reserve_at(later) > Duration::ZERO);
    }

    #[test]
    fn spare_tokens_only_above_half_the_burst() {
        let b = TokenBucket::new(10.0, 4);
        let now = Instant::now();
        // 4 tokens: background may take 2 (leaving 2 = half the burst), not a third
        assert_eq!(b.try_spare_at(now), Ok(()));
        assert_eq!(b.try_spare_at(now), Ok(()));
        let wait = b.try_spare_at(now).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        // foreground reservations ahead push background further back
        for _ in 0..4 {
            b.reserve_at(now);
        }
        let wait = b.try_spare_at(now).unwrap_err();
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-6, "{wait:?}");
        assert_eq!(b.try_spare_at(now + Duration::from_millis(500)), Ok(()));
    }

    #[test]
    fn zero_qps_is_unlimited() {
        let b = TokenBucket::new(0.0, 1);
        for _ in 0..1000 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
    }
}
