//! Which Work a member object belongs to. Karmada only checks `karmada.io/managed=true` before
//! updating or deleting a member object; we also refuse when the object's Work identity (the
//! `work.karmada.io/namespace` and `work.karmada.io/name` annotations, else the
//! `work.karmada.io/permanent-id` label) names a different Work, so two Works that render the same
//! object (e.g. a template and a namespace-sync Work for one Namespace) cannot overwrite or delete
//! each other's object. The Work that loses is told so on its `Applied` condition
//! ([`REASON_OWNED_BY_ANOTHER_WORK`]) and by a Warning Event.

use karmada_apis::Work;
use karmada_apis::well_known::{
    WORK_NAME_ANNOTATION, WORK_NAMESPACE_ANNOTATION, WORK_PERMANENT_ID_LABEL,
};
use kube::ResourceExt;
use serde_json::Value;

/// `Applied=False` reason and Warning Event reason (karmada-rs only): the member object belongs to
/// another Work, so it was left untouched.
pub const REASON_OWNED_BY_ANOTHER_WORK: &str = "OwnedByAnotherWork";

/// The identity a Work stamps on its member objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkIdentity {
    namespace: String,
    name: String,
    permanent_id: Option<String>,
}

fn text<'a>(obj: &'a Value, map: &str, key: &str) -> Option<&'a str> {
    obj.pointer(&format!("/metadata/{map}"))
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
}

impl WorkIdentity {
    /// The identity of `work`.
    pub fn of(work: &Work) -> Self {
        WorkIdentity {
            namespace: work.namespace().unwrap_or_default(),
            name: work.name_any(),
            permanent_id: work.labels().get(WORK_PERMANENT_ID_LABEL).cloned(),
        }
    }

    /// The other Work `member_object` belongs to, if its identity names one: `namespace/name`
    /// from the annotations, else `permanent-id <id>`. An object naming this Work's namespace and
    /// name is ours even with another permanent id (a Work deleted and created again adopts what
    /// its predecessor left).
    pub fn other_owner(&self, member_object: &Value) -> Option<String> {
        let ns = text(member_object, "annotations", WORK_NAMESPACE_ANNOTATION);
        let name = text(member_object, "annotations", WORK_NAME_ANNOTATION);
        if ns.is_some() || name.is_some() {
            let differs =
                ns.is_some_and(|v| v != self.namespace) || name.is_some_and(|v| v != self.name);
            return differs.then(|| format!("{}/{}", ns.unwrap_or(""), name.unwrap_or("")));
        }
        let id = text(member_object, "labels", WORK_PERMANENT_ID_LABEL)?;
        (self.permanent_id.as_deref() != Some(id))
            .then(|| format!("{WORK_PERMANENT_ID_LABEL}={id}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn me() -> WorkIdentity {
        WorkIdentity {
            namespace: "karmada-es-member1".into(),
            name: "web-7d9f".into(),
            permanent_id: Some("id-1".into()),
        }
    }

    #[test]
    fn own_unmarked_and_other_objects() {
        let ours = json!({"metadata": {
            "annotations": {"work.karmada.io/namespace": "karmada-es-member1", "work.karmada.io/name": "web-7d9f"},
            "labels": {"work.karmada.io/permanent-id": "id-0"}}});
        assert_eq!(me().other_owner(&ours), None);
        assert_eq!(me().other_owner(&json!({"metadata": {}})), None);
        let other = json!({"metadata": {"annotations": {
            "work.karmada.io/namespace": "karmada-es-member1", "work.karmada.io/name": "ns-abc"}}});
        assert_eq!(
            me().other_owner(&other).as_deref(),
            Some("karmada-es-member1/ns-abc")
        );
        let other_id = json!({"metadata": {"labels": {"work.karmada.io/permanent-id": "id-2"}}});
        assert_eq!(
            me().other_owner(&other_id).as_deref(),
            Some("work.karmada.io/permanent-id=id-2")
        );
        let same_id = json!({"metadata": {"labels": {"work.karmada.io/permanent-id": "id-1"}}});
        assert_eq!(me().other_owner(&same_id), None);
    }
}
