//! Cluster grouping and spread-constraint selection (`pkg/scheduler/core/spreadconstraint`).
//!
//! Like Karmada, only `region` and `cluster` constraints drive the selection: with a region
//! constraint, regions are chosen by Karmada's group search and then clusters inside them; otherwise
//! the cluster constraint picks the best `maxGroups` clusters (swapping in clusters with more
//! available replicas when the best-scored ones cannot hold the replicas). `zone` and `provider`
//! constraints only filter out clusters lacking the property; a constraint set with neither
//! `region` nor `cluster` is an error ("just support cluster and region spread constraint").

use std::cmp::Ordering;
use std::collections::BTreeMap;

use karmada_apis::Cluster;
use karmada_apis::policy::v1alpha1::{
    Placement, ReplicaDivisionPreference, ReplicaSchedulingType, SpreadConstraint, SpreadFieldValue,
};
use karmada_apis::work::v1alpha2::ResourceBindingSpec;

/// A feasible cluster with what the selection and division steps need.
#[derive(Debug, Clone)]
pub(crate) struct ClusterDetail<'c> {
    pub(crate) name: String,
    /// Sum of the score plugins (100 when the binding already runs there).
    pub(crate) score: i64,
    /// 0 for the primary affinity group, `n` for the n-th overflow group.
    pub(crate) overflow_order: i32,
    /// Replicas the cluster can take plus those already assigned to it.
    pub(crate) available_replicas: i64,
    /// Replicas the cluster can take (estimator result).
    pub(crate) allocatable_replicas: i32,
    pub(crate) cluster: &'c Cluster,
}

/// Karmada's `sortClusters` order with the available-replicas comparison: overflow order
/// ascending, score descending, available replicas descending, name ascending.
pub(crate) fn compare_clusters(a: &ClusterDetail<'_>, b: &ClusterDetail<'_>) -> Ordering {
    a.overflow_order
        .cmp(&b.overflow_order)
        .then_with(|| b.score.cmp(&a.score))
        .then_with(|| b.available_replicas.cmp(&a.available_replicas))
        .then_with(|| a.name.cmp(&b.name))
}

/// Spread constraints as Karmada's webhook leaves them: with neither field nor label the field is
/// `cluster`, and `minGroups` 0 becomes 1.
pub(crate) fn defaulted_constraints(placement: &Placement) -> Vec<SpreadConstraint> {
    placement
        .spread_constraints
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if c.spread_by_field.is_none() && c.spread_by_label.is_empty() {
                c.spread_by_field = Some(SpreadFieldValue::Cluster);
            }
            c.min_groups = c.effective_min_groups();
            c
        })
        .collect()
}

/// Whether the placement divides replicas by static weights, in which case Karmada ignores the
/// spread constraints.
pub(crate) fn should_ignore_spread_constraint(placement: &Placement) -> bool {
    let Some(strategy) = &placement.replica_scheduling else {
        return false;
    };
    let preference = strategy
        .replica_division_preference
        .clone()
        .unwrap_or(ReplicaDivisionPreference::Weighted);
    strategy.replica_scheduling_type == ReplicaSchedulingType::Divided
        && preference == ReplicaDivisionPreference::Weighted
        && strategy
            .weight_preference
            .as_ref()
            .is_none_or(|w| !w.static_weight_list.is_empty() && w.dynamic_weight.is_none())
}

/// Whether replicas are duplicated (or not scheduled), so available resources do not matter.
fn should_ignore_available_resource(placement: &Placement) -> bool {
    placement
        .replica_scheduling
        .as_ref()
        .is_none_or(|s| s.replica_scheduling_type == ReplicaSchedulingType::Duplicated)
}

/// The minimum groups of the last constraint on `field` (0 when there is none).
fn min_groups_for(constraints: &[SpreadConstraint], field: &SpreadFieldValue) -> i64 {
    constraints
        .iter()
        .rfind(|c| c.spread_by_field.as_ref() == Some(field))
        .map_or(0, |c| c.min_groups)
}

const WEIGHT_UNIT: i64 = 1000;

/// Karmada's group score: prefers groups that can hold the replicas, then higher cluster scores.
fn group_score(
    clusters: &[ClusterDetail<'_>],
    spec: &ResourceBindingSpec,
    placement: &Placement,
    constraints: &[SpreadConstraint],
    min_groups: i64,
) -> i64 {
    let replicas = i64::from(spec.replicas);
    if placement.replica_scheduling_type() == ReplicaSchedulingType::Duplicated {
        let valid: Vec<&ClusterDetail<'_>> = clusters
            .iter()
            .filter(|c| c.available_replicas >= replicas)
            .collect();
        if valid.is_empty() {
            return 0;
        }
        let count = i64::try_from(valid.len()).unwrap_or(i64::MAX);
        let score_sum: i64 = valid.iter().map(|c| c.score).sum();
        return count.saturating_mul(WEIGHT_UNIT) + score_sum / count;
    }
    let min_groups = min_groups.max(1);
    // ceil(replicas / minGroups)
    let target = (replicas + min_groups - 1).div_euclid(min_groups);
    let cluster_min_groups =
        min_groups_for(constraints, &SpreadFieldValue::Cluster).max(min_groups);
    let (mut available, mut score_sum, mut valid) = (0_i64, 0_i64, 0_i64);
    for c in clusters {
        available = available.saturating_add(c.available_replicas);
        score_sum += c.score;
        valid += 1;
        if valid >= cluster_min_groups && available >= target {
            break;
        }
    }
    if available < target {
        let count = i64::try_from(clusters.len()).unwrap_or(1).max(1);
        return available.saturating_mul(WEIGHT_UNIT) + score_sum / count;
    }
    target.saturating_mul(WEIGHT_UNIT) + score_sum / valid.max(1)
}

/// One region with its clusters (in cluster order) and score.
#[derive(Debug, Clone)]
struct Region<'a, 'c> {
    name: String,
    score: i64,
    clusters: Vec<&'a ClusterDetail<'c>>,
}

/// Selects the clusters to schedule to from `clusters` (already in [`compare_clusters`] order).
/// `need_replicas` is the replica count the selection should be able to hold.
pub(crate) fn select_best_clusters<'c>(
    placement: &Placement,
    spec: &ResourceBindingSpec,
    clusters: &[ClusterDetail<'c>],
    need_replicas: i32,
) -> Result<Vec<ClusterDetail<'c>>, String> {
    if placement.spread_constraints.is_empty() || should_ignore_spread_constraint(placement) {
        return Ok(clusters.to_vec());
    }
    let need_replicas = if should_ignore_available_resource(placement) {
        None
    } else {
        Some(need_replicas)
    };
    let constraints = defaulted_constraints(placement);
    let mut by_field: BTreeMap<Option<SpreadFieldValue>, &SpreadConstraint> = BTreeMap::new();
    for c in &constraints {
        by_field.insert(c.spread_by_field.clone(), c);
    }
    let cluster_constraint = by_field
        .get(&Some(SpreadFieldValue::Cluster))
        .map_or_else(SpreadConstraint::default, |c| (*c).clone());
    if let Some(region_constraint) = by_field.get(&Some(SpreadFieldValue::Region)) {
        return select_by_region(
            placement,
            spec,
            &constraints,
            region_constraint,
            &cluster_constraint,
            clusters,
        );
    }
    if by_field.contains_key(&Some(SpreadFieldValue::Cluster)) {
        return select_by_cluster(&cluster_constraint, clusters, need_replicas);
    }
    Err("just support cluster and region spread constraint".to_owned())
}

fn to_usize(v: i64) -> usize {
    usize::try_from(v.max(0)).unwrap_or(usize::MAX)
}

fn select_by_cluster<'c>(
    constraint: &SpreadConstraint,
    clusters: &[ClusterDetail<'c>],
    need_replicas: Option<i32>,
) -> Result<Vec<ClusterDetail<'c>>, String> {
    let total = clusters.len();
    if total < to_usize(constraint.min_groups) {
        return Err(
            "the number of feasible clusters is less than spreadConstraint.MinGroups".to_owned(),
        );
    }
    // Karmada takes min(total, maxGroups): an unset maxGroups (0) selects no cluster.
    let need = total.min(to_usize(constraint.max_groups));
    let Some(need_replicas) = need_replicas else {
        return Ok(clusters[..need].to_vec());
    };
    let mut selected: Vec<ClusterDetail<'c>> = clusters[..need].to_vec();
    let mut rest: Vec<ClusterDetail<'c>> = clusters[need..].to_vec();
    let enough = |set: &[ClusterDetail<'c>]| {
        set.iter().map(|c| c.available_replicas).sum::<i64>() >= i64::from(need_replicas)
    };
    let mut update = selected.len();
    while !enough(&selected) && update > 0 {
        let slot = update - 1;
        let floor = selected[slot].available_replicas;
        // The first cluster of the rest with strictly more available replicas than the slot's
        // (and the most among those).
        let mut best: Option<usize> = None;
        let mut best_available = floor;
        for (i, c) in rest.iter().enumerate() {
            if c.available_replicas > best_available {
                best = Some(i);
                best_available = c.available_replicas;
            }
        }
        if let Some(i) = best {
            std::mem::swap(&mut selected[slot], &mut rest[i]);
        }
        update -= 1;
    }
    if !enough(&selected) {
        return Err(format!("no enough resource when selecting {need} clusters"));
    }
    Ok(selected)
}

fn select_by_region<'c>(
    placement: &Placement,
    spec: &ResourceBindingSpec,
    constraints: &[SpreadConstraint],
    region_constraint: &SpreadConstraint,
    cluster_constraint: &SpreadConstraint,
    clusters: &[ClusterDetail<'c>],
) -> Result<Vec<ClusterDetail<'c>>, String> {
    let mut regions: BTreeMap<&str, Vec<&ClusterDetail<'c>>> = BTreeMap::new();
    for c in clusters {
        let region = c.cluster.spec.region.as_str();
        if !region.is_empty() {
            regions.entry(region).or_default().push(c);
        }
    }
    if regions.len() < to_usize(region_constraint.min_groups) {
        return Err(
            "the number of feasible region is less than spreadConstraint.MinGroups".to_owned(),
        );
    }
    let region_min_groups = min_groups_for(constraints, &SpreadFieldValue::Region);
    let infos: Vec<Region<'_, 'c>> = regions
        .into_iter()
        .map(|(name, members)| {
            let owned: Vec<ClusterDetail<'c>> = members.iter().map(|c| (*c).clone()).collect();
            Region {
                name: name.to_owned(),
                score: group_score(&owned, spec, placement, constraints, region_min_groups),
                clusters: members,
            }
        })
        .collect();
    let groups: Vec<Group> = infos
        .iter()
        .map(|r| Group {
            name: r.name.clone(),
            value: i64::try_from(r.clusters.len()).unwrap_or(i64::MAX),
            weight: r.score,
        })
        .collect();
    let chosen = select_groups(
        groups,
        region_constraint.min_groups,
        region_constraint.max_groups,
        cluster_constraint.min_groups,
    );
    if chosen.is_empty() {
        return Err(
            "the number of clusters is less than the cluster spreadConstraint.MinGroups".to_owned(),
        );
    }
    let mut selected: Vec<ClusterDetail<'c>> = Vec::new();
    let mut candidates: Vec<ClusterDetail<'c>> = Vec::new();
    for group in &chosen {
        if let Some(region) = infos.iter().find(|r| r.name == group.name) {
            let mut members = region.clusters.iter();
            if let Some(first) = members.next() {
                selected.push((*first).clone());
            }
            candidates.extend(members.map(|c| (*c).clone()));
        }
    }
    let need = (candidates.len() + selected.len()).min(to_usize(cluster_constraint.max_groups));
    if need > selected.len() {
        let rest = need - selected.len();
        candidates.sort_by(compare_clusters);
        selected.extend(candidates.into_iter().take(rest));
    }
    Ok(selected)
}

/// A group (region) in the group search: `value` clusters, `weight` score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) name: String,
    pub(crate) value: i64,
    pub(crate) weight: i64,
}

#[derive(Debug, Clone)]
struct Path {
    id: usize,
    groups: Vec<Group>,
    weight: i64,
    value: i64,
}

/// Karmada's `selectGroups`: the best combination of `min..=max` groups holding at least
/// `target` clusters. All feasible combinations are enumerated depth-first over the groups sorted
/// by (value ascending, weight descending, name); the best is the highest total weight, then total
/// value, then the first found, except that a feasible prefix (by weight order) of it is preferred.
pub(crate) fn select_groups(mut groups: Vec<Group>, min: i64, max: i64, target: i64) -> Vec<Group> {
    if groups.is_empty() {
        return Vec::new();
    }
    groups.sort_by(|a, b| {
        a.value
            .cmp(&b.value)
            .then_with(|| b.weight.cmp(&a.weight))
            .then_with(|| a.name.cmp(&b.name))
    });
    let mut paths: Vec<Path> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut counter = 0;
    let all = i64::try_from(groups.len()).unwrap_or(i64::MAX);
    dfs(
        &groups,
        &mut current,
        0,
        0,
        min,
        max,
        target,
        all,
        &mut counter,
        &mut paths,
    );
    if paths.is_empty() {
        return Vec::new();
    }
    if paths.len() > 1 {
        paths.sort_by(|a, b| {
            b.weight
                .cmp(&a.weight)
                .then_with(|| b.value.cmp(&a.value))
                .then_with(|| a.id.cmp(&b.id))
        });
    }
    let mut best = 0;
    for i in 1..paths.len() {
        let (candidate, current_best) = (&paths[i], &paths[best]);
        let is_prefix = candidate.groups.len() < current_best.groups.len()
            && candidate
                .groups
                .iter()
                .zip(&current_best.groups)
                .all(|(a, b)| a.name == b.name);
        if is_prefix {
            best = i;
        }
    }
    paths.swap_remove(best).groups
}

#[allow(clippy::too_many_arguments)]
fn dfs(
    groups: &[Group],
    current: &mut Vec<usize>,
    sum: i64,
    begin: usize,
    min: i64,
    max: i64,
    target: i64,
    all: i64,
    counter: &mut usize,
    paths: &mut Vec<Path>,
) {
    let len = i64::try_from(current.len()).unwrap_or(i64::MAX);
    if sum >= target && len >= min && len <= max {
        *counter += 1;
        let mut chosen: Vec<Group> = current.iter().map(|&i| groups[i].clone()).collect();
        let weight = chosen.iter().map(|g| g.weight).sum();
        let value = chosen.iter().map(|g| g.value).sum();
        chosen.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
        paths.push(Path {
            id: *counter,
            groups: chosen,
            weight,
            value,
        });
        return;
    }
    if len >= max {
        return;
    }
    for i in begin..groups.len() {
        current.push(i);
        dfs(
            groups,
            current,
            sum + groups[i].value,
            i + 1,
            min,
            max,
            target,
            all,
            counter,
            paths,
        );
        // Karmada stops backtracking when every group is needed for the minimum.
        if all == min {
            break;
        }
        current.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(name: &str, value: i64, weight: i64) -> Group {
        Group {
            name: name.into(),
            value,
            weight,
        }
    }

    fn names(groups: &[Group]) -> Vec<&str> {
        groups.iter().map(|g| g.name.as_str()).collect()
    }

    #[test]
    fn group_search_prefers_weight_then_prefix() {
        let groups = vec![
            g("R1", 2, 400),
            g("R2", 3, 300),
            g("R3", 6, 200),
            g("R4", 7, 100),
        ];
        // Two regions holding at least 7 clusters: the heaviest feasible pair (Karmada's example).
        assert_eq!(
            names(&select_groups(groups.clone(), 2, 2, 7)),
            vec!["R1", "R3"]
        );
        // Up to three regions: R1+R2+R3 weighs most and none of its prefixes is feasible.
        assert_eq!(
            names(&select_groups(groups.clone(), 1, 3, 7)),
            vec!["R1", "R2", "R3"]
        );
        // A feasible prefix of the heaviest path wins over it.
        let prefix = vec![g("A", 5, 300), g("B", 5, 200), g("C", 1, 250)];
        assert_eq!(names(&select_groups(prefix, 1, 3, 5)), vec!["A"]);
        // Impossible target.
        assert!(select_groups(groups.clone(), 1, 2, 100).is_empty());
        // maxGroups 0 selects nothing (as in Karmada).
        assert!(select_groups(groups, 1, 0, 1).is_empty());
    }

    #[test]
    fn group_search_all_groups_needed() {
        let groups = vec![g("a", 1, 10), g("b", 1, 20)];
        assert_eq!(names(&select_groups(groups, 2, 2, 2)), vec!["b", "a"]);
    }
}
