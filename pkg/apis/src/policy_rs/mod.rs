//! The `policy.karmada-rs.io` API group: karmada-rs's own policies, beside Karmada's kinds (which
//! never get fields Karmada does not define, so Karmada's Go controllers can run against the same
//! objects).

pub mod v1alpha1;
