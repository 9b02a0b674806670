//! client-go's `retry.RetryOnConflict` with `retry.DefaultRetry`: run a read-modify-write step
//! again while the API server answers 409 Conflict, a few times with a short jittered pause.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// How often and how long apart a step is retried (client-go's `wait.Backoff`, without a cap).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// Attempts in all, the first included.
    pub steps: u32,
    /// The pause before the second attempt.
    pub duration: Duration,
    /// What each pause is multiplied by for the next one.
    pub factor: f64,
    /// Each pause is lengthened by up to this fraction of itself, at random.
    pub jitter: f64,
}

/// client-go's `retry.DefaultRetry`: five attempts, 10ms apart, with 10% jitter.
pub const DEFAULT_RETRY: Backoff = Backoff {
    steps: 5,
    duration: Duration::from_millis(10),
    factor: 1.0,
    jitter: 0.1,
};

/// Why [`retry_on_conflict`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum RetryError<E> {
    /// Every attempt conflicted; `last` is the last attempt's error.
    #[error("still conflicting after {attempts} attempts")]
    Conflicts {
        /// Attempts made.
        attempts: u32,
        /// The last conflict.
        last: E,
    },
    /// An attempt failed with an error that is not a conflict.
    #[error(transparent)]
    Failed(E),
}

impl<E> RetryError<E> {
    /// The failing attempt's error, or `conflicts(attempts)` when every attempt conflicted: the
    /// caller's own error that names the object.
    pub fn or_conflicts(self, conflicts: impl FnOnce(u32) -> E) -> E {
        match self {
            RetryError::Conflicts { attempts, .. } => conflicts(attempts),
            RetryError::Failed(e) => e,
        }
    }
}

/// Runs `attempt` (given the attempt number, from 0) until it succeeds, fails with an error that
/// `is_conflict` does not accept, or `backoff.steps` attempts conflicted. Each attempt re-reads
/// what it changes and keeps the deadlines of the calls it makes; between attempts the task
/// sleeps for the backoff's pause.
pub async fn retry_on_conflict<T, E>(
    backoff: Backoff,
    is_conflict: impl Fn(&E) -> bool,
    mut attempt: impl AsyncFnMut(u32) -> Result<T, E>,
) -> Result<T, RetryError<E>> {
    let steps = backoff.steps.max(1);
    let mut pause = backoff.duration;
    let mut n = 0;
    loop {
        match attempt(n).await {
            Ok(v) => return Ok(v),
            Err(e) if !is_conflict(&e) => return Err(RetryError::Failed(e)),
            Err(e) if n + 1 >= steps => {
                return Err(RetryError::Conflicts {
                    attempts: n + 1,
                    last: e,
                });
            }
            Err(_) => {}
        }
        n += 1;
        tokio::time::sleep(jittered(pause, backoff.jitter)).await;
        pause = pause.mul_f64(backoff.factor.max(0.0));
    }
}

/// `pause` lengthened by a random fraction of up to `jitter` of itself (client-go's
/// `wait.Jitter`).
fn jittered(pause: Duration, jitter: f64) -> Duration {
    if jitter <= 0.0 {
        return pause;
    }
    // A fresh std hasher key is random; enough for spreading retries.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let fraction = (random >> 11) as f64 / (1_u64 << 53) as f64;
    pause + pause.mul_f64(jitter * fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum E {
        Conflict,
        Other,
    }

    fn conflict(e: &E) -> bool {
        *e == E::Conflict
    }

    #[tokio::test(start_paused = true)]
    async fn retries_conflicts_five_times_with_pauses() {
        let start = tokio::time::Instant::now();
        let mut seen = Vec::new();
        let r: Result<(), _> = retry_on_conflict(DEFAULT_RETRY, conflict, async |n| {
            seen.push(n);
            Err(E::Conflict)
        })
        .await;
        assert_eq!(seen, [0, 1, 2, 3, 4]);
        assert!(matches!(
            r,
            Err(RetryError::Conflicts {
                attempts: 5,
                last: E::Conflict
            })
        ));
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(40) && waited <= Duration::from_millis(44));
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_success_or_another_error() {
        let r = retry_on_conflict(DEFAULT_RETRY, conflict, async |n| {
            if n < 2 { Err(E::Conflict) } else { Ok(n) }
        })
        .await;
        assert!(matches!(r, Ok(2)));
        let mut calls = 0;
        let r: Result<(), _> = retry_on_conflict(DEFAULT_RETRY, conflict, async |_| {
            calls += 1;
            Err(E::Other)
        })
        .await;
        assert_eq!(calls, 1);
        assert_eq!(
            r.map_err(|e| e.or_conflicts(|_| E::Conflict)),
            Err(E::Other)
        );
    }
}
