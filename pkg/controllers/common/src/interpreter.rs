//! The resource interpreter the controllers use: the native rules with, in front, the control
//! plane's ResourceInterpreterCustomizations, then its interpreter webhooks
//! (ResourceInterpreterWebhookConfigurations, [`webhook`]), then the built-in third-party
//! interpretations ([`karmada_interpreter::ThirdParty`]: OpenKruise, Flux, ...) — Karmada's
//! precedence: customization, webhook, third-party, native, per operation — the first two read
//! from one shared cache each (one watch for every controller). Each controller compiles the scripts it runs once per customization version
//! (`karmada-luavm`).

pub mod webhook;

use std::sync::Arc;

use karmada_apis::config::v1alpha1::{
    ResourceInterpreterCustomization, ResourceInterpreterWebhookConfiguration,
};
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, Component};
use karmada_interpreter::{InterpretError, InterpreterLayer, Operation, Replicas};
use karmada_interpreter::{Interpreter, InterpreterOptions, ThirdParty};
use karmada_luavm::{Customizations, Limits, ScriptError};
use serde_json::Value;

use lariat::events::{EventRecorder, EventSink, EventType};

/// The Events' source component for script failures reported on a customization.
const REPORTER: &str = "resource-interpreter";

/// An interpreter with `options` whose customizations follow the control plane's
/// ResourceInterpreterCustomizations. Until their cache has synced (or when it cannot be made),
/// only the third-party and native rules apply, as in Karmada. Script failures are reported as
/// Events into `events`.
pub fn interpreter(
    control_plane: &lariat::Cluster,
    events: &EventSink,
    options: InterpreterOptions,
) -> Interpreter {
    let third_party = Arc::new(ThirdParty::new(options.clone()));
    front_layers(control_plane, events, options).with_layer(third_party)
}

/// The native rules with the customizations and webhooks layers in front (whichever can be made).
fn front_layers(
    control_plane: &lariat::Cluster,
    events: &EventSink,
    options: InterpreterOptions,
) -> Interpreter {
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
    let customizations = Customizations::new(source, limits);
    let customized = match tokio::runtime::Handle::try_current() {
        Ok(_) => {
            let events = events.recorder(REPORTER);
            native.with_layer(Arc::new(Reported {
                inner: customizations,
                events,
            }))
        }
        // No runtime to write Events from: failures reach the interpreted objects only.
        Err(_) => native.with_layer(Arc::new(customizations)),
    };
    let hooks = match control_plane
        .caches()
        .for_kind::<ResourceInterpreterWebhookConfiguration>()
    {
        Ok(hooks) => hooks,
        Err(e) => {
            tracing::warn!(error = %e, "no ResourceInterpreterWebhookConfiguration cache; interpreter webhooks are not called");
            return customized;
        }
    };
    hooks.start();
    let source = Box::new(move || hooks.has_synced().then(|| hooks.store().list()));
    let config = control_plane.clients().config().clone();
    customized.with_layer(Arc::new(webhook::Webhooks::new(source, Some(config))))
}

/// Checks each ResourceInterpreterCustomization when it is created or changed (and once per
/// version after a start): every script is loaded as a call would load it (syntax, top level,
/// the function), and one that does not load is reported at once with a Warning Event
/// `InterpreterScriptFailed` on the customization, naming the field and the cause — before any
/// object of the target kind needs it. An operation that another customization of the same
/// target kind defines too (dependencies excepted: those add up) is reported with a Warning
/// Event `InterpreterCustomizationConflict` naming the other and the one whose script is used:
/// the first by name. Karmada's webhook refuses both at admission (the later of two conflicting
/// customizations); without a webhook they are accepted, and this is how their author hears
/// about it. Runs until `cancel` fires; the detector starts it, so it runs once per
/// controller-manager.
pub fn check_customizations(
    control_plane: &lariat::Cluster,
    events: &EventSink,
    options: InterpreterOptions,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(), crate::error::FrameworkError> {
    let controller =
        crate::handlers::shared_controller::<ResourceInterpreterCustomization>(control_plane)?;
    let checker = Checker {
        store: controller.store(),
        events: Arc::new(events.recorder(REPORTER)),
        limits: Limits {
            options,
            ..Limits::default()
        },
        checked: Arc::new(std::sync::Mutex::new(std::collections::HashMap::new())),
    };
    controller.register_handler("customization-check", cancel.clone(), move |key, object| {
        let checker = checker.clone();
        async move { checker.check(key, object).await }
    });
    Ok(())
}

/// What [`check_customizations`] keeps: the customizations, the recorder and the version of
/// each customization already checked (a resync or restart of the watch checks nothing twice).
#[derive(Clone)]
struct Checker {
    store: lariat::Store<ResourceInterpreterCustomization>,
    events: Arc<EventRecorder>,
    limits: Limits,
    checked: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
}

impl Checker {
    async fn check(
        &self,
        key: lariat::ObjectKey,
        object: Option<Arc<ResourceInterpreterCustomization>>,
    ) -> lariat::HandlerResult<ResourceInterpreterCustomization> {
        let name = key.name().to_owned();
        let Some(customization) = object else {
            self.lock_checked().remove(&name);
            return lariat::HandlerResult::Success;
        };
        let version = customization
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        if self.lock_checked().get(&name) == Some(&version) {
            return lariat::HandlerResult::Success;
        }
        let limits = self.limits.clone();
        let loaded = Arc::clone(&customization);
        let errors = match tokio::task::spawn_blocking(move || {
            karmada_luavm::check_customization(&loaded, &limits)
        })
        .await
        {
            Ok(errors) => errors,
            Err(e) => {
                return lariat::HandlerResult::Error(
                    format!("checking the scripts of ResourceInterpreterCustomization {name}: {e}")
                        .into(),
                );
            }
        };
        let target = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(format!(
                "{}/{}",
                karmada_apis::config::GROUP,
                karmada_apis::config::v1alpha1::VERSION
            )),
            kind: Some("ResourceInterpreterCustomization".into()),
            name: Some(name.clone()),
            uid: customization.metadata.uid.clone(),
            ..Default::default()
        };
        for error in &errors {
            tracing::warn!(customization = %name, error = %error, "a customization script does not load");
            self.events.record_now(
                &target,
                EventType::Warning,
                karmada_apis::well_known::event_reasons::INTERPRETER_SCRIPT_FAILED,
                format!("the script does not load: {error}"),
            );
        }
        let target_kind = &customization.spec.target;
        for conflict in karmada_luavm::conflicts(&customization, &self.store.list()) {
            let operation = conflict.operation.karmada_name();
            let outcome = if conflict.used == name {
                format!(
                    "this one's script is used (the first by name), {}'s is ignored",
                    conflict.other
                )
            } else {
                format!(
                    "{}'s script is used (the first by name), this one's is ignored",
                    conflict.used
                )
            };
            tracing::warn!(customization = %name, other = %conflict.other, operation, "two customizations define one operation");
            self.events.record_now(
                &target,
                EventType::Warning,
                karmada_apis::well_known::event_reasons::INTERPRETER_CUSTOMIZATION_CONFLICT,
                format!(
                    "conflicting with InterpreterOperation({operation}) of existing ResourceInterpreterCustomization({}): both customize {} {}; {outcome}",
                    conflict.other, target_kind.api_version, target_kind.kind
                ),
            );
        }
        self.lock_checked().insert(name, version);
        lariat::HandlerResult::Success
    }

    fn lock_checked(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, String>> {
        self.checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `resource_interpreter_script_failures_total{customization,operation,reason}`: failed calls
/// of ResourceInterpreterCustomization scripts, by customization, operation field
/// (`replicaResource`, ...) and reason (`timeout`, `memory`, `suspended`, `syntax`,
/// `binary_chunk`, `runtime`, `result`, `missing_function`, `busy`, `vm`). karmada-rs's own.
fn script_failures() -> Option<&'static prometheus::IntCounterVec> {
    static COUNTER: std::sync::OnceLock<Option<prometheus::IntCounterVec>> =
        std::sync::OnceLock::new();
    COUNTER
        .get_or_init(|| {
            let counter = prometheus::IntCounterVec::new(
                prometheus::Opts::new(
                    "resource_interpreter_script_failures_total",
                    "Number of failed calls of ResourceInterpreterCustomization scripts. 'reason' is timeout or memory when a limit stopped the script, suspended when the call failed at once because the script kept overrunning its limits, else the kind of error.",
                ),
                &["customization", "operation", "reason"],
            )
            .map_err(|e| tracing::error!(error = %e, "invalid interpreter metric definition"))
            .ok()?;
            if let Err(e) = lariat::metrics::registry().register(Box::new(counter.clone())) {
                tracing::warn!(error = %e, "interpreter metric not registered");
            }
            Some(counter)
        })
        .as_ref()
}

/// The customizations layer, reporting each script failure with a Warning Event on the
/// ResourceInterpreterCustomization itself (besides the error the interpreted object's
/// controller reports). The recorder's writer ends with the layer.
#[derive(Debug)]
struct Reported {
    inner: Customizations,
    events: EventRecorder,
}

impl Reported {
    fn report<T>(
        &self,
        answer: Option<karmada_interpreter::Result<T>>,
    ) -> Option<karmada_interpreter::Result<T>> {
        if let Some(Err(e)) = &answer {
            self.report_error(e);
        }
        answer
    }

    fn report_error(&self, error: &InterpretError) {
        let karmada_interpreter::Cause::Layer(cause) = error.cause() else {
            return;
        };
        let Some(script) = cause.downcast_ref::<ScriptError>() else {
            return;
        };
        let Some(name) = karmada_luavm::customization_of(script) else {
            return;
        };
        let target = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(format!(
                "{}/{}",
                karmada_apis::config::GROUP,
                karmada_apis::config::v1alpha1::VERSION
            )),
            kind: Some("ResourceInterpreterCustomization".into()),
            name: Some(name.to_owned()),
            ..Default::default()
        };
        let object = error.object();
        let operation = karmada_luavm::operation_of(script).unwrap_or_default();
        if let Some(m) = script_failures() {
            m.with_label_values(&[name, operation, script.kind()]).inc();
        }
        use karmada_apis::well_known::event_reasons as reasons;
        let reason = match script {
            ScriptError::Suspended { .. } => reasons::INTERPRETER_SCRIPT_SUSPENDED,
            ScriptError::Timeout { .. } | ScriptError::Memory { .. } => {
                reasons::INTERPRETER_SCRIPT_LIMIT_EXCEEDED
            }
            _ => reasons::INTERPRETER_SCRIPT_FAILED,
        };
        self.events.record_now(
            &target,
            EventType::Warning,
            reason,
            format!(
                "interpreting {} {}/{}: {script}",
                object.kind, object.namespace, object.name
            ),
        );
    }
}

impl InterpreterLayer for Reported {
    fn hook_enabled(&self, api_version: &str, kind: &str, operation: Operation) -> bool {
        self.inner.hook_enabled(api_version, kind, operation)
    }
    fn get_replicas(&self, object: &Value) -> Option<karmada_interpreter::Result<Replicas>> {
        self.report(self.inner.get_replicas(object))
    }
    fn revise_replica(
        &self,
        object: &Value,
        replicas: i64,
    ) -> Option<karmada_interpreter::Result<Value>> {
        self.report(self.inner.revise_replica(object, replicas))
    }
    fn retain(
        &self,
        desired: &Value,
        observed: &Value,
    ) -> Option<karmada_interpreter::Result<Value>> {
        self.report(self.inner.retain(desired, observed))
    }
    fn reflect_status(&self, object: &Value) -> Option<karmada_interpreter::Result<Value>> {
        self.report(self.inner.reflect_status(object))
    }
    fn interpret_health(&self, object: &Value) -> Option<karmada_interpreter::Result<bool>> {
        self.report(self.inner.interpret_health(object))
    }
    fn aggregate_status(
        &self,
        template: &Value,
        items: &[AggregatedStatusItem],
    ) -> Option<karmada_interpreter::Result<Value>> {
        self.report(self.inner.aggregate_status(template, items))
    }
    fn get_dependencies(
        &self,
        object: &Value,
    ) -> Option<
        karmada_interpreter::Result<Vec<karmada_apis::config::v1alpha1::DependentObjectReference>>,
    > {
        self.report(self.inner.get_dependencies(object))
    }
    fn get_components(
        &self,
        object: &Value,
    ) -> Option<karmada_interpreter::Result<Vec<Component>>> {
        self.report(self.inner.get_components(object))
    }
}
