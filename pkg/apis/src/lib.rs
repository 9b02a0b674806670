//! Karmada's API types (`cluster.karmada.io`, `policy.karmada.io`, `work.karmada.io`) with Karmada's exact
//! wire shapes, the well-known label/annotation/finalizer names, and Karmada's object-name helpers.
