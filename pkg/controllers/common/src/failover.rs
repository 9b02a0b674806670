//! Application state carried across a failover (Karmada's `StatefulFailoverInjection` gate): the
//! evicting controller reads the policy's `statePreservation` rules against the workload's status
//! in the cluster it leaves and records the values in the eviction task's `preservedLabelState`;
//! the binding controller then puts them as labels on the workload in the cluster it moves to.
//! Shared because the taint manager, the `applicationFailover` controller and the `binding`
//! controller all take part.

use std::collections::BTreeMap;

use jsonpath_rust::JsonPath;
use karmada_apis::policy::v1alpha1::{PurgeMode, StatePreservation};
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, ResourceBindingSpec};
use serde_json::Value;

/// The feature gate that turns state preservation on (alpha, off by default).
pub const FEATURE_STATEFUL_FAILOVER_INJECTION: &str = "StatefulFailoverInjection";

/// Why the preserved state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatePreservationError {
    /// The cluster has not reported the workload's status yet.
    #[error("the application status has not yet been collected from Cluster({0})")]
    NotCollected(String),
    /// A rule's `jsonPath` is not a template this implementation reads.
    #[error("jsonPath {path:?}: {reason}")]
    Parse {
        /// The rule's template.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A rule's `jsonPath` names nothing in the status.
    #[error("jsonPath {path:?}: {expression} is not found in the status")]
    NotFound {
        /// The rule's template.
        path: String,
        /// The expression that matched nothing.
        expression: String,
    },
}

/// Karmada's `extractStateForEviction` / the state part of `buildTaskOptions`: with rules, the
/// label state read from `cluster`'s reflected status (an error while that status is not
/// collected); without rules, `None`.
pub fn preserved_state_for(
    preservation: Option<&StatePreservation>,
    aggregated: &[AggregatedStatusItem],
    cluster: &str,
) -> Result<Option<BTreeMap<String, String>>, StatePreservationError> {
    let Some(preservation) = preservation.filter(|p| !p.rules.is_empty()) else {
        return Ok(None);
    };
    let status = aggregated
        .iter()
        .find(|s| s.cluster_name == cluster)
        .and_then(|s| s.status.as_ref())
        // The text was checked to be JSON when it was read; an undecodable one reads as absent.
        .and_then(|s| s.to_value().ok())
        .ok_or_else(|| StatePreservationError::NotCollected(cluster.to_owned()))?;
    build_preserved_label_state(preservation, &status).map(Some)
}

/// Karmada's `BuildPreservedLabelState`: each rule's `aliasLabelName` mapped to its `jsonPath`
/// evaluated against `status` (a missing field is an error, as Karmada's `AllowMissingKeys(false)`).
pub fn build_preserved_label_state(
    preservation: &StatePreservation,
    status: &Value,
) -> Result<BTreeMap<String, String>, StatePreservationError> {
    preservation
        .rules
        .iter()
        .map(|rule| {
            Ok((
                rule.alias_label_name.clone(),
                json_path(&rule.json_path, status)?,
            ))
        })
        .collect()
}

/// Evaluates a Kubernetes JSONPath template (`kubectl -o jsonpath` syntax: text with `{…}`
/// expressions) against `data`, printing values as Kubernetes does (strings bare, several results
/// separated by spaces). Expressions are field paths, indexes, wildcards, slices, filters and
/// recursive descent; `range`/`end` blocks are not supported.
pub fn json_path(template: &str, data: &Value) -> Result<String, StatePreservationError> {
    let parse_err = |reason: &str| StatePreservationError::Parse {
        path: template.to_owned(),
        reason: reason.to_owned(),
    };
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = closing_brace(after).ok_or_else(|| parse_err("unclosed action"))?;
        let expression = after[..close].trim();
        rest = &after[close + 1..];
        out.push_str(&evaluate(expression, data, template)?);
    }
    if rest.contains('}') {
        return Err(parse_err("unexpected '}'"));
    }
    out.push_str(rest);
    Ok(out)
}

/// The index of the `}` closing an action, skipping quoted strings.
fn closing_brace(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '}') => return Some(i),
            _ => {}
        }
    }
    None
}

fn evaluate(
    expression: &str,
    data: &Value,
    template: &str,
) -> Result<String, StatePreservationError> {
    let parse_err = |reason: String| StatePreservationError::Parse {
        path: template.to_owned(),
        reason,
    };
    if let Some(text) = expression
        .strip_prefix('"')
        .and_then(|e| e.strip_suffix('"'))
    {
        return Ok(text.to_owned());
    }
    let first_word = expression.split_whitespace().next().unwrap_or_default();
    if matches!(first_word, "range" | "end") {
        return Err(parse_err(format!("{first_word:?} is not supported")));
    }
    let query = match expression.chars().next() {
        Some('$') => expression.to_owned(),
        Some('.' | '[') => format!("${expression}"),
        _ => return Err(parse_err(format!("unrecognized expression {expression:?}"))),
    };
    let found = data.query(&query).map_err(|e| parse_err(e.to_string()))?;
    let definite = !expression.contains(['*', '?', ':']) && !expression.contains("..");
    if found.is_empty() && definite {
        return Err(StatePreservationError::NotFound {
            path: template.to_owned(),
            expression: expression.to_owned(),
        });
    }
    Ok(found
        .into_iter()
        .map(go_print)
        .collect::<Vec<_>>()
        .join(" "))
}

/// A JSON value as Go's `fmt.Print` shows it after `json.Unmarshal` into `interface{}` (what
/// Kubernetes' JSONPath prints): strings bare, numbers as float64 `%v`, maps as `map[k:v]`.
fn go_print(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), go_float),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_print).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_print(&map[k])))
                .collect();
            format!("map[{}]", fields.join(" "))
        }
    }
}

/// Go's `%v` of a float64 (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest representation,
/// in exponent form (`1e+06`) when the decimal exponent is below -4 or at least 6.
fn go_float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return if f.is_nan() {
            "NaN".to_owned()
        } else if f.is_infinite() {
            if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
        } else {
            "0".to_owned()
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        return f.to_string();
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// Karmada's `injectReservedLabelState` decision: the labels to put on the workload for `target`
/// when the binding has one target cluster (`targets` counts them) and its last eviction task
/// purges at once (`Directly`, or the deprecated `Immediately`) and did not run there before.
pub fn labels_to_inject<'a>(
    spec: &'a ResourceBindingSpec,
    target: &str,
    targets: usize,
) -> Option<&'a BTreeMap<String, String>> {
    if targets > 1 {
        return None;
    }
    let task = spec.graceful_eviction_tasks.last()?;
    let immediate = matches!(
        task.purge_mode.as_ref().map(PurgeMode::as_str),
        Some("Directly" | "Immediately")
    );
    if !immediate || task.clusters_before_failover.iter().any(|c| c == target) {
        return None;
    }
    Some(&task.preserved_label_state).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::policy::v1alpha1::StatePreservationRule;
    use karmada_apis::work::v1alpha2::GracefulEvictionTask;
    use serde_json::json;

    #[test]
    fn templates_read_the_status() {
        let status = json!({
            "replicas": 3, "ratio": 0.5, "big": 1_000_000, "ok": true, "name": "x",
            "conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}],
            "nested": {"b": 1, "a": "s"},
        });
        for (template, want) in [
            ("{.replicas}", "3"),
            ("{ .replicas }", "3"),
            ("{$.name}", "x"),
            ("{.ratio}", "0.5"),
            ("{.big}", "1e+06"),
            ("{.ok}", "true"),
            ("n={.replicas}/{.name}", "n=3/x"),
            ("{.conditions[0].type}", "A"),
            ("{.conditions[*].type}", "A B"),
            ("{.conditions[?(@.type==\"B\")].status}", "False"),
            ("{.nested}", "map[a:s b:1]"),
            ("{.conditions[5].type}", ""),
            ("{\"lit\"}", "lit"),
            ("plain", "plain"),
        ] {
            match json_path(template, &status) {
                Ok(got) => assert_eq!(got, want, "{template}"),
                Err(e) if want.is_empty() => {
                    assert!(matches!(e, StatePreservationError::NotFound { .. }), "{e}");
                }
                Err(e) => panic!("{template}: {e}"),
            }
        }
        for bad in [
            "{.missing}",
            "{.replicas",
            "{range .conditions[*]}{end}",
            "{replicas}",
        ] {
            assert!(json_path(bad, &status).is_err(), "{bad}");
        }
    }

    #[test]
    fn go_floats() {
        assert_eq!(go_float(21.0), "21");
        assert_eq!(go_float(123_456.0), "123456");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.000_01), "1e-05");
        assert_eq!(go_float(-2.5e7), "-2.5e+07");
    }

    fn preservation() -> StatePreservation {
        StatePreservation {
            rules: vec![StatePreservationRule {
                alias_label_name: "failover.karmada.io/replicas".into(),
                json_path: "{.replicas}".into(),
            }],
        }
    }

    #[test]
    fn state_needs_a_collected_status() {
        let mut items = vec![AggregatedStatusItem {
            cluster_name: "m1".into(),
            ..Default::default()
        }];
        assert_eq!(preserved_state_for(None, &items, "m1").unwrap(), None);
        let err = preserved_state_for(Some(&preservation()), &items, "m1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the application status has not yet been collected from Cluster(m1)"
        );
        items[0].status = Some(json!({"replicas": 2}).into());
        let state = preserved_state_for(Some(&preservation()), &items, "m1")
            .unwrap()
            .unwrap();
        assert_eq!(state["failover.karmada.io/replicas"], "2");
    }

    #[test]
    fn injection_only_for_one_new_cluster_after_an_immediate_purge() {
        let mut spec = ResourceBindingSpec::default();
        assert!(labels_to_inject(&spec, "m2", 1).is_none());
        let state: BTreeMap<String, String> = [("k".to_owned(), "v".to_owned())].into();
        spec.graceful_eviction_tasks.push(GracefulEvictionTask {
            from_cluster: "m1".into(),
            purge_mode: Some(PurgeMode::Directly),
            preserved_label_state: state.clone(),
            clusters_before_failover: vec!["m1".into()],
            ..Default::default()
        });
        assert_eq!(labels_to_inject(&spec, "m2", 1), Some(&state));
        assert!(labels_to_inject(&spec, "m2", 2).is_none());
        assert!(labels_to_inject(&spec, "m1", 1).is_none());
        spec.graceful_eviction_tasks[0].purge_mode = Some(PurgeMode::Gracefully);
        assert!(labels_to_inject(&spec, "m2", 1).is_none());
    }
}
