//! The integration and end-to-end tests, one module per file, linked into one test binary.
//!
//! Why one binary: each file used to be its own test binary, and each linked the whole product (the
//! controllers, kube, the test support): 53 debug links of the same code, most of a cold build's time
//! and of its disk. `make test`'s runner (`hack/test-runner`) still runs each module as its own process,
//! one job per module (`cargo test -p karmada-e2e --test integration drift::` runs one by hand), so the
//! modules keep what separate binaries gave them: their own statics, environment variables and
//! processes, and `// test-runner: alone` in a module's leading comments still runs it by itself.
//!
//! The files that need Karmada's Go binaries (`--features karmada-go`) stay binaries of their own,
//! next to this folder.

mod agent_deployments;
mod agent_identity;
mod bench_smoke;
mod chart;
mod chart_monitoring;
mod cluster_api;
mod clusters;
mod controller_manager_flags;
mod controller_manager_leader;
mod controller_manager_probes;
mod controller_manager_readyz;
mod controller_manager_restart;
mod crds;
mod cron_federated_hpa;
mod deletion_protection;
mod dependencies;
mod drift;
mod drift_pull;
mod e2e_quickstart;
mod events;
mod failover;
mod faults_host;
mod faults_leader;
mod faults_members;
mod federated_hpa;
mod federated_resource_quota;
mod hostile_members;
mod image;
mod interpreter_customization;
mod karmadactl_commands;
mod karmadactl_daily;
mod kubectl_apply;
mod lazy_activation;
mod local_up;
mod lua_hostile;
mod member_proxy;
mod multicluster_service;
mod multiple_pod_templates;
mod profiling;
mod propagation_detector;
mod propagation_status;
mod propagation_works;
mod pull_mode;
mod pull_register;
mod remedy;
mod scheduler_metrics;
mod scheduler_preemption;
mod scheduler_priority;
mod service_export_import;
mod staged_rollout;
mod thirdparty_workloads;
mod unified_auth;
mod workload_affinity;
mod workload_rebalancer;
