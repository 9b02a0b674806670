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
    /// Which script failed (`ResourceInterpreterCustomization <name> <operation field>`).
    pub fn script(&self) -> &str {
        match self {
            Self::Syntax { script, .. }
            | Self::MissingFunction { script, .. }
            | Self::Runtime { script, .. }
            | Self::Timeout { script, .. }
            | Self::Memory { script, .. }
            | Self::Result { script, .. }
            | Self::Vm { script, .. } => script,
        }
    }
}
