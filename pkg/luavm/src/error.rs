//! Errors of the Lua VM: each names the script (customization and operation) and the cause.

use std::time::Duration;

/// Why running a customization's script failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ScriptError {
    /// The script does not compile.
    #[error("{script}: syntax error: {message}")]
    Syntax {
        /// Which script.
        script: String,
        /// The compiler's message.
        message: String,
    },
    /// The script does not define the operation's function.
    #[error("{script}: {message}")]
    MissingFunction {
        /// Which script.
        script: String,
        /// What is missing.
        message: String,
    },
    /// The script raised an error.
    #[error("{script}: {message}")]
    Runtime {
        /// Which script.
        script: String,
        /// The error.
        message: String,
    },
    /// The script ran past the time limit (an endless loop) and was stopped.
    #[error("{script}: stopped after running longer than {limit:?} (endless loop?)")]
    Timeout {
        /// Which script.
        script: String,
        /// The limit.
        limit: Duration,
    },
    /// The script needed more memory than allowed and was stopped.
    #[error("{script}: stopped after using more than {limit} bytes of memory")]
    Memory {
        /// Which script.
        script: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// The function returned something the operation cannot use.
    #[error("{script}: {function} returned {message}")]
    Result {
        /// Which script.
        script: String,
        /// The function.
        function: &'static str,
        /// What is wrong with the result.
        message: String,
    },
    /// The script is a precompiled (binary) chunk: only source text is loaded, because Lua
    /// 5.1's binary loader trusts its input.
    #[error(
        "{script}: the script is a precompiled binary Lua chunk; only Lua source text is accepted"
    )]
    BinaryChunk {
        /// Which script.
        script: String,
    },
    /// The script overran its time or memory limit on several calls in a row and is
    /// suspended: calls fail at once until the customization changes (one call retries it
    /// at full cost now and then).
    #[error(
        "{script}: suspended after {overruns} calls in a row stopped by the time or memory limit; calls fail at once until the customization changes (one call retries every {}s)",
        crate::script::SUSPENDED_FOR.as_secs()
    )]
    Suspended {
        /// Which script.
        script: String,
        /// Consecutive calls stopped by a limit.
        overruns: u32,
        /// When one call may try again.
        retry_in: Duration,
    },
    /// Every Lua thread stayed busy while the call waited to start; it did not run.
    #[error("{script}: not run: every Lua thread stayed busy for {waited:?}")]
    Busy {
        /// Which script.
        script: String,
        /// How long the call waited.
        waited: Duration,
    },
    /// A Lua VM could not be set up.
    #[error("{script}: cannot start a Lua VM: {message}")]
    Vm {
        /// Which script.
        script: String,
        /// Why.
        message: String,
    },
}

impl ScriptError {
    /// A short, stable name of the kind of failure (metric label): `syntax`, `binary_chunk`,
    /// `missing_function`, `runtime`, `timeout`, `memory`, `result`, `suspended`, `busy`, `vm`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Syntax { .. } => "syntax",
            Self::BinaryChunk { .. } => "binary_chunk",
            Self::MissingFunction { .. } => "missing_function",
            Self::Runtime { .. } => "runtime",
            Self::Timeout { .. } => "timeout",
            Self::Memory { .. } => "memory",
            Self::Result { .. } => "result",
            Self::Suspended { .. } => "suspended",
            Self::Busy { .. } => "busy",
            Self::Vm { .. } => "vm",
        }
    }

    /// Whether the script was stopped by (or suspended for overrunning) its time or memory
    /// limit.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            Self::Timeout { .. } | Self::Memory { .. } | Self::Suspended { .. }
        )
    }

    /// Which script failed (`ResourceInterpreterCustomization <name> <operation field>`).
    pub fn script(&self) -> &str {
        match self {
            Self::Syntax { script, .. }
            | Self::MissingFunction { script, .. }
            | Self::Runtime { script, .. }
            | Self::Timeout { script, .. }
            | Self::Memory { script, .. }
            | Self::Result { script, .. }
            | Self::Vm { script, .. }
            | Self::BinaryChunk { script }
            | Self::Suspended { script, .. }
            | Self::Busy { script, .. } => script,
        }
    }
}
