//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's `leaderelection` semantics.
//!
//! - **Acquire**: every `retry_period` (jittered by up to 1.2×, as client-go), read the Lease; take it when
//!   it does not exist, has no holder (released), or has not changed for its `leaseDurationSeconds` *as
//!   seen on this machine's clock* (the time we last saw the record change, not its `renewTime`, so skew
//!   between machines does not matter). Writes use the read `resourceVersion`, so two candidates
//!   cannot both win.
//! - **Renew**: the leader rewrites `renewTime` every `retry_period`. When no renewal has succeeded
//!   within `renew_deadline` of the last successful one being *sent*, leadership is lost:
//!   [`Leadership::lost`] is cancelled and the caller must stop its controllers (the controller-manager
//!   then exits non-zero, as controller-runtime does). client-go counts the deadline from the start of
//!   the failing round instead (up to one `retry_period` later); counting from the last success is what
//!   lets the [`WriteFence`] below be exact, and a process resumed after a long SIGSTOP gives up at once
//!   instead of trying for another `renew_deadline`.
//! - **Fence**: every success moves the elector's [`WriteFence`] to `sent + renew_deadline`, and losing
//!   or releasing the lease closes it (see [`crate::client::fence`]): no write leaves the process once a
//!   standby may have taken over.
//! - **Release**: [`Leadership::release`] (after the controllers stopped) clears `holderIdentity` and sets
//!   `leaseDurationSeconds` to 1, so a standby takes over on its next try instead of waiting out the lease.
//!   If the Lease moved on meanwhile (a renewal the stop cut short still reached the server), it is
//!   read again and released only while it is still ours.
//!
//! The namespace is never created: like client-go / controller-runtime, a missing namespace is logged on
//! every try and the elector keeps trying (an installer creates it).
//!
//! Metric: `leader_election_master_status{name}` (1 while leading, else 0), as client-go's.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use prometheus::{IntGaugeVec, Opts};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::duration::GoDuration;
use crate::client::fence::WriteFence;
use crate::metrics::registry;

/// client-go's `JitterFactor` for the acquire loop; `renew_deadline` must exceed `retry_period` × this.
pub const JITTER_FACTOR: f64 = 1.2;

/// What to elect on and how fast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Lease name (also the `name` label of `leader_election_master_status`).
    pub lease_name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This candidate's identity, written to `holderIdentity`; see [`default_identity`].
    pub identity: String,
    /// How long a standby waits after the last observed change before taking the lease.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a renewal before it gives up leadership.
    pub renew_deadline: Duration,
    /// Time between tries (acquire and renew).
    pub retry_period: Duration,
}

/// A problem with the three timings, as client-go's `NewLeaderElector` checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimingProblem {
    /// lease duration ≤ 0
    #[error("must be greater than 0")]
    LeaseDurationNotPositive,
    /// renew deadline ≤ 0
    #[error("must be greater than 0")]
    RenewDeadlineNotPositive,
    /// retry period ≤ 0
    #[error("must be greater than 0")]
    RetryPeriodNotPositive,
    /// lease duration ≤ renew deadline
    #[error("the lease duration must be greater than the renew deadline")]
    LeaseNotAboveRenewDeadline,
    /// renew deadline ≤ 1.2 × retry period
    #[error("the renew deadline must be greater than the retry period × 1.2")]
    RenewDeadlineNotAboveRetry,
}

/// Every problem with the timings (empty when valid). Relations are only checked between positive values.
pub fn timing_problems(
    lease_duration: GoDuration,
    renew_deadline: GoDuration,
    retry_period: GoDuration,
) -> Vec<TimingProblem> {
    let mut problems = Vec::new();
    if !lease_duration.is_positive() {
        problems.push(TimingProblem::LeaseDurationNotPositive);
    }
    if !renew_deadline.is_positive() {
        problems.push(TimingProblem::RenewDeadlineNotPositive);
    }
    if !retry_period.is_positive() {
        problems.push(TimingProblem::RetryPeriodNotPositive);
    }
    if problems.is_empty() {
        let (l, r, p) = (
            lease_duration.to_std(),
            renew_deadline.to_std(),
            retry_period.to_std(),
        );
        if l <= r {
            problems.push(TimingProblem::LeaseNotAboveRenewDeadline);
        }
        if r.as_secs_f64() <= p.as_secs_f64() * JITTER_FACTOR {
            problems.push(TimingProblem::RenewDeadlineNotAboveRetry);
        }
    }
    problems
}

/// `<hostname>_<uuid>`, the identity controller-runtime gives a candidate.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// The `leader_election_master_status{name}` gauge (registered on first use); `None` if it could not
/// be defined (logged once).
pub fn master_status() -> Option<&'static IntGaugeVec> {
    static GAUGE: OnceLock<Option<IntGaugeVec>> = OnceLock::new();
    GAUGE
        .get_or_init(|| {
            let opts = Opts::new(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, \
                 1 indicates master. 'name' is the string used to identify the lease. Please make sure \
                 to group by name.",
            );
            let gauge = match IntGaugeVec::new(opts, &["name"]) {
                Ok(g) => g,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot define leader_election_master_status");
                    return None;
                }
            };
            if let Err(e) = registry().register(Box::new(gauge.clone())) {
                tracing::warn!(error = %e, "cannot register leader_election_master_status");
            }
            Some(gauge)
        })
        .as_ref()
}

/// Sets `leader_election_master_status{name=lease}` (1 while leading, else 0).
fn set_master_status(lease: &str, value: i64) {
    if let Some(g) = master_status() {
        g.with_label_values(&[lease]).set(value);
    }
}

/// Why one try failed.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    /// The API call failed.
    #[error("{action} lease {namespace}/{name}: {source}")]
    Api {
        /// What we tried.
        action: &'static str,
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// The namespace does not exist.
    #[error(
        "cannot create lease {namespace}/{name}: namespace {namespace:?} not found (create it, or elect in an existing namespace)"
    )]
    NamespaceNotFound {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
    },
    /// The API call took longer than allowed.
    #[error("{action} lease {namespace}/{name}: timed out after {timeout:?}")]
    Timeout {
        /// What we tried.
        action: &'static str,
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The limit.
        timeout: Duration,
    },
    /// The renew task panicked or was aborted.
    #[error("the lease renewal task ended abnormally: {0}")]
    Task(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: String,
    lease_duration_seconds: i32,
    acquire_time: Option<MicroTime>,
    renew_time: Option<MicroTime>,
    transitions: i32,
}

impl Record {
    fn of(lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time,
            renew_time: spec.renew_time,
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }
}

/// Tries to become leader; see the module docs.
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    /// The last record seen and when (on our clock) it was first seen.
    observed: Option<(Record, Instant)>,
    /// The last Lease read or written (its resourceVersion guards our writes).
    lease: Option<Lease>,
    /// Holder reported in the log, to log changes once.
    logged_holder: Option<String>,
    /// When (monotonic clock) the last successful acquire or renew was sent.
    confirmed: Option<std::time::Instant>,
    /// Moved forward on every success, closed when leadership ends.
    fence: WriteFence,
}

impl LeaderElector {
    /// An elector for `config` talking through `client`. Makes no API call.
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            lease: None,
            logged_holder: None,
            confirmed: None,
            fence: WriteFence::new(),
        }
    }

    /// Makes this elector hold `fence` open while it leads (by default it has a private one).
    pub fn with_fence(mut self, fence: WriteFence) -> Self {
        self.fence = fence;
        self
    }

    /// Records a success whose request was sent at `sent`: the fence admits writes until
    /// `sent + renew_deadline`.
    fn confirm(&mut self, sent: std::time::Instant) {
        self.confirmed = Some(sent);
        self.fence.hold_until(sent + self.config.renew_deadline);
    }

    /// Until when leadership is certain: `renew_deadline` after the last success was sent.
    fn certain_until(&self) -> Option<Instant> {
        self.confirmed
            .map(|sent| Instant::from_std(sent + self.config.renew_deadline))
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    fn request_timeout(&self) -> Duration {
        (self.config.renew_deadline / 2).max(Duration::from_secs(1))
    }

    fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|(r, _)| r.holder == self.config.identity)
    }

    fn lease_seconds(&self) -> i32 {
        (self.config.lease_duration.as_secs_f64().ceil() as i32).max(1)
    }

    fn observe(&mut self, lease: Lease) {
        let record = Record::of(&lease);
        let changed = self.observed.as_ref().is_none_or(|(r, _)| *r != record);
        if changed {
            self.observed = Some((record, Instant::now()));
        }
        self.lease = Some(lease);
    }

    async fn call<T>(
        &self,
        action: &'static str,
        fut: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, ElectionError> {
        let timeout = self.request_timeout();
        match tokio::time::timeout(timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(source)) => Err(ElectionError::Api {
                action,
                namespace: self.config.namespace.clone(),
                name: self.config.lease_name.clone(),
                source,
            }),
            Err(_) => Err(ElectionError::Timeout {
                action,
                namespace: self.config.namespace.clone(),
                name: self.config.lease_name.clone(),
                timeout,
            }),
        }
    }

    fn spec_for_us(&self, previous: &Record, now: Timestamp) -> LeaseSpec {
        let ours = previous.holder == self.config.identity;
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.lease_seconds()),
            acquire_time: if ours {
                previous.acquire_time.clone()
            } else {
                Some(MicroTime(now))
            },
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(if ours {
                previous.transitions
            } else {
                previous.transitions + 1
            }),
            ..LeaseSpec::default()
        }
    }

    /// Writes our record over `lease` (whose record is `previous`), guarded by its resourceVersion;
    /// on success we hold the lease as written. `sent` is when this try started.
    async fn write_ours(
        &mut self,
        lease: &Lease,
        previous: &Record,
        now: Timestamp,
        sent: std::time::Instant,
    ) -> Result<(), ElectionError> {
        let mut updated = lease.clone();
        updated.spec = Some(self.spec_for_us(previous, now));
        let api = self.api.clone();
        let name = self.config.lease_name.clone();
        let written = self
            .call(
                "updating",
                api.replace(&name, &PostParams::default(), &updated),
            )
            .await?;
        self.observe(written);
        self.confirm(sent);
        Ok(())
    }

    /// One try, as client-go's `tryAcquireOrRenew`: `Ok(true)` when we hold the lease afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, ElectionError> {
        // Before anything is sent: the server writes our record no earlier than this.
        let sent = std::time::Instant::now();
        let now = Timestamp::now();
        let name = self.config.lease_name.clone();
        // Fast path: the leader writes over the Lease it last wrote, without reading first.
        if self.is_leader()
            && let Some(lease) = self.lease.clone()
        {
            match self
                .write_ours(&lease, &Record::of(&lease), now, sent)
                .await
            {
                Ok(()) => return Ok(true),
                Err(e) => tracing::debug!(error = %e, "fast-path lease renewal failed; re-reading"),
            }
        }

        let api = self.api.clone();
        let current = self.call("getting", api.get_opt(&name)).await?;
        let Some(current) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(self.lease_seconds()),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            let api = self.api.clone();
            return match self
                .call("creating", api.create(&PostParams::default(), &lease))
                .await
            {
                Ok(created) => {
                    self.observe(created);
                    self.confirm(sent);
                    Ok(true)
                }
                Err(ElectionError::Api {
                    source: kube::Error::Api(status),
                    ..
                }) if status.is_already_exists() => Ok(false),
                Err(ElectionError::Api {
                    source: kube::Error::Api(status),
                    ..
                }) if status.is_not_found() => Err(ElectionError::NamespaceNotFound {
                    namespace: self.config.namespace.clone(),
                    name,
                }),
                Err(e) => Err(e),
            };
        };

        self.observe(current.clone());
        let record = Record::of(&current);
        if !record.holder.is_empty() && record.holder != self.config.identity {
            let seconds = if record.lease_duration_seconds > 0 {
                Duration::from_secs(record.lease_duration_seconds as u64)
            } else {
                self.config.lease_duration
            };
            let seen_at = self
                .observed
                .as_ref()
                .map_or_else(Instant::now, |(_, t)| *t);
            if seen_at + seconds > Instant::now() {
                if self.logged_holder.as_deref() != Some(record.holder.as_str()) {
                    tracing::info!(
                        lease = %format!("{}/{}", self.config.namespace, name),
                        holder = %record.holder,
                        "lease is held by another candidate; waiting"
                    );
                    self.logged_holder = Some(record.holder.clone());
                }
                return Ok(false);
            }
        }

        match self.write_ours(&current, &record, now, sent).await {
            Ok(()) => Ok(true),
            Err(ElectionError::Api {
                source: kube::Error::Api(status),
                ..
            }) if status.is_conflict() => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn jittered_retry(&self) -> Duration {
        let r = (uuid::Uuid::new_v4().as_u128() >> 64) as f64 / u64::MAX as f64;
        self.config.retry_period.mul_f64(1.0 + r * JITTER_FACTOR)
    }

    /// Tries every `retry_period` (jittered) until this candidate holds the lease, then starts renewing it
    /// in a task owned by the returned [`Leadership`]. `None` when `cancel` fires first.
    pub async fn acquire(mut self, cancel: &CancellationToken) -> Option<Leadership> {
        let label = self.config.lease_name.clone();
        set_master_status(&label, 0);
        tracing::info!(
            lease = %format!("{}/{}", self.config.namespace, self.config.lease_name),
            identity = %self.config.identity,
            "attempting to acquire leader lease"
        );
        loop {
            let attempt = tokio::select! {
                _ = cancel.cancelled() => return None,
                r = self.try_acquire_or_renew() => r,
            };
            match attempt {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => tracing::error!(error = %e, "leader election: cannot acquire the lease"),
            }
            let wait = self.jittered_retry();
            tokio::select! {
                _ = cancel.cancelled() => return None,
                _ = tokio::time::sleep(wait) => {}
            }
        }
        tracing::info!(
            lease = %format!("{}/{}", self.config.namespace, self.config.lease_name),
            identity = %self.config.identity,
            "successfully acquired lease; this replica is now the leader"
        );
        set_master_status(&label, 1);
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let task = tokio::spawn(self.renew_loop(stop.clone(), lost.clone()));
        Some(Leadership {
            lost,
            stop,
            task: Some(task),
        })
    }

    async fn renew_loop(mut self, stop: CancellationToken, lost: CancellationToken) -> Self {
        let retry = self.config.retry_period;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return self,
                _ = tokio::time::sleep(retry) => {}
            }
            let mut deadline = Instant::now() + self.config.renew_deadline;
            if let Some(certain) = self.certain_until() {
                deadline = deadline.min(certain);
            }
            let renewed = loop {
                // Past the deadline (e.g. resumed after SIGSTOP): give up without sending anything.
                if Instant::now() >= deadline {
                    break false;
                }
                let attempt = tokio::select! {
                    _ = stop.cancelled() => return self,
                    r = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => r,
                };
                match attempt {
                    Ok(Ok(true)) => break true,
                    Ok(Ok(false)) => {
                        tracing::warn!("leader election: the lease is held by someone else");
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e, "leader election: renewal failed"),
                    Err(_) => break false,
                }
                let now = Instant::now();
                if now >= deadline {
                    break false;
                }
                tokio::select! {
                    _ = stop.cancelled() => return self,
                    _ = tokio::time::sleep(retry.min(deadline - now)) => {}
                }
                if Instant::now() >= deadline {
                    break false;
                }
            };
            if !renewed {
                tracing::error!(
                    lease = %format!("{}/{}", self.config.namespace, self.config.lease_name),
                    renew_deadline = ?self.config.renew_deadline,
                    "failed to renew the lease before the renew deadline: leader election lost"
                );
                set_master_status(&self.config.lease_name, 0);
                // We no longer consider ourselves leader; release must not touch the lease.
                self.observed = None;
                self.fence.close();
                lost.cancel();
                return self;
            }
        }
    }

    /// Gives the lease up if we hold it: empty holder, duration 1 s, so a standby takes it at once.
    ///
    /// A renewal that the stop cut short may still have reached the server after we last saw the
    /// lease: its write moved the resourceVersion on and our release conflicts. Then the lease is
    /// read again and released if it is still ours (client-go reads before it releases; we skip
    /// the read when nothing raced, the common case).
    async fn release(&mut self) -> Result<(), ElectionError> {
        // Nothing of ours may be written once a standby can take over.
        self.fence.close();
        if !self.is_leader() {
            return Ok(());
        }
        let Some(mut lease) = self.lease.clone() else {
            return Ok(());
        };
        let name = self.config.lease_name.clone();
        let api = self.api.clone();
        let mut reread = false;
        let written = loop {
            let previous = Record::of(&lease);
            let now = Timestamp::now();
            let mut released = lease;
            released.spec = Some(LeaseSpec {
                holder_identity: Some(String::new()),
                lease_duration_seconds: Some(1),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(previous.transitions),
                ..LeaseSpec::default()
            });
            match self
                .call(
                    "releasing",
                    api.replace(&name, &PostParams::default(), &released),
                )
                .await
            {
                Ok(written) => break written,
                Err(ElectionError::Api {
                    source: kube::Error::Api(status),
                    ..
                }) if status.is_conflict() && !reread => {
                    reread = true;
                    let Some(current) = self.call("getting", api.get_opt(&name)).await? else {
                        return Ok(());
                    };
                    if Record::of(&current).holder != self.config.identity {
                        self.observe(current);
                        return Ok(());
                    }
                    lease = current;
                }
                Err(e) => return Err(e),
            }
        };
        self.observe(written);
        set_master_status(&name, 0);
        tracing::info!(
            lease = %format!("{}/{}", self.config.namespace, name),
            "released the leader lease"
        );
        Ok(())
    }
}

/// Held while this process leads. Owns the renewal task.
#[derive(Debug)]
pub struct Leadership {
    lost: CancellationToken,
    stop: CancellationToken,
    task: Option<JoinHandle<LeaderElector>>,
}

impl Leadership {
    /// Cancelled when renewal failed past the renew deadline: stop leader-only work at once.
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Stops renewing and, if still leader, releases the lease. Call after leader-only work stopped.
    pub async fn release(mut self) -> Result<(), ElectionError> {
        self.stop.cancel();
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        let mut elector = task.await.map_err(|e| ElectionError::Task(e.to_string()))?;
        elector.release().await
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> GoDuration {
        GoDuration::parse(s).unwrap()
    }

    #[test]
    fn client_go_timing_rules() {
        assert!(timing_problems(d("15s"), d("10s"), d("2s")).is_empty());
        assert_eq!(
            timing_problems(d("-1s"), d("10s"), d("2s")),
            vec![TimingProblem::LeaseDurationNotPositive]
        );
        assert_eq!(
            timing_problems(d("10s"), d("10s"), d("2s")),
            vec![TimingProblem::LeaseNotAboveRenewDeadline]
        );
        assert_eq!(
            timing_problems(d("15s"), d("2s"), d("2s")),
            vec![TimingProblem::RenewDeadlineNotAboveRetry]
        );
        assert_eq!(timing_problems(d("0"), d("0"), d("0")).len(), 3);
    }

    #[test]
    fn identity_is_host_and_uuid() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert_eq!(uuid.len(), 36);
    }
}
