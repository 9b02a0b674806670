//! Karmada's declarative resource interpreter: ResourceInterpreterCustomization scripts run by an
//! embedded, sandboxed Lua 5.1 VM (PUC Lua 5.1 through `mlua`; Karmada uses gopher-lua, also 5.1).
//!
//! - [`Script`]: one compiled script, a small pool of sandboxed states, and the eight operations
//!   with Karmada's function names, arguments and result checks ([`LuaOperation`]);
//! - [`Customizations`]: every customization in effect, merged per target apiVersion/kind as
//!   Karmada merges them (by name; the first script per operation wins; dependency scripts all
//!   run), compiled once per (name, resourceVersion) and served as a
//!   [`karmada_interpreter::InterpreterLayer`];
//! - conversion ([`convert`]) follows gopher-lua/gopher-json, so scripts see and return what they
//!   would in Karmada (empty tables, numbers);
//! - sandbox ([`Limits`]): Karmada's library set with the same functions removed, the `kube`
//!   library (`resourceAdd`, `accuratePodRequirements`, `getResourceQuantity`,
//!   `getPodDependencies`), a time limit (1 s as in Karmada; `pcall` cannot swallow it) and a
//!   memory limit. A script that fails in any way gives a [`ScriptError`], never a panic or a
//!   stall.
//!
//! Known differences from Karmada: `goto` (gopher-lua accepts it, Lua 5.1 does not); a C
//! function (a long `string.find`) is not interrupted by the time limit until it returns (the
//! input length limit of 1,000,000 bounds it, as in Karmada); replica counts outside the int32
//! range are an error instead of Go's undefined conversion.

pub mod convert;
mod customizations;
mod error;
mod lstring;
mod pattern;
pub mod pool;
mod sandbox;
mod script;

pub use customizations::{
    Conflict, Customizations, Source, check_customization, conflicts, customization_of,
    operation_of,
};
pub use error::ScriptError;
pub use sandbox::Limits;
pub use script::{LuaOperation, SUSPEND_AFTER, SUSPENDED_FOR, Script};
