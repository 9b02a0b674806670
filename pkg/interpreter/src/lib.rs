//! Per-kind resource knowledge (Karmada's "resource interpreter"): replicas and replica requirements,
//! revising replicas, pruning server-set fields, retaining member-owned fields, status reflection,
//! health and status aggregation.
