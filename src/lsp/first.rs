//! The first message, read (and when it is `initialize`, answered) before
//! the server starts.
//!
//! The answer to `initialize` depends on its params alone
//! ([`server::initialize_answer`]), and a client sends nothing else until
//! it has it. So the process reads the first message before logging, the
//! async runtime, the LSP service and their threads exist; when it is an
//! `initialize` the service would accept, it is answered at once, from the
//! main thread, and the server starts once the client has sent its next
//! message (`initialized`), so that starting its threads does not compete
//! with the client waking up to read the answer.
//! The message then goes to the service like any other (it sets up the
//! session and tower-lsp's state), and the service's own answer, the same,
//! is not sent again (see [`transport::Input`]). Anything else first (another
//! request, a broken frame, params the service would refuse) is left to
//! the service to answer, as before.

use std::io::Write;

use tower_lsp_server::jsonrpc::Response;
use tower_lsp_server::ls_types::InitializeParams;

use super::server;
use super::transport::{self, Incoming};

/// Reads the first message of `input` and, when it is an `initialize` the
/// service would answer, writes that answer to `output` (one write); the
/// reader serves what this returns.
pub(super) fn answer_first<I: std::io::Read>(input: I, output: &mut impl Write) -> transport::Input<I> {
    transport::Input::answered_first(input, output, |body| {
        // A panic here must not cost the client its answer: the service then answers.
        std::panic::catch_unwind(|| initialize_answer(body)).ok().flatten()
    })
}

/// The body of the answer to `body`, when it is an `initialize` request
/// that the service would answer with a result.
fn initialize_answer(body: &[u8]) -> Option<Vec<u8>> {
    let Ok(Incoming::Request(request)) = transport::decode(body.to_vec(), None) else { return None };
    if request.method() != "initialize" {
        return None;
    }
    let (_, id, params) = request.into_parts();
    let params: InitializeParams = serde_json::from_value(params?).ok()?;
    let (result, _) = server::initialize_answer(&params).ok()?;
    serde_json::to_vec(&Response::from_ok(id?, serde_json::to_value(result).ok()?)).ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};
    use tower::Service;
    use tower_lsp_server::LspService;
    use tower_lsp_server::jsonrpc::Request;

    use super::*;
    use crate::lsp::session::Session;

    fn initialize(options: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
            "processId": null,
            "capabilities": {"general": {"positionEncodings": ["utf-32"]}},
            "workspaceFolders": [{"uri": "file:///tmp/%E5%B7%A5%E4%BD%9C%20%F0%9F%A6%80", "name": "ws"}],
            "clientInfo": {"name": "Neovim"},
            "initializationOptions": options,
        }})
    }

    /// One message as the wire has it (spelled out here: the framer is the transport's).
    fn wire(body: &[u8]) -> Vec<u8> {
        [format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(), body].concat()
    }

    fn framed(messages: &[Value]) -> Vec<u8> {
        messages.iter().flat_map(|m| wire(&serde_json::to_vec(m).unwrap())).collect()
    }

    /// What the service itself answers to `request`.
    fn service_answer(request: &Value) -> Value {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let session = Arc::new(Session::new());
            let (mut service, _socket) =
                LspService::build(|client| server::Backend::new(client, session.clone())).finish();
            let request: Request = serde_json::from_value(request.clone()).unwrap();
            let answer = service.call(request).await.unwrap().unwrap();
            serde_json::to_value(answer).unwrap()
        })
    }

    #[test]
    fn initialize_is_answered_with_no_runtime_and_as_the_service_answers_it() {
        // No async runtime, no service: the answer is written before `answer_first` returns.
        let request = initialize(json!({"maxTurns": 3}));
        let mut out = Vec::new();
        let input = framed(&[request.clone(), json!({"jsonrpc": "2.0", "method": "initialized", "params": {}})]);
        let started = answer_first(&input[..], &mut out);
        let body = out.split_at(out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4).1;
        let early: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(out, wire(body), "one message");
        assert_eq!(early["result"]["capabilities"]["positionEncoding"], "utf-32", "{early}");
        assert_eq!(early, service_answer(&request));
        // The reader gets the message again, marked answered, and `initialized`, read ahead.
        assert_eq!(started.first_answered(), Some((true, 2)));
    }

    #[test]
    fn anything_but_an_initialize_the_service_accepts_is_left_to_the_service() {
        let cases = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}),
            json!({"jsonrpc": "2.0", "method": "initialize", "params": {"capabilities": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": 5}}),
            initialize(json!({"maxTurns": "many"})),
        ];
        for case in cases {
            let mut out = Vec::new();
            let input = framed(std::slice::from_ref(&case));
            let started = answer_first(&input[..], &mut out);
            assert_eq!(started.first_answered(), Some((false, 1)), "{case}");
            assert!(out.is_empty(), "{case}: {}", String::from_utf8_lossy(&out));
        }
        let mut out = Vec::new();
        answer_first(&b"Content-Length: 3\r\n\r\n{no"[..], &mut out);
        answer_first(&b""[..], &mut out);
        assert!(out.is_empty());
    }

    /// stdin as a pipe the test writes to, one chunk per message.
    struct Pipe(std::sync::mpsc::Receiver<Vec<u8>>, Vec<u8>);

    impl std::io::Read for Pipe {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.1.is_empty() {
                self.1 = self.0.recv().unwrap_or_default();
            }
            let n = buf.len().min(self.1.len());
            buf[..n].copy_from_slice(&self.1[..n]);
            self.1.drain(..n);
            Ok(n)
        }
    }

    /// stdout as a channel of writes.
    struct Sent(std::sync::mpsc::Sender<Vec<u8>>);

    impl Write for Sent {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.0.send(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_server_starts_after_the_client_has_the_answer_and_sent_its_next_message() {
        let (to_stdin, stdin) = std::sync::mpsc::channel();
        let (stdout, from_stdout) = std::sync::mpsc::channel();
        to_stdin.send(framed(&[initialize(json!({}))])).unwrap();
        let reading = std::thread::spawn(move || answer_first(Pipe(stdin, Vec::new()), &mut Sent(stdout)));
        // The answer comes while `answer_first` still waits for the next message.
        let answer = from_stdout.recv_timeout(std::time::Duration::from_secs(10)).expect("the answer");
        assert!(String::from_utf8_lossy(&answer).contains("\"result\""), "{}", String::from_utf8_lossy(&answer));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!reading.is_finished(), "returned before the client's next message");
        to_stdin.send(framed(&[json!({"jsonrpc": "2.0", "method": "initialized", "params": {}})])).unwrap();
        let input = reading.join().unwrap();
        assert_eq!(input.first_answered(), Some((true, 2)));
        // A client that sends nothing more (its input ends) starts the server too.
        let (to_stdin, stdin) = std::sync::mpsc::channel();
        to_stdin.send(framed(&[initialize(json!({}))])).unwrap();
        drop(to_stdin);
        let input = answer_first(Pipe(stdin, Vec::new()), &mut Vec::new());
        assert_eq!(input.first_answered(), Some((true, 1)));
    }
}
