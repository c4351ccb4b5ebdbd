//! agentfix: a language server that puts a coding-agent loop behind one code
//! action. Modules in dependency order (ARCHITECTURE.md's code map): each
//! group imports only from the groups above it.

// Import nothing of the crate.
pub mod position;
pub mod pricing;
pub mod sandbox;
pub(crate) mod secrets;
pub mod workspace;

pub mod config;
pub mod diagnostic;
pub mod documents;
pub(crate) mod instructions;
pub mod model;

pub mod downstream;
pub mod follow_up;
pub mod providers;

pub mod tools;

pub mod agent;
pub mod mcp;

pub(crate) mod transcript;

pub mod fix;

pub mod acp;
pub mod lsp;
pub(crate) mod replay;

pub mod cli;
