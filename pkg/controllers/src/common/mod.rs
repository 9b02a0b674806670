//! What several controllers share: the interface of the two binding kinds, Events, guarded merge
//! patches for objects we do not own, and apimachinery's `meta.SetStatusCondition`.

pub mod binding;
pub mod events;
pub mod patch;

/// apimachinery's `meta.SetStatusCondition`, for the controllers that write binding conditions.
pub use karmada_scheduler::set_condition;
