//! A raw LSP client over the server's stdio: bytes in, messages out, for
//! tests that need to send what a well-behaved editor never would, or to
//! watch the process itself (its peak memory).

use std::io::Write;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

use super::agentfix_bin;

pub struct Server {
    child: Child,
    pub stdin: ChildStdin,
    stdout: agentfix_lsp_framing::SyncFrames<ChildStdout>,
    /// Messages read before the awaited response.
    pub seen: Vec<Value>,
}

impl Server {
    pub fn start(root: &std::path::Path) -> Server {
        Self::start_with(root, &[])
    }

    /// [`Server::start`] with more variables in the server's environment
    /// (a provider's base URL and key, for a run against the mock model).
    pub fn start_with(root: &std::path::Path, env: &[(&str, &str)]) -> Server {
        let mut command = Command::new(agentfix_bin());
        command
            .arg("--stdio")
            .current_dir(root)
            .env_remove("ANTHROPIC_API_KEY")
            .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
            .env("AGENTFIX_TRANSCRIPTS", "0")
            .envs(env.iter().copied());
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = super::server_frames(child.stdout.take().unwrap());
        Server { child, stdin, stdout, seen: Vec::new() }
    }

    pub fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap();
        agentfix_lsp_framing::write_frame(&mut self.stdin, &body).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Reads messages until the response to `id`.
    pub fn response(&mut self, id: i64) -> Value {
        loop {
            let v = match super::read_json(&mut self.stdout) {
                Ok(Some(v)) => v,
                Ok(None) => panic!("the server closed stdout"),
                Err(e) => panic!("the server wrote malformed LSP output: {e}"),
            };
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
            self.seen.push(v);
        }
    }

    pub fn peak_kib(&self) -> u64 {
        super::rss::peak_kib(self.child.id()).unwrap()
    }

    /// Sets the process's peak RSS back to its RSS now (Linux's
    /// `clear_refs` 5), so that a later [`Server::peak_kib`] is the peak of
    /// what came after; `false` where the kernel does not allow it.
    pub fn reset_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").is_ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
