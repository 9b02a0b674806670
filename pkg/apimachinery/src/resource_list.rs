//! Arithmetic on resource lists (`corev1.ResourceList`: resource name to quantity), done with
//! [`Quantity`] so sums print as apimachinery's `Quantity.Add` leaves them.
//!
//! A quantity that does not parse is left out of a result: lists come from the API server, whose
//! schemas admit only quantities, so this only drops what nothing could count anyway.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use crate::quantity::Quantity;

/// A resource list as the Kubernetes API types carry it.
pub type ResourceList = BTreeMap<String, K8sQuantity>;

/// Adds every quantity of `list` to the same-named one of `total` (a missing name starts at the
/// added quantity, as Go's `total[name] = q` does).
pub fn add_into(total: &mut ResourceList, list: &ResourceList) {
    for (name, q) in list {
        let Ok(q) = Quantity::from_k8s(q) else {
            continue;
        };
        let sum = match total.get(name).map(Quantity::from_k8s) {
            Some(Ok(mut existing)) => {
                existing.add(&q);
                existing
            }
            _ => q,
        };
        total.insert(name.clone(), sum.to_k8s());
    }
}

/// The sum of `lists`.
pub fn sum<'a>(lists: impl IntoIterator<Item = &'a ResourceList>) -> ResourceList {
    let mut total = ResourceList::new();
    for list in lists {
        add_into(&mut total, list);
    }
    total
}

/// `list` with every quantity multiplied by `factor`, leaving out zero quantities (Karmada's
/// per-replica request times the replica count).
pub fn times(list: &ResourceList, factor: i64) -> ResourceList {
    let mut out = ResourceList::new();
    for (name, q) in list {
        let Ok(mut q) = Quantity::from_k8s(q) else {
            continue;
        };
        if q.is_zero() {
            continue;
        }
        q.mul(factor);
        out.insert(name.clone(), q.to_k8s());
    }
    out
}

/// `list` in canonical notation (`1000m` becomes `1`), as Go prints a list it decoded.
pub fn canonical(list: &ResourceList) -> ResourceList {
    list.iter()
        .map(|(name, q)| {
            let q = Quantity::from_k8s(q).map_or_else(|_| q.clone(), |p| p.to_k8s());
            (name.clone(), q)
        })
        .collect()
}

/// The entries of `list` whose names `reference` has (Karmada's `filterResourceListByOverall`).
pub fn filter_by_names(list: &ResourceList, reference: &ResourceList) -> ResourceList {
    list.iter()
        .filter(|(name, _)| reference.contains_key(*name))
        .map(|(name, q)| (name.clone(), q.clone()))
        .collect()
}

/// The names whose quantity in `used` is larger than in `hard`, with both values, by name (names
/// `hard` lacks are not limited).
pub fn exceeded(
    used: &ResourceList,
    hard: &ResourceList,
) -> Vec<(String, K8sQuantity, K8sQuantity)> {
    let mut out = Vec::new();
    for (name, limit) in hard {
        let (Some(u), Ok(l)) = (used.get(name), Quantity::from_k8s(limit)) else {
            continue;
        };
        let Ok(uq) = Quantity::from_k8s(u) else {
            continue;
        };
        if uq.cmp_value(&l).is_gt() {
            out.push((name.clone(), u.clone(), limit.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, &str)]) -> ResourceList {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), K8sQuantity((*v).to_owned())))
            .collect()
    }

    #[test]
    fn sums_in_canonical_form() {
        let a = list(&[("cpu", "1"), ("memory", "1Gi")]);
        let b = list(&[("cpu", "500m"), ("pods", "2")]);
        assert_eq!(
            sum([&a, &b]),
            list(&[("cpu", "1500m"), ("memory", "1Gi"), ("pods", "2")])
        );
        assert_eq!(sum([]), ResourceList::new());
    }

    #[test]
    fn multiplies_and_skips_zero_and_garbage() {
        let l = list(&[("cpu", "250m"), ("gpu", "0"), ("bad", "x")]);
        assert_eq!(times(&l, 4), list(&[("cpu", "1")]));
    }

    #[test]
    fn canonicalizes_filters_and_compares() {
        assert_eq!(
            canonical(&list(&[("cpu", "1000m"), ("bad", "x")])),
            list(&[("cpu", "1"), ("bad", "x")])
        );
        let used = list(&[("cpu", "3"), ("memory", "1Gi"), ("pods", "1")]);
        let hard = list(&[("cpu", "2"), ("memory", "2Gi")]);
        assert_eq!(
            filter_by_names(&used, &hard),
            list(&[("cpu", "3"), ("memory", "1Gi")])
        );
        assert_eq!(
            exceeded(&used, &hard),
            vec![(
                "cpu".to_owned(),
                K8sQuantity("3".into()),
                K8sQuantity("2".into())
            )]
        );
    }
}
