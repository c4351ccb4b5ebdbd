//! `examples/mcp_http_test_server.rs` as a process for the tests
//! (`tests/mcp.rs`, `tests/acp.rs`): started with its bearer token and log,
//! its endpoint read from its first line, killed when dropped.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `examples/mcp_http_test_server.rs`, running until dropped.
pub struct HttpServer {
    child: Child,
    /// Its endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    log: PathBuf,
}

impl HttpServer {
    /// A server that wants `Bearer <token>`, logging to `log`.
    pub fn start(token: &str, log: &Path) -> Self {
        let mut child = Command::new(super::example("mcp_http_test_server"))
            .env("MCP_TEST_TOKEN", token)
            .env("MCP_TEST_LOG", log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the HTTP test server");
        let mut url = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut url).unwrap();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Self { child, url: url.trim().to_string(), log: log.to_path_buf() }
    }

    /// The `auth …` lines of its log.
    pub fn auth(&self) -> Vec<String> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines().filter(|l| l.starts_with("auth ")).map(str::to_string).collect()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
