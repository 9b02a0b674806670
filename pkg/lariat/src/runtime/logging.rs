//! Process logging on `tracing`, with klog's verbosity scale and Kubernetes' `text` / `json` formats.
//!
//! Mapping of klog's `-v` onto tracing levels, for the crates named in [`LogOptions::own_targets`]:
//! `error!`, `warn!` and `info!` always (klog V(0)–V(3)); `debug!` from `-v=4` (where controllers log
//! per-object detail); `trace!` from `-v=6` (where client-go logs requests). Dependencies (kube, hyper,
//! …) stay at `info` below `-v=6`, `debug` at 6–7 and `trace` from 8. `RUST_LOG`, when set, replaces
//! the whole filter. As in Kubernetes, text goes to stderr and JSON to stdout.

use std::fmt;
use std::io::IsTerminal;
use std::str::FromStr;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// Log output format (`--logging-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines on stderr.
    #[default]
    Text,
    /// One JSON object per line on stdout.
    Json,
}

impl LogFormat {
    /// The names accepted by `--logging-format`.
    pub const NAMES: &'static [&'static str] = &["text", "json"];
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!(
                "unsupported log format {other:?} (supported: {})",
                LogFormat::NAMES.join(", ")
            )),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// How to set up logging.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// klog verbosity (`-v`).
    pub verbosity: u32,
    /// Output format.
    pub format: LogFormat,
    /// Crate names (tracing targets) the verbosity applies to fully; other crates are kept quieter.
    pub own_targets: Vec<String>,
}

/// Logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// `RUST_LOG` or the computed filter did not parse.
    #[error("invalid log filter: {0}")]
    Filter(String),
    /// A global subscriber was already installed.
    #[error("logging already initialised: {0}")]
    AlreadySet(String),
}

/// The filter directives for `opts`, ignoring `RUST_LOG`.
pub fn filter_directives(opts: &LogOptions) -> String {
    let own = match opts.verbosity {
        0..=3 => "info",
        4..=5 => "debug",
        _ => "trace",
    };
    let deps = match opts.verbosity {
        0..=5 => "info",
        6..=7 => "debug",
        _ => "trace",
    };
    let mut directives = vec![deps.to_string()];
    for target in &opts.own_targets {
        directives.push(format!("{}={own}", target.replace('-', "_")));
    }
    directives.join(",")
}

/// Installs the global tracing subscriber. Call once, early in `main`.
pub fn init(opts: &LogOptions) -> Result<(), LoggingError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => v,
        _ => filter_directives(opts),
    };
    let filter = EnvFilter::try_new(&filter).map_err(|e| LoggingError::Filter(e.to_string()))?;
    let result = match opts.format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(true)
            .with_span_events(FmtSpan::NONE)
            .try_init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_env_filter(filter)
            .with_writer(std::io::stdout)
            .try_init(),
    };
    result.map_err(|e| LoggingError::AlreadySet(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_to_levels() {
        let mut o = LogOptions {
            verbosity: 2,
            format: LogFormat::Text,
            own_targets: vec!["my-controller".into(), "lariat".into()],
        };
        assert_eq!(filter_directives(&o), "info,my_controller=info,lariat=info");
        o.verbosity = 4;
        assert_eq!(
            filter_directives(&o),
            "info,my_controller=debug,lariat=debug"
        );
        o.verbosity = 8;
        assert_eq!(
            filter_directives(&o),
            "trace,my_controller=trace,lariat=trace"
        );
    }

    #[test]
    fn parses_formats() {
        assert_eq!("json".parse::<LogFormat>().unwrap(), LogFormat::Json);
        assert!("xml".parse::<LogFormat>().is_err());
    }
}
