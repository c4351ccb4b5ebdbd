//! agentfix: a language server that puts a coding-agent loop behind one code
//! action. Modules in reading order, lowest layer first; see ARCHITECTURE.md.

pub mod agent;
pub mod cli;
pub mod config;
pub mod diagnostic;
pub mod documents;
pub(crate) mod downstream;
pub mod fix;
pub mod follow_up;
pub(crate) mod instructions;
pub mod lsp;
pub mod mcp;
pub mod model;
pub mod position;
pub mod pricing;
pub mod providers;
pub(crate) mod replay;
pub mod sandbox;
pub(crate) mod secrets;
pub mod tools;
pub(crate) mod transcript;
pub mod workspace;
