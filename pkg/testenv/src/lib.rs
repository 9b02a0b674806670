//! Real Kubernetes control planes for tests.
