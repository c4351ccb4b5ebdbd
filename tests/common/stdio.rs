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
        let mut child = Command::new(agentfix_bin())
            .arg("--stdio")
            .current_dir(root)
            .env_remove("ANTHROPIC_API_KEY")
            .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
            .env("AGENTFIX_TRANSCRIPTS", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
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
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
