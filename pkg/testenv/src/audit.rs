//! The host API server's audit log: a policy recording every write (create, update, patch, delete,
//! deletecollection) at `Metadata` level, once per request when its response is complete, and a reader
//! for the JSON-lines log, so tests can see who wrote what and when.

use std::path::{Path, PathBuf};

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Deserializer};

use crate::Error;

/// The audit policy: writes at `Metadata` level, nothing else; one event per request.
pub const WRITE_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
";

/// The audit policy: every request at `Metadata` level, reads included; one event per request.
pub const ALL_REQUESTS_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// The kube-apiserver flags that write the audit log to `dir/audit.log` (`policy` in
/// `dir/audit-policy.yaml`, written here). Returns (flags, log path).
pub(crate) fn flags(dir: &Path, policy_text: &str) -> Result<(Vec<String>, PathBuf), Error> {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, policy_text).map_err(|e| Error::io(&policy, e))?;
    let log = dir.join("audit.log");
    Ok((
        vec![
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", log.display()),
            "--audit-log-format=json".to_string(),
            // Written before the response is sent, so a test sees every write it waited for.
            "--audit-log-mode=blocking".to_string(),
            "--audit-log-maxsize=0".to_string(),
        ],
        log,
    ))
}

/// Who made a request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AuditUser {
    /// `user.username` (a client certificate's CN).
    #[serde(default)]
    pub username: String,
}

/// What a request touched.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditObjectRef {
    /// Plural resource, e.g. `deployments`.
    #[serde(default)]
    pub resource: String,
    /// Namespace, if namespaced.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name (absent on a create of a generated name).
    #[serde(default)]
    pub name: Option<String>,
    /// API group (empty for the core group).
    #[serde(default)]
    pub api_group: Option<String>,
    /// Subresource, e.g. `status`.
    #[serde(default)]
    pub subresource: Option<String>,
}

/// The response's status code.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AuditResponseStatus {
    /// HTTP status code.
    #[serde(default)]
    pub code: u16,
}

/// One audit event (the fields tests use).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// `create`, `update`, `patch`, `delete`, ….
    pub verb: String,
    /// Who.
    #[serde(default)]
    pub user: AuditUser,
    /// The client's User-Agent.
    #[serde(default)]
    pub user_agent: String,
    /// What.
    #[serde(default)]
    pub object_ref: AuditObjectRef,
    /// The answer.
    #[serde(default)]
    pub response_status: AuditResponseStatus,
    /// When the server received the request.
    #[serde(deserialize_with = "timestamp")]
    pub request_received_timestamp: Timestamp,
    /// When the server finished it.
    #[serde(deserialize_with = "timestamp")]
    pub stage_timestamp: Timestamp,
}

impl AuditEvent {
    /// Whether the server carried the write out (2xx).
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.response_status.code)
    }
}

fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

/// Reads every complete line of the JSON-lines audit log at `path` (a line still being written is
/// left for the next read).
pub fn read_events(path: &Path) -> Result<Vec<AuditEvent>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).map_err(|e| {
                Error::Process(format!("{}: bad audit line {l:?}: {e}", path.display()))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_kube_apiserver_event() {
        let dir = std::env::temp_dir().join(format!("testenv-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        let line = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/d/deployments/x","verb":"patch","user":{"username":"kcm-a","groups":["system:masters","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"karmada-controller-manager/detector","objectRef":{"resource":"deployments","namespace":"d","name":"x","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-02T03:04:05.123456Z","stageTimestamp":"2026-01-02T03:04:05.223456Z"}"#;
        std::fs::write(&path, format!("{line}\n{}", &line[..40])).unwrap();
        let events = read_events(&path).unwrap();
        assert_eq!(events.len(), 1, "the partial last line is left out");
        let e = &events[0];
        assert_eq!(e.verb, "patch");
        assert_eq!(e.user.username, "kcm-a");
        assert_eq!(e.object_ref.name.as_deref(), Some("x"));
        assert!(e.succeeded());
        assert!(e.stage_timestamp > e.request_received_timestamp);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
