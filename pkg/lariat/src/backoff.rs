//! Jittered exponential backoff for watch and discovery retries (client-go's reflector and kube-rs'
//! `DefaultBackoff`: 800 ms doubling up to 30 s).

use std::time::Duration;

use crate::queue::rate_limiter::exponential;

/// Exponential backoff with up to +50 % random jitter.
#[derive(Clone, Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    attempt: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_millis(800), Duration::from_secs(30))
    }
}

impl Backoff {
    /// Backoff from `min` doubling up to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max,
            attempt: 0,
        }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let base = exponential(self.min, self.max, self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        base.mul_f64(1.0 + fastrand::f64() * 0.5)
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_jitter_and_resets() {
        let mut b = Backoff::default();
        let d0 = b.next_delay();
        assert!(
            d0 >= Duration::from_millis(800) && d0 <= Duration::from_millis(1200),
            "{d0:?}"
        );
        let d1 = b.next_delay();
        assert!(
            d1 >= Duration::from_millis(1600) && d1 <= Duration::from_millis(2400),
            "{d1:?}"
        );
        for _ in 0..20 {
            assert!(b.next_delay() <= Duration::from_secs(45));
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(1200));
    }
}
