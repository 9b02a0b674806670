//! Waiting for the controllers under test: the one polling loop every test file uses.
//!
//! A test asserts an outcome the controllers reach asynchronously, so it polls: [`eventually`] runs a
//! check until it succeeds or a deadline passes, and the panic names what was awaited and the last
//! reason the check gave. [`eventually_showing`] adds context on timeout (the tail of a process's
//! log, say); `Kcm::eventually` is that with the controller-manager's log. Test files bind their own
//! timeout and poll interval in a one-line wrapper.

use std::time::Duration;

/// What a check returns: `bool`, `Option` (not yet: `None`) or `Result` (not yet: `Err(why)`).
pub trait Outcome {
    /// The value of a successful check.
    type Output;
    /// The value, or why not yet (when the check says).
    fn outcome(self) -> Result<Self::Output, Option<String>>;
}

impl Outcome for bool {
    type Output = ();
    fn outcome(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

impl<T> Outcome for Option<T> {
    type Output = T;
    fn outcome(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T> Outcome for Result<T, String> {
    type Output = T;
    fn outcome(self) -> Result<T, Option<String>> {
        self.map_err(Some)
    }
}

/// Runs `check` every `every` until it succeeds and returns its value.
///
/// # Panics
/// When it has not succeeded by `timeout` (with the last reason a `Result` check gave).
pub async fn eventually<R: Outcome>(
    what: &str,
    timeout: Duration,
    every: Duration,
    check: impl AsyncFnMut() -> R,
) -> R::Output {
    eventually_showing(what, timeout, every, String::new, check).await
}

/// [`eventually`], with `context()` (e.g. a process's log tail) appended to the panic on timeout.
///
/// # Panics
/// When it has not succeeded by `timeout`.
pub async fn eventually_showing<R: Outcome>(
    what: &str,
    timeout: Duration,
    every: Duration,
    context: impl FnOnce() -> String,
    mut check: impl AsyncFnMut() -> R,
) -> R::Output {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match check().await.outcome() {
            Ok(v) => return v,
            Err(last) => last,
        };
        if tokio::time::Instant::now() >= deadline {
            let last = last.map(|why| format!(": {why}")).unwrap_or_default();
            let context = context();
            let context = if context.is_empty() {
                context
            } else {
                format!("\n{context}")
            };
            panic!("timed out after {timeout:?} waiting for {what}{last}{context}");
        }
        tokio::time::sleep(every).await;
    }
}
