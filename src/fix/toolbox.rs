//! The run's tools: the standard ones, `run_command` when commands are
//! configured, every result scrubbed of credentials by what it shows.

use std::sync::Arc;

use crate::config::Config;
use crate::tools::{Approval, Approver, CommandSpec, RunCommand, Tool, ToolContext, ToolSet, Toolbox};

/// The tools, with credentials scrubbed from every result before the model
/// sees it, by what the result shows (see `secrets`' doc):
///
/// - the workspace's files (read_file, grep, list_files, the symbol tools,
///   the regions edit_file and write_file show): the exact key and the
///   high-confidence shapes ([`Redactor::redact_file_text`]), so that
///   `token = "…"` fixtures and `password: …` settings reach the model as
///   they are and it can quote them back in an edit;
/// - everything else (run_command, diagnostics, MCP tools, a tool added
///   later): [`Redactor::redact`], every shape. A command that prints
///   `~/.ssh/id_rsa` or its environment, or an MCP server that returns a
///   config, must not hand the model the credentials in it.
///
/// [`Redactor::redact_file_text`]: crate::secrets::Redactor::redact_file_text
/// [`Redactor::redact`]: crate::secrets::Redactor::redact
pub(super) struct KeyScrubbed<'a> {
    inner: &'a dyn ToolSet,
    redactor: crate::secrets::Redactor,
}

/// The tools whose results show the workspace's files.
const FILE_TOOLS: &[&str] = &[
    crate::tools::ReadFile::NAME,
    crate::tools::Grep::NAME,
    crate::tools::ListFiles::NAME,
    crate::tools::EditFile::NAME,
    crate::tools::WriteFile::NAME,
    crate::tools::DocumentSymbols::NAME,
    crate::tools::FindDefinition::NAME,
    crate::tools::FindReferences::NAME,
    crate::tools::Hover::NAME,
    crate::tools::WorkspaceSymbols::NAME,
];

impl<'a> KeyScrubbed<'a> {
    pub(super) fn new(inner: &'a dyn ToolSet, redactor: crate::secrets::Redactor) -> Self {
        Self { inner, redactor }
    }
}

#[async_trait::async_trait]
impl ToolSet for KeyScrubbed<'_> {
    fn specs(&self) -> Vec<crate::model::ToolSpec> {
        self.inner.specs()
    }

    async fn call(&self, name: &str, input: &serde_json::Value) -> crate::tools::ToolOutput {
        let mut out = self.inner.call(name, input).await;
        let clean = if FILE_TOOLS.contains(&name) {
            self.redactor.redact_file_text(&out.content)
        } else {
            self.redactor.redact(&out.content)
        };
        if let std::borrow::Cow::Owned(clean) = clean {
            out.content = clean;
        }
        out
    }

    /// The run's changes, as diffs of files.
    fn state(&self) -> Option<String> {
        self.inner.state().map(|s| self.redactor.redact_file_text(&s).into_owned())
    }

    fn stops_before(&self, names: &[&str]) -> bool {
        self.inner.stops_before(names)
    }
}

/// The tools that change files.
const EDIT_TOOLS: &[&str] = &[crate::tools::EditFile::NAME, crate::tools::WriteFile::NAME];

/// The run's tools, with the loop stopped before the model's first edit:
/// best of N from the first edit shares what came before it.
pub(super) struct UntilEdit<'a>(pub &'a dyn ToolSet);

#[async_trait::async_trait]
impl ToolSet for UntilEdit<'_> {
    fn specs(&self) -> Vec<crate::model::ToolSpec> {
        self.0.specs()
    }

    async fn call(&self, name: &str, input: &serde_json::Value) -> crate::tools::ToolOutput {
        self.0.call(name, input).await
    }

    fn state(&self) -> Option<String> {
        self.0.state()
    }

    fn stops_before(&self, names: &[&str]) -> bool {
        names.iter().any(|n| EDIT_TOOLS.contains(n))
    }
}

/// `commands.autoApprove`: every configured command may run.
struct AutoApprove;

#[async_trait::async_trait]
impl Approver for AutoApprove {
    async fn approve(&self, _: &str, _: &[String]) -> Approval {
        Approval::Always
    }
}

/// The run's tools: the standard ones, and `run_command` when commands are
/// configured and someone can approve them (also returned: the check of the
/// proposal runs the verify commands with it, sharing its approvals).
pub(super) fn toolbox(
    config: &Config,
    ctx: ToolContext,
    approver: Option<Arc<dyn Approver>>,
) -> (Toolbox, Option<RunCommand>) {
    let mut toolbox = Toolbox::standard(ctx).with_output_limits(config.tools.output_limits.clone());
    let commands = &config.commands;
    let (false, Some(approver)) = (commands.entries.is_empty(), approver) else { return (toolbox, None) };
    let approver: Arc<dyn Approver> = if commands.auto_approve { Arc::new(AutoApprove) } else { approver };
    let specs = commands
        .entries
        .iter()
        .map(|(name, c)| (name.clone(), CommandSpec { argv: c.argv.clone(), timeout: c.timeout }))
        .collect();
    let sandbox = match commands.sandbox {
        crate::config::commands::CommandSandbox::Off => crate::sandbox::Sandbox::Off,
        crate::config::commands::CommandSandbox::On => {
            let d = crate::sandbox::ResourceLimits::default();
            let l = &commands.limits;
            let limits = crate::sandbox::ResourceLimits {
                address_space_mb: l.address_space_mb.unwrap_or(d.address_space_mb),
                processes: l.processes.unwrap_or(d.processes),
                file_size_mb: l.file_size_mb.unwrap_or(d.file_size_mb),
                cpu_secs: l.cpu_secs.unwrap_or(d.cpu_secs),
                open_files: l.open_files.unwrap_or(d.open_files),
            };
            crate::sandbox::Sandbox::On { network: commands.network, limits }
        }
    };
    let tool = RunCommand::new(specs, approver)
        .with_sandbox(sandbox)
        .with_env_allow(commands.env_allow.clone())
        .with_read_paths(commands.read_paths.clone());
    let names = tool.names().join(", ");
    toolbox.add(tool.clone(), &format!("The configured commands are: {names}."));
    (toolbox, Some(tool))
}

/// Why the configured commands cannot run, when they are configured, the
/// sandbox is on and this system cannot give it (what is missing, how to
/// proceed): said before the run by every front end, not only when the
/// model first tries a command.
pub fn sandbox_refusal(config: &Config) -> Option<String> {
    let commands = &config.commands;
    if commands.entries.is_empty() || commands.sandbox == crate::config::commands::CommandSandbox::Off {
        return None;
    }
    let names: Vec<&str> = commands.entries.keys().map(String::as_str).collect();
    crate::sandbox::availability(crate::sandbox::Sandbox::default(), crate::sandbox::support())
        .err()
        .map(|refusal| format!("the configured commands ({}) cannot run: {refusal}", names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    /// Answers every call, and the state, with the same text.
    struct Prints(String);

    #[async_trait::async_trait]
    impl ToolSet for Prints {
        fn specs(&self) -> Vec<crate::model::ToolSpec> {
            Vec::new()
        }
        async fn call(&self, _: &str, _: &serde_json::Value) -> crate::tools::ToolOutput {
            crate::tools::ToolOutput { content: self.0.clone(), is_error: false, fatal: false }
        }
        fn state(&self) -> Option<String> {
            Some(self.0.clone())
        }
    }

    #[tokio::test]
    async fn tool_results_are_scrubbed_by_what_they_show() {
        // The attack: a command prints `~/.ssh/id_rsa` and a token.
        let key = "the-provider-key-0123";
        let printed = format!(
            "$ sh -c 'cat ~/.ssh/id_rsa; env'\n-----BEGIN OPENSSH PRIVATE KEY-----\n\
             b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n\
             -----END OPENSSH PRIVATE KEY-----\ntoken=t0k3n-value-42\nAPI key {key}\n[exit code 0]"
        );
        let inner = Prints(printed);
        let tools = KeyScrubbed { inner: &inner, redactor: crate::secrets::Redactor::new([key.to_string()]) };
        let full = "$ sh -c 'cat ~/.ssh/id_rsa; env'\n[REDACTED]\ntoken=[REDACTED]\nAPI key [REDACTED]\n[exit code 0]";
        let file =
            "$ sh -c 'cat ~/.ssh/id_rsa; env'\n[REDACTED]\ntoken=t0k3n-value-42\nAPI key [REDACTED]\n[exit code 0]";
        let input = serde_json::json!({});
        for name in ["run_command", "diagnostics", "mcp__github__get_file", "a_tool_added_later"] {
            assert_eq!(tools.call(name, &input).await.content, full, "{name}");
        }
        for name in FILE_TOOLS {
            assert_eq!(tools.call(name, &input).await.content, file, "{name}");
        }
        assert_eq!(tools.state().as_deref(), Some(file));
    }
}
