//! Karmada scheduler (placeholder).
