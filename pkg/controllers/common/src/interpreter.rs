//! The resource interpreter the controllers use: the native rules with the control plane's
//! ResourceInterpreterCustomizations in front (Karmada's precedence: customization first), read
//! from one shared cache (one watch for every controller). Each controller compiles the scripts
//! it runs once per customization version (`karmada-luavm`).

use std::sync::Arc;

use karmada_apis::config::v1alpha1::ResourceInterpreterCustomization;
use karmada_interpreter::{Interpreter, InterpreterOptions};
use karmada_luavm::{Customizations, Limits};

/// An interpreter with `options` whose customizations follow the control plane's
/// ResourceInterpreterCustomizations. Until their cache has synced (or when it cannot be made),
/// only the native rules apply, as in Karmada.
pub fn interpreter(control_plane: &lariat::Cluster, options: InterpreterOptions) -> Interpreter {
    let native = Interpreter::new(options.clone());
    let cache = match control_plane
        .caches()
        .for_kind::<ResourceInterpreterCustomization>()
    {
        Ok(cache) => cache,
        Err(e) => {
            tracing::warn!(error = %e, "no ResourceInterpreterCustomization cache; only the native interpreter rules apply");
            return native;
        }
    };
    cache.start();
    let source = Box::new(move || cache.has_synced().then(|| cache.store().list()));
    let limits = Limits {
        options,
        ..Limits::default()
    };
    native.with_layer(Arc::new(Customizations::new(source, limits)))
}
