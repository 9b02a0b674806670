//! client-go's `retry.RetryOnConflict` with `retry.DefaultRetry`: run a read-modify-write step
//! again while the API server answers 409 Conflict, a few times with a short jittered pause.

use std::future::Future;
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

/// Paces the attempts of a read-modify-write loop by a [`Backoff`]: the loop runs
/// `while retry.next().await { … }`, `continue`s after a conflict (having re-read what it writes
/// if it carries the object over) and returns on anything else; when the loop ends, every attempt
/// conflicted and [`ConflictRetry::attempts`] says how many ran. For loops that carry state from
/// one attempt to the next, where a closure per attempt would have to own it.
#[derive(Debug)]
pub struct ConflictRetry {
    backoff: Backoff,
    attempts: u32,
    pause: Duration,
}

impl ConflictRetry {
    /// A fresh sequence of attempts paced by `backoff`.
    pub fn new(backoff: Backoff) -> Self {
        ConflictRetry {
            backoff,
            attempts: 0,
            pause: backoff.duration,
        }
    }

    /// Whether another attempt may run: at once for the first, after the backoff's pause for
    /// the following ones, and not once `steps` attempts ran.
    pub async fn next(&mut self) -> bool {
        if self.attempts >= self.backoff.steps.max(1) {
            return false;
        }
        if self.attempts > 0 {
            tokio::time::sleep(jittered(self.pause, self.backoff.jitter)).await;
            self.pause = self.pause.mul_f64(self.backoff.factor.max(0.0));
        }
        self.attempts += 1;
        true
    }

    /// Attempts started so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

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

/// client-go's `retry.RetryOnConflict`: runs `attempt` (given the attempt number, from 0), which
/// re-reads what it changes and writes it, until it succeeds, fails with an error `is_conflict`
/// does not accept, or `backoff.steps` attempts conflicted. Each attempt's calls keep their own
/// deadlines; between attempts the task sleeps for the backoff's pause.
pub async fn retry_on_conflict<T, E, F, Fut>(
    backoff: Backoff,
    is_conflict: impl Fn(&E) -> bool,
    mut attempt: F,
) -> Result<T, RetryError<E>>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut retry = ConflictRetry::new(backoff);
    // The first attempt is always allowed.
    retry.next().await;
    loop {
        match attempt(retry.attempts() - 1).await {
            Ok(v) => return Ok(v),
            Err(e) if !is_conflict(&e) => return Err(RetryError::Failed(e)),
            Err(last) => {
                if !retry.next().await {
                    return Err(RetryError::Conflicts {
                        attempts: retry.attempts(),
                        last,
                    });
                }
            }
        }
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
        let r: Result<(), _> = retry_on_conflict(DEFAULT_RETRY, conflict, |n| {
            seen.push(n);
            async { Err(E::Conflict) }
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
    async fn paces_a_loop() {
        let start = tokio::time::Instant::now();
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        let mut runs = 0;
        while retry.next().await {
            runs += 1;
        }
        assert_eq!((runs, retry.attempts()), (5, 5));
        assert!(start.elapsed() >= Duration::from_millis(40));
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_success_or_another_error() {
        let r = retry_on_conflict(DEFAULT_RETRY, conflict, |n| async move {
            if n < 2 { Err(E::Conflict) } else { Ok(n) }
        })
        .await;
        assert!(matches!(r, Ok(2)));
        let mut calls = 0;
        let r: Result<(), _> = retry_on_conflict(DEFAULT_RETRY, conflict, |_| {
            calls += 1;
            async { Err(E::Other) }
        })
        .await;
        assert_eq!(calls, 1);
        assert_eq!(
            r.map_err(|e| e.or_conflicts(|_| E::Conflict)),
            Err(E::Other)
        );
    }
}
