//! What can go wrong when asking a language server. The texts are what the
//! model and the user read (tool errors, diagnostics notes), so they name
//! the server and the request in plain words.

use std::path::PathBuf;

/// An error of one query to a downstream server (or of finding one).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DownstreamError {
    /// No language is known for the file's extension.
    #[error("no language server is known for `{}`", .0.display())]
    UnknownLanguage(PathBuf),
    /// The language is known, but no server is configured or on PATH.
    #[error("no language server for {0}: none is configured in `languageServers` and none of the defaults is on PATH")]
    NoServer(String),
    /// The server could not be started, or died and was given up.
    #[error("language server for {language} unavailable: {why}")]
    Unavailable { language: String, why: String },
    /// Spawning the process failed (or its pipes were missing).
    #[error("{0}")]
    Spawn(String),
    /// A request to a server known to be dead.
    #[error("{server} is not running: {why}")]
    NotRunning { server: String, why: String },
    /// No answer in time (the request was cancelled).
    #[error("{server} did not answer `{method}` within {secs} s")]
    Timeout { server: String, method: String, secs: f32 },
    /// The server answered with a JSON-RPC error.
    #[error("{server} failed `{method}`: {message}")]
    ServerError { server: String, method: String, code: i64, message: String },
    /// The server died while the request was pending.
    #[error("{server} failed `{method}`: {why}")]
    Crashed { server: String, method: String, why: String },
    /// The request was dropped without an answer.
    #[error("{server} dropped `{method}`")]
    Dropped { server: String, method: String },
    /// The answer does not have the shape the protocol gives it.
    #[error("{server} sent a malformed answer to `{method}`: {why}")]
    Malformed { server: String, method: String, why: String },
    /// A path that no `file:` URI names.
    #[error("`{}` cannot be named by a URI", .0.display())]
    BadPath(PathBuf),
    /// Diagnostics did not come in time.
    #[error("{server} published no diagnostics within {secs} s")]
    NoDiagnostics { server: String, secs: f32 },
}

impl DownstreamError {
    /// Whether restarting the server may help: it hung.
    pub fn is_timeout(&self) -> bool {
        matches!(self, DownstreamError::Timeout { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_server_and_the_request() {
        let t =
            DownstreamError::Timeout { server: "fake (python)".into(), method: "textDocument/hover".into(), secs: 1.5 };
        assert_eq!(t.to_string(), "fake (python) did not answer `textDocument/hover` within 1.5 s");
        assert!(t.is_timeout());
        let e = DownstreamError::Unavailable { language: "python".into(), why: "it exited".into() };
        assert_eq!(e.to_string(), "language server for python unavailable: it exited");
        assert!(!e.is_timeout());
        assert_eq!(
            DownstreamError::UnknownLanguage("a/Makefile".into()).to_string(),
            "no language server is known for `a/Makefile`"
        );
        let s =
            DownstreamError::ServerError { server: "s".into(), method: "m".into(), code: -32601, message: "no".into() };
        assert_eq!(s.to_string(), "s failed `m`: no");
    }
}
