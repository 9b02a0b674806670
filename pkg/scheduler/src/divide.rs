//! Replica division (`pkg/scheduler/core/assignment.go`, `division_algorithm.go`,
//! `pkg/util/helper/binding.go`, `webstermethod.go`).
//!
//! Weights are turned into replicas with the Webster (Sainte-Laguë) method: seats go one at a time
//! to the party with the highest `votes / (2·seats + 1)`; ties go to the party with fewer seats, then
//! by name, ascending or descending depending on the parity of the FNV-32a hash of the resource uid
//! (so ties do not always favour the same clusters, yet stay stable for one resource).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use karmada_apis::names::fnv32a;
use karmada_apis::policy::v1alpha1::{
    ReplicaDivisionPreference, ReplicaSchedulingStrategy, ReplicaSchedulingType,
};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, TargetCluster};
use karmada_policy::selector::cluster_matches;

use crate::spread::ClusterDetail;

/// How Webster ties between parties with equal priority and seats are broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieBreak {
    /// The lexicographically smaller name wins.
    NameAscending,
    /// The lexicographically larger name wins.
    NameDescending,
}

impl TieBreak {
    /// Karmada's `tieBreakerByUID`: descending when the FNV-32a hash of the uid is odd, ascending
    /// otherwise (and for an empty uid).
    pub fn for_uid(uid: &str) -> Self {
        if !uid.is_empty() && fnv32a(uid.as_bytes()) & 1 == 1 {
            Self::NameDescending
        } else {
            Self::NameAscending
        }
    }
}

#[derive(Debug, Clone)]
struct Party {
    name: String,
    votes: i64,
    seats: i64,
}

impl Party {
    fn priority(&self) -> f64 {
        // Go computes float64(votes) / float64(2*seats+1).
        self.votes as f64 / (2 * self.seats + 1) as f64
    }
}

/// Whether `a` gets the next seat before `b`.
fn precedes(a: &Party, b: &Party, tie: TieBreak) -> bool {
    let (pa, pb) = (a.priority(), b.priority());
    if pa == pb {
        if a.seats != b.seats {
            return a.seats < b.seats;
        }
        return match tie {
            TieBreak::NameAscending => a.name < b.name,
            TieBreak::NameDescending => a.name > b.name,
        };
    }
    pa > pb
}

/// Seats beyond `seats` that `votes` would win at a priority strictly above `threshold`, estimated
/// in floating point (within one of the exact count).
fn estimated_seats_above(votes: i64, seats: i64, threshold: f64) -> i64 {
    if votes <= 0 {
        return 0;
    }
    let x = (votes as f64 / threshold - 1.0) / 2.0;
    if x <= 0.0 || x.is_nan() {
        return 0;
    }
    let count = if x >= 9.0e18 {
        i64::MAX
    } else {
        x.ceil() as i64
    };
    count.saturating_sub(seats).max(0)
}

/// Hands out most of a large number of seats at once, leaving a few for the exact one-by-one pass.
/// Every seat handed out here is one the one-by-one method would also give (see the module tests).
fn bulk_allocate(parties: &mut [Party], remaining: i64) -> i64 {
    let max_votes = parties.iter().map(|p| p.votes).max().unwrap_or(0);
    if max_votes <= 0 {
        return remaining;
    }
    let n = i64::try_from(parties.len()).unwrap_or(i64::MAX);
    let upper_bound = |t: f64| -> i128 {
        parties
            .iter()
            .map(|p| i128::from(estimated_seats_above(p.votes, p.seats, t)) + 1)
            .sum()
    };
    // Smallest threshold whose seat count (over-estimated) still fits in `remaining`.
    let (mut lo, mut hi) = (0.0_f64, max_votes as f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if upper_bound(mid) <= i128::from(remaining) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    if upper_bound(hi) > i128::from(remaining) || remaining < n {
        return remaining;
    }
    let mut left = remaining;
    for p in parties.iter_mut() {
        let sure = (estimated_seats_above(p.votes, p.seats, hi) - 1).max(0);
        p.seats += sure;
        left -= sure;
    }
    left
}

/// Bulk allocation starts when more than this many seats per party are handed out.
const BULK_THRESHOLD_PER_PARTY: i64 = 8;

fn allocate(parties: &mut [Party], new_seats: i64, tie: TieBreak, allow_bulk: bool) {
    let n = i64::try_from(parties.len()).unwrap_or(i64::MAX);
    let mut remaining = new_seats.max(0);
    if allow_bulk
        && remaining
            > BULK_THRESHOLD_PER_PARTY
                .saturating_mul(n)
                .saturating_add(64)
    {
        remaining = bulk_allocate(parties, remaining);
    }
    for _ in 0..remaining {
        let mut best = 0;
        for i in 1..parties.len() {
            if precedes(&parties[i], &parties[best], tie) {
                best = i;
            }
        }
        if let Some(p) = parties.get_mut(best) {
            p.seats += 1;
        }
    }
}

/// Karmada's `AllocateWebsterSeats`: distributes `new_seats` among the parties of `votes` and
/// `initial` (a party only in `initial` has no votes), returning every party with its seats,
/// sorted by name.
pub fn allocate_webster_seats(
    new_seats: i32,
    votes: &[(String, i64)],
    initial: &[(String, i32)],
    tie: TieBreak,
) -> Vec<(String, i32)> {
    allocate_webster_seats_with(new_seats, votes, initial, tie, true)
}

fn allocate_webster_seats_with(
    new_seats: i32,
    votes: &[(String, i64)],
    initial: &[(String, i32)],
    tie: TieBreak,
    allow_bulk: bool,
) -> Vec<(String, i32)> {
    let mut parties: BTreeMap<&str, Party> = BTreeMap::new();
    for (name, seats) in initial {
        parties.insert(
            name,
            Party {
                name: name.clone(),
                votes: 0,
                seats: i64::from((*seats).max(0)),
            },
        );
    }
    for (name, v) in votes {
        parties
            .entry(name)
            .or_insert_with(|| Party {
                name: name.clone(),
                votes: 0,
                seats: 0,
            })
            .votes = *v;
    }
    let mut parties: Vec<Party> = parties.into_values().collect();
    if parties.is_empty() {
        return Vec::new();
    }
    allocate(&mut parties, i64::from(new_seats), tie, allow_bulk);
    parties
        .into_iter()
        .map(|p| (p.name, i32::try_from(p.seats).unwrap_or(i32::MAX)))
        .collect()
}

/// Karmada's `Dispenser.AllocateByWeight` with an empty initial result: divides `replicas` by the
/// weights; with all weights zero nothing is allocated.
pub fn divide_by_weight(
    replicas: i32,
    weights: &[(String, i64)],
    tie: TieBreak,
) -> Vec<TargetCluster> {
    if weights.iter().map(|(_, w)| *w).sum::<i64>() == 0 {
        return Vec::new();
    }
    allocate_webster_seats(replicas, weights, &[], tie)
        .into_iter()
        .map(|(name, replicas)| TargetCluster {
            name,
            replicas,
            components: Vec::new(),
        })
        .collect()
}

/// Karmada's `MergeTargetClusters`: adds the old replicas to the new result; clusters only in the
/// old result are appended (in their old order).
fn merge_target_clusters(old: &[TargetCluster], new: Vec<TargetCluster>) -> Vec<TargetCluster> {
    if old.is_empty() {
        return new;
    }
    if new.is_empty() {
        return old.to_vec();
    }
    let mut merged = new;
    let mut leftovers = Vec::new();
    for o in old {
        match merged.iter_mut().find(|m| m.name == o.name) {
            Some(m) => m.replicas = m.replicas.saturating_add(o.replicas),
            None => leftovers.push(o.clone()),
        }
    }
    merged.extend(leftovers);
    merged
}

fn sum_replicas(clusters: &[TargetCluster]) -> i64 {
    clusters.iter().map(|c| i64::from(c.replicas)).sum()
}

fn target(name: &str, replicas: i32) -> TargetCluster {
    TargetCluster {
        name: name.to_owned(),
        replicas,
        components: Vec::new(),
    }
}

/// How replicas are assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    Duplicated,
    Aggregated,
    StaticWeight,
    DynamicWeight,
}

/// The assignment strategy of a placement's replica scheduling (Karmada's webhook default of
/// `Weighted` for `Divided` applied); `Err` carries Karmada's "unsupported" message.
pub(crate) fn strategy_of(
    scheduling: Option<&ReplicaSchedulingStrategy>,
) -> Result<Strategy, String> {
    let Some(scheduling) = scheduling else {
        return Ok(Strategy::Duplicated);
    };
    let preference = scheduling
        .replica_division_preference
        .clone()
        .unwrap_or(ReplicaDivisionPreference::Weighted);
    match (&scheduling.replica_scheduling_type, &preference) {
        (ReplicaSchedulingType::Duplicated, _) => Ok(Strategy::Duplicated),
        (ReplicaSchedulingType::Divided, ReplicaDivisionPreference::Aggregated) => {
            Ok(Strategy::Aggregated)
        }
        (ReplicaSchedulingType::Divided, ReplicaDivisionPreference::Weighted) => {
            if scheduling
                .weight_preference
                .as_ref()
                .is_some_and(|w| w.dynamic_weight.is_some())
            {
                Ok(Strategy::DynamicWeight)
            } else {
                Ok(Strategy::StaticWeight)
            }
        }
        (kind, preference) => Err(format!(
            "unsupported replica scheduling strategy, replicaSchedulingType: {kind}, replicaDivisionPreference: {preference}, please try another scheduling strategy"
        )),
    }
}

/// Why replicas could not be assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AssignError {
    /// Not enough capacity (Karmada's `UnschedulableError`).
    Unschedulable(String),
    /// Anything else.
    Other(String),
}

impl AssignError {
    fn wrap(self, context: &str) -> Self {
        match self {
            Self::Unschedulable(m) => Self::Unschedulable(format!("{context}: {m}")),
            Self::Other(m) => Self::Other(format!("{context}: {m}")),
        }
    }
}

/// Inputs of one assignment round.
pub(crate) struct AssignInput<'a, 'c> {
    pub(crate) candidates: &'a [ClusterDetail<'c>],
    pub(crate) spec: &'a ResourceBindingSpec,
    /// The replicas to assign in this round (`spec.replicas`, or a tier's share with overflow).
    pub(crate) replicas: i32,
    pub(crate) strategy: Strategy,
    /// Do a complete recalculation instead of adjusting the previous result (`rescheduleTriggeredAt`).
    pub(crate) fresh: bool,
    pub(crate) tie: TieBreak,
}

/// Assigns replicas to the candidate clusters; clusters with zero replicas are left out.
pub(crate) fn assign_to_clusters(
    input: &AssignInput<'_, '_>,
) -> Result<Vec<TargetCluster>, AssignError> {
    let result = match input.strategy {
        Strategy::Duplicated => input
            .candidates
            .iter()
            .map(|c| target(&c.name, input.replicas))
            .collect(),
        Strategy::StaticWeight => static_weight(input),
        Strategy::Aggregated | Strategy::DynamicWeight => dynamic(input)?,
    };
    Ok(result.into_iter().filter(|c| c.replicas > 0).collect())
}

/// Karmada's `getStaticWeightInfoList`: each candidate's highest matching weight (candidates
/// without a positive weight are left out); all candidates weigh 1 when no weight applies.
fn static_weight(input: &AssignInput<'_, '_>) -> Vec<TargetCluster> {
    let rules = input
        .spec
        .placement
        .as_ref()
        .and_then(|p| p.replica_scheduling.as_ref())
        .and_then(|s| s.weight_preference.as_ref())
        .map(|w| w.static_weight_list.as_slice());
    let mut weights: Vec<(String, i64)> = Vec::new();
    for c in input.candidates {
        let weight = match rules {
            None => 1,
            Some(rules) => rules
                .iter()
                .filter(|r| cluster_matches(c.cluster, &r.target_cluster))
                .map(|r| r.weight)
                .fold(0, i64::max),
        };
        if weight > 0 {
            weights.push((c.name.clone(), weight));
        }
    }
    if weights.is_empty() {
        weights = input
            .candidates
            .iter()
            .map(|c| (c.name.clone(), 1))
            .collect();
    }
    divide_by_weight(input.replicas, &weights, input.tie)
}

/// Karmada's dynamic assignment (Aggregated and dynamic weights): keeps the previous result where
/// possible (scale up adds to it, scale down removes proportionally), or recalculates everything
/// in fresh mode.
fn dynamic(input: &AssignInput<'_, '_>) -> Result<Vec<TargetCluster>, AssignError> {
    // The previous result restricted to clusters that are still candidates.
    let scheduled: Vec<TargetCluster> = input
        .spec
        .clusters
        .iter()
        .filter(|c| input.candidates.iter().any(|k| k.name == c.name))
        .cloned()
        .collect();
    let assigned = sum_replicas(&scheduled);
    let wanted = i64::from(input.replicas);
    let by_replicas_desc = |clusters: &mut Vec<TargetCluster>| {
        clusters.sort_by_key(|c| std::cmp::Reverse(c.replicas));
    };
    if input.fresh {
        let mut available: Vec<TargetCluster> = input
            .candidates
            .iter()
            .map(|c| {
                let previous = scheduled
                    .iter()
                    .find(|s| s.name == c.name)
                    .map_or(0, |s| s.replicas);
                target(&c.name, c.allocatable_replicas.saturating_add(previous))
            })
            .collect();
        by_replicas_desc(&mut available);
        return divide_dynamic(input, &[], available, wanted)
            .map_err(|e| e.wrap("failed to do fresh scale"));
    }
    match assigned.cmp(&wanted) {
        Ordering::Greater => {
            // Scale down proportionally to the previous result.
            let mut available = scheduled.clone();
            by_replicas_desc(&mut available);
            divide_dynamic(input, &[], available, wanted)
                .map_err(|e| e.wrap("failed to scale down"))
        }
        Ordering::Less => {
            // Scale up: only the extra replicas are divided, by what the clusters can still take.
            let mut available: Vec<TargetCluster> = input
                .candidates
                .iter()
                .map(|c| target(&c.name, c.allocatable_replicas))
                .collect();
            by_replicas_desc(&mut available);
            divide_dynamic(input, &scheduled, available, wanted - assigned)
                .map_err(|e| e.wrap("failed to scale up"))
        }
        Ordering::Equal => Ok(scheduled),
    }
}

/// Karmada's `dynamicDivideReplicas`.
fn divide_dynamic(
    input: &AssignInput<'_, '_>,
    scheduled: &[TargetCluster],
    mut available: Vec<TargetCluster>,
    target_replicas: i64,
) -> Result<Vec<TargetCluster>, AssignError> {
    let available_sum = sum_replicas(&available);
    if available_sum < target_replicas {
        return Err(AssignError::Unschedulable(format!(
            "Clusters available replicas {available_sum} are not enough to schedule."
        )));
    }
    if input.strategy == Strategy::Aggregated {
        // Previously used clusters first, then as few clusters as can hold the target.
        let (mut prior, others): (Vec<TargetCluster>, Vec<TargetCluster>) = available
            .into_iter()
            .partition(|a| scheduled.iter().any(|s| s.replicas > 0 && s.name == a.name));
        prior.extend(others);
        let mut sum = 0_i64;
        let mut keep = prior.len();
        for (i, c) in prior.iter().enumerate() {
            sum += i64::from(c.replicas);
            if sum >= target_replicas {
                keep = i + 1;
                break;
            }
        }
        prior.truncate(keep);
        available = prior;
    }
    let weights: Vec<(String, i64)> = available
        .iter()
        .map(|c| (c.name.clone(), i64::from(c.replicas)))
        .collect();
    let replicas = i32::try_from(target_replicas).unwrap_or(i32::MAX);
    let divided = divide_by_weight(replicas, &weights, input.tie);
    Ok(merge_target_clusters(scheduled, divided))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::Lcg;

    fn names_seats(v: &[(String, i32)]) -> Vec<(&str, i32)> {
        v.iter().map(|(n, s)| (n.as_str(), *s)).collect()
    }

    fn votes(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
        pairs.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect()
    }

    #[test]
    fn webster_examples() {
        // 9 replicas with weights 1:2 -> 3:6; 1:3 -> 2:7 (Karmada's documented examples).
        let r = allocate_webster_seats(
            9,
            &votes(&[("A", 1), ("B", 2)]),
            &[],
            TieBreak::NameAscending,
        );
        assert_eq!(names_seats(&r), vec![("A", 3), ("B", 6)]);
        let r = allocate_webster_seats(
            9,
            &votes(&[("A", 1), ("B", 3)]),
            &[],
            TieBreak::NameAscending,
        );
        assert_eq!(names_seats(&r), vec![("A", 2), ("B", 7)]);
        // Ties: equal weights, odd replica count.
        let r = allocate_webster_seats(
            3,
            &votes(&[("a", 1), ("b", 1)]),
            &[],
            TieBreak::NameAscending,
        );
        assert_eq!(names_seats(&r), vec![("a", 2), ("b", 1)]);
        let r = allocate_webster_seats(
            3,
            &votes(&[("a", 1), ("b", 1)]),
            &[],
            TieBreak::NameDescending,
        );
        assert_eq!(names_seats(&r), vec![("a", 1), ("b", 2)]);
        // Zero seats and zero votes.
        let r = allocate_webster_seats(0, &votes(&[("a", 1)]), &[], TieBreak::NameAscending);
        assert_eq!(names_seats(&r), vec![("a", 0)]);
        let r = allocate_webster_seats(
            4,
            &votes(&[("a", 0), ("b", 5)]),
            &[],
            TieBreak::NameAscending,
        );
        assert_eq!(names_seats(&r), vec![("a", 0), ("b", 4)]);
        // Initial seats count towards the priority.
        let r = allocate_webster_seats(
            2,
            &votes(&[("a", 1), ("b", 1)]),
            &[("a".to_owned(), 3)],
            TieBreak::NameAscending,
        );
        assert_eq!(names_seats(&r), vec![("a", 3), ("b", 2)]);
    }

    #[test]
    fn tie_break_from_uid() {
        assert_eq!(TieBreak::for_uid(""), TieBreak::NameAscending);
        let parity = |uid: &str| fnv32a(uid.as_bytes()) & 1;
        let odd = (0..100)
            .map(|i| format!("uid-{i}"))
            .find(|u| parity(u) == 1)
            .unwrap();
        let even = (0..100)
            .map(|i| format!("uid-{i}"))
            .find(|u| parity(u) == 0)
            .unwrap();
        assert_eq!(TieBreak::for_uid(&odd), TieBreak::NameDescending);
        assert_eq!(TieBreak::for_uid(&even), TieBreak::NameAscending);
    }

    #[test]
    fn bulk_allocation_matches_one_by_one() {
        let mut rng = Lcg(42);
        for round in 0..300 {
            let parties = 1 + rng.below(8) as usize;
            let vs: Vec<(String, i64)> = (0..parties)
                .map(|i| {
                    let v = match rng.below(4) {
                        0 => 1 + rng.below(3) as i64,
                        1 => rng.below(1000) as i64,
                        2 => 7,
                        _ => 1 + rng.below(1_000_000) as i64,
                    };
                    (format!("c{i}"), v)
                })
                .collect();
            let seats = 100 + rng.below(20_000) as i32;
            let tie = if round % 2 == 0 {
                TieBreak::NameAscending
            } else {
                TieBreak::NameDescending
            };
            let fast = allocate_webster_seats_with(seats, &vs, &[], tie, true);
            let slow = allocate_webster_seats_with(seats, &vs, &[], tie, false);
            assert_eq!(fast, slow, "votes {vs:?} seats {seats}");
            let total: i64 = fast.iter().map(|(_, s)| i64::from(*s)).sum();
            if vs.iter().any(|(_, v)| *v > 0) {
                assert_eq!(total, i64::from(seats));
            }
        }
    }

    #[test]
    fn huge_seat_counts_are_fast() {
        let vs = votes(&[("a", 1), ("b", 2), ("c", 3)]);
        let r = allocate_webster_seats(i32::MAX, &vs, &[], TieBreak::NameAscending);
        let total: i64 = r.iter().map(|(_, s)| i64::from(*s)).sum();
        assert_eq!(total, i64::from(i32::MAX));
    }

    #[test]
    fn merge_keeps_old_order_for_leftovers() {
        let old = vec![target("b", 1), target("a", 2), target("c", 3)];
        let merged = merge_target_clusters(&old, vec![target("a", 5), target("z", 1)]);
        assert_eq!(
            merged
                .iter()
                .map(|c| (c.name.as_str(), c.replicas))
                .collect::<Vec<_>>(),
            vec![("a", 7), ("z", 1), ("b", 1), ("c", 3)]
        );
        assert_eq!(merge_target_clusters(&[], vec![target("a", 1)]).len(), 1);
        assert_eq!(merge_target_clusters(&old, vec![]).len(), 3);
    }
}
