//! The flags every Karmada process shares and how their values are read: the `Logs flags` section
//! (klog's and component-base's flags), a [`Checker`] that reports every bad value at once, Go's
//! boolean syntax and Kubernetes' `--some_flag` spelling.

use std::time::Duration;

use clap::Args;
use lariat::runtime::leader_election::{TimingProblem, timing_problems};
use lariat::runtime::logging::LogFormat;
use lariat::runtime::{BindAddress, GoDuration};

/// `Logs flags` section.
#[derive(Args, Debug)]
#[command(next_help_heading = "Logs flags")]
pub struct LogFlags {
    /// Log verbosity, klog style: 0-3 info, 4-5 adds debug, 6 and up adds trace.
    #[arg(
        short = 'v',
        long = "v",
        value_name = "Level",
        default_value = "0",
        allow_hyphen_values = true
    )]
    pub v: String,
    /// Log format: text (stderr) or json (stdout).
    #[arg(long = "logging-format", value_name = "format", default_value = "text")]
    pub logging_format: String,
    /// Maximum time between log flushes (logs are written unbuffered: no effect).
    #[arg(
        long = "log-flush-frequency",
        value_name = "duration",
        default_value = "5s"
    )]
    pub log_flush_frequency: String,
    /// Per-file verbosity (pattern=N,...); accepted for compatibility, no effect.
    #[arg(long = "vmodule", value_name = "pattern=N,...")]
    pub vmodule: Option<String>,
    /// klog: add the file directory to the header (accepted for compatibility, no effect).
    #[arg(long = "add-dir-header", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub add_dir_header: Option<String>,
    /// klog: log to stderr as well as files (accepted for compatibility, no effect).
    #[arg(long = "alsologtostderr", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub alsologtostderr: Option<String>,
    /// klog: emit a stack trace at file:N (accepted for compatibility, no effect).
    #[arg(long = "log-backtrace-at", value_name = "file:N")]
    pub log_backtrace_at: Option<String>,
    /// klog: directory for log files (no effect: logs always go to stderr/stdout).
    #[arg(long = "log-dir", value_name = "dir")]
    pub log_dir: Option<String>,
    /// klog: log file (no effect: logs always go to stderr/stdout).
    #[arg(long = "log-file", value_name = "file")]
    pub log_file: Option<String>,
    /// klog: maximum log file size in MB (accepted for compatibility, no effect).
    #[arg(long = "log-file-max-size", value_name = "uint")]
    pub log_file_max_size: Option<String>,
    /// klog: log to standard error instead of files (always the case here: no effect).
    #[arg(long = "logtostderr", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub logtostderr: Option<String>,
    /// klog: write each line only at its own severity (accepted for compatibility, no effect).
    #[arg(long = "one-output", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub one_output: Option<String>,
    /// klog: omit header prefixes (accepted for compatibility, no effect).
    #[arg(long = "skip-headers", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub skip_headers: Option<String>,
    /// klog: omit headers in log files (accepted for compatibility, no effect).
    #[arg(long = "skip-log-headers", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub skip_log_headers: Option<String>,
    /// klog: severity threshold for stderr (accepted for compatibility, no effect).
    #[arg(long = "stderrthreshold", value_name = "severity")]
    pub stderrthreshold: Option<String>,
    /// Split JSON output into stdout (info) and stderr (errors); accepted for compatibility, no effect.
    #[arg(long = "log-json-split-stream", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub log_json_split_stream: Option<String>,
    /// Buffer size for split JSON info output; accepted for compatibility, no effect.
    #[arg(long = "log-json-info-buffer-size", value_name = "quantity")]
    pub log_json_info_buffer_size: Option<String>,
    /// Split text output into stdout (info) and stderr (errors); accepted for compatibility, no effect.
    #[arg(long = "log-text-split-stream", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub log_text_split_stream: Option<String>,
    /// Buffer size for split text info output; accepted for compatibility, no effect.
    #[arg(long = "log-text-info-buffer-size", value_name = "quantity")]
    pub log_text_info_buffer_size: Option<String>,
}

/// Collects every problem of a command line (one line each, naming the flag) while reading the
/// flags' values, so a process reports them all at once.
#[derive(Debug, Default)]
pub struct Checker {
    /// The problems found so far.
    pub problems: Vec<String>,
}

impl Checker {
    /// Records that `value` of `--flag` is wrong, and why.
    pub fn bad(&mut self, flag: &str, value: &str, reason: impl std::fmt::Display) {
        self.problems
            .push(format!("invalid value {value:?} for --{flag}: {reason}"));
    }

    /// A Go duration.
    pub fn duration(&mut self, flag: &str, value: &str) -> Option<GoDuration> {
        match GoDuration::parse(value) {
            Ok(d) => Some(d),
            Err(_) => {
                self.bad(
                    flag,
                    value,
                    "not a duration (use Go's syntax, e.g. 300ms, 15s, 1m30s)",
                );
                None
            }
        }
    }

    /// Must be > 0.
    pub fn positive_duration(&mut self, flag: &str, value: &str) -> Duration {
        match self.duration(flag, value) {
            Some(d) if d.is_positive() => d.to_std(),
            Some(_) => {
                self.bad(flag, value, "must be greater than 0");
                Duration::ZERO
            }
            None => Duration::ZERO,
        }
    }

    /// Must be ≥ 0.
    pub fn non_negative_duration(&mut self, flag: &str, value: &str) -> Duration {
        match self.duration(flag, value) {
            Some(d) if !d.is_negative() => d.to_std(),
            Some(_) => {
                self.bad(flag, value, "must not be negative");
                Duration::ZERO
            }
            None => Duration::ZERO,
        }
    }

    /// A Go boolean.
    pub fn boolean(&mut self, flag: &str, value: &str) -> bool {
        parse_go_bool(value).unwrap_or_else(|| {
            self.bad(flag, value, "must be true or false");
            false
        })
    }

    /// A Go boolean, when given.
    pub fn opt_boolean(&mut self, flag: &str, value: &Option<String>) {
        if let Some(v) = value {
            self.boolean(flag, v);
        }
    }

    /// An integer.
    pub fn int(&mut self, flag: &str, value: &str) -> Option<i64> {
        match value.parse::<i64>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.bad(flag, value, "not an integer");
                None
            }
        }
    }

    /// Must be ≥ 1.
    pub fn positive_int(&mut self, flag: &str, value: &str) -> usize {
        match self.int(flag, value) {
            Some(v) if v >= 1 => usize::try_from(v).unwrap_or(usize::MAX),
            Some(_) => {
                self.bad(flag, value, "must be greater than 0");
                1
            }
            None => 1,
        }
    }

    /// A finite number.
    pub fn float(&mut self, flag: &str, value: &str) -> Option<f64> {
        match value.parse::<f64>() {
            Ok(v) if v.is_finite() => Some(v),
            _ => {
                self.bad(flag, value, "not a number");
                None
            }
        }
    }

    /// A bind address (`host:port`, `:port`, or `0` for off).
    pub fn address(&mut self, flag: &str, value: &str) -> BindAddress {
        match BindAddress::parse(value) {
            Ok(a) => a,
            Err(e) => {
                self.bad(flag, value, e);
                BindAddress::Disabled
            }
        }
    }
}

/// A boolean flag value as Go's `strconv.ParseBool` reads it.
pub fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Rewrites `--some_flag` to `--some-flag` (Kubernetes' word-separator normalisation, so klog-style
/// spellings such as `--log_dir` keep working). Values are left alone.
pub fn normalize_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest_are_positional = false;
    for arg in args {
        if rest_are_positional || !arg.starts_with("--") {
            out.push(arg);
            continue;
        }
        if arg == "--" {
            rest_are_positional = true;
            out.push(arg);
            continue;
        }
        match arg.split_once('=') {
            Some((name, value)) => out.push(format!("{}={value}", name.replace('_', "-"))),
            None => out.push(arg.replace('_', "-")),
        }
    }
    out
}

/// The logging settings a process acts on.
#[derive(Debug, Clone, Copy)]
pub struct Logs {
    /// `-v`.
    pub verbosity: u32,
    /// `--logging-format`.
    pub format: LogFormat,
}

/// `-v`, `--logging-format`, and the klog flags that are accepted but only checked for syntax.
pub fn check_logs(c: &mut Checker, l: &LogFlags) -> Logs {
    let verbosity = match l.v.parse::<u32>() {
        Ok(v) => v,
        Err(_) => {
            c.bad("v", &l.v, "must be a non-negative integer");
            0
        }
    };
    let format = match l.logging_format.parse::<LogFormat>() {
        Ok(f) => f,
        Err(e) => {
            c.bad("logging-format", &l.logging_format, e);
            LogFormat::Text
        }
    };
    c.non_negative_duration("log-flush-frequency", &l.log_flush_frequency);
    for (flag, value) in [
        ("add-dir-header", &l.add_dir_header),
        ("alsologtostderr", &l.alsologtostderr),
        ("logtostderr", &l.logtostderr),
        ("one-output", &l.one_output),
        ("skip-headers", &l.skip_headers),
        ("skip-log-headers", &l.skip_log_headers),
        ("log-json-split-stream", &l.log_json_split_stream),
        ("log-text-split-stream", &l.log_text_split_stream),
    ] {
        c.opt_boolean(flag, value);
    }
    Logs { verbosity, format }
}

/// The `--leader-elect*` flags' values, as given.
#[derive(Debug, Clone, Copy)]
pub struct LeaderElectFlags<'a> {
    /// `--leader-elect`.
    pub leader_elect: &'a str,
    /// `--leader-elect-resource-namespace`.
    pub resource_namespace: &'a str,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: &'a str,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: &'a str,
    /// `--leader-elect-retry-period`.
    pub retry_period: &'a str,
}

/// Leader election settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderElectionOptions {
    /// Elect at all.
    pub enabled: bool,
    /// Lease namespace.
    pub namespace: String,
    /// Lease duration.
    pub lease_duration: Duration,
    /// Renew deadline.
    pub renew_deadline: Duration,
    /// Retry period.
    pub retry_period: Duration,
}

/// The `--leader-elect*` flags. The timing relations (lease > renew deadline > 1.2 × retry
/// period) and the namespace are only checked when election is on, as client-go does.
pub fn check_leader_election(c: &mut Checker, g: &LeaderElectFlags<'_>) -> LeaderElectionOptions {
    let enabled = c.boolean("leader-elect", g.leader_elect);
    let durations = [
        ("leader-elect-lease-duration", g.lease_duration),
        ("leader-elect-renew-deadline", g.renew_deadline),
        ("leader-elect-retry-period", g.retry_period),
    ];
    let parsed: Vec<Option<GoDuration>> = durations.iter().map(|(f, v)| c.duration(f, v)).collect();
    let (mut lease, mut renew, mut retry) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    if let [Some(l_d), Some(r_d), Some(p_d)] = parsed[..] {
        lease = l_d.to_std();
        renew = r_d.to_std();
        retry = p_d.to_std();
        if enabled {
            for p in timing_problems(l_d, r_d, p_d) {
                let (flag, value) = match p {
                    TimingProblem::LeaseDurationNotPositive
                    | TimingProblem::LeaseNotAboveRenewDeadline => durations[0],
                    TimingProblem::RenewDeadlineNotPositive
                    | TimingProblem::RenewDeadlineNotAboveRetry => durations[1],
                    TimingProblem::RetryPeriodNotPositive => durations[2],
                };
                let reason = match p {
                    TimingProblem::LeaseNotAboveRenewDeadline => format!(
                        "must be greater than --leader-elect-renew-deadline ({})",
                        g.renew_deadline
                    ),
                    TimingProblem::RenewDeadlineNotAboveRetry => format!(
                        "must be greater than 1.2 × --leader-elect-retry-period ({})",
                        g.retry_period
                    ),
                    other => other.to_string(),
                };
                c.bad(flag, value, reason);
            }
        }
    }
    if enabled && g.resource_namespace.trim().is_empty() {
        c.bad(
            "leader-elect-resource-namespace",
            g.resource_namespace,
            "must not be empty when --leader-elect is on",
        );
    }
    LeaderElectionOptions {
        enabled,
        namespace: g.resource_namespace.to_owned(),
        lease_duration: lease,
        renew_deadline: renew,
        retry_period: retry,
    }
}

/// Karmada's `--controllers` rule: the first entry equal to `name` or `-name` decides; otherwise
/// `*` turns on the controllers not in `disabled_by_default`; otherwise it is off.
pub fn controller_enabled(selection: &[String], name: &str, disabled_by_default: &[&str]) -> bool {
    let mut star = false;
    for item in selection {
        if item == name {
            return true;
        }
        if item.strip_prefix('-') == Some(name) {
            return false;
        }
        if item == "*" {
            star = true;
        }
    }
    star && !disabled_by_default.contains(&name)
}
