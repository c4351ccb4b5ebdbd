//! A raw LSP client over the server's stdio: bytes in, messages out, for
//! tests that need to send what a well-behaved editor never would, or to
//! watch the process itself (its peak memory).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

use super::agentfix_bin;

pub struct Server {
    child: Child,
    pub stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
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
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server { child, stdin, stdout, seen: Vec::new() }
    }

    pub fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap();
        write!(self.stdin, "Content-Length: {}\r\n\r\n", body.len()).unwrap();
        self.stdin.write_all(&body).unwrap();
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
            let mut len = 0;
            loop {
                let mut line = String::new();
                assert!(self.stdout.read_line(&mut line).unwrap() > 0, "the server closed stdout");
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some(v) = line.strip_prefix("Content-Length: ") {
                    len = v.parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            self.stdout.read_exact(&mut body).unwrap();
            let v: Value = serde_json::from_slice(&body).unwrap();
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
