//! The tools section: the size limit of one tool result by tool name
//! (`toolOutputLimits`).

use super::Source;
use super::layers::{Layers, pick};

/// What the tools may return.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolsConfig {
    /// Result size limits in bytes by tool name (`toolOutputLimits`).
    pub output_limits: std::collections::BTreeMap<String, usize>,
}

impl Layers<'_> {
    pub(super) fn tools(&mut self) -> ToolsConfig {
        let l = self;
        ToolsConfig { output_limits: pick!(l, "toolOutputLimits", tool_output_limits, None, Default::default()) }
    }
}
