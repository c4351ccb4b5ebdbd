//! Harness overhead per turn: a whole run against an instant in-process
//! model that still pays the real wire costs (it encodes every request with
//! the Anthropic encoder and decodes a canned JSON response), with real
//! tools over a real overlay. Runs of 10, 20 and 40 turns side by side: the
//! time per turn at 40 turns is the figure the issue asks for (< 1 ms).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agentfix::agent::{self, Limits};
use agentfix::model::{ModelError, ModelRequest, ModelResponse, StreamUpdate};
use agentfix::providers::ModelClient;
use agentfix::providers::anthropic::{decode_response, encode_request};
use agentfix::tools::{ToolContext, Toolbox};
use agentfix::workspace::{NoBuffers, Overlay, Workspace};
use async_trait::async_trait;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Answers `turns - 1` tool turns (alternating read_file and grep on a
/// 200-line file), then ends.
struct Instant {
    turns: u32,
    n: AtomicU32,
}

#[async_trait]
impl ModelClient for Instant {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        _: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        // The wire cost a real provider pays for every request.
        let body = encode_request("bench-model", &request, None);
        std::hint::black_box(serde_json::to_vec(&body).unwrap());
        let n = self.n.fetch_add(1, Ordering::Relaxed) + 1;
        let content = if n < self.turns {
            let call = if n.is_multiple_of(2) {
                json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": "grep", "input": {"pattern": format!("value_{n}")}})
            } else {
                json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": "read_file", "input": {"path": "lib.py", "start_line": n, "end_line": n + 20}})
            };
            json!([{"type": "text", "text": "Looking at the code."}, call])
        } else {
            json!([{"type": "text", "text": "Done."}])
        };
        let stop = if n < self.turns { "tool_use" } else { "end_turn" };
        let raw = json!({"id": "msg", "type": "message", "role": "assistant", "model": "bench-model", "content": content,
            "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": 1000, "output_tokens": 50}});
        decode_response(serde_json::from_slice(&serde_json::to_vec(&raw).unwrap()).unwrap())
    }

    async fn check(&self) -> Result<String, ModelError> {
        Ok("instant".into())
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..200).map(|i| format!("def f_{i}(x):\n    return x + value_{i}\n")).collect();
    std::fs::write(dir.path().join("lib.py"), text).unwrap();
    let workspace = Arc::new(Workspace::new(vec![dir.path().to_path_buf()]));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let limits = Limits {
        max_turns: 100,
        max_tokens: u64::MAX,
        max_output_tokens: 8192,
        context_budget: u64::MAX,
        context_editing: agentfix::config::ContextEditing::Economy,
        timeout: Duration::from_secs(600),
        max_cost: None,
    };
    let mut group = c.benchmark_group("run");
    group.sample_size(20);
    for turns in [10u32, 20, 40] {
        group.bench_with_input(BenchmarkId::new("turns", turns), &turns, |b, &turns| {
            b.to_async(&runtime).iter(|| {
                let workspace = workspace.clone();
                async move {
                    let overlay = Arc::new(Overlay::new(workspace, Arc::new(NoBuffers)));
                    let tools = Toolbox::standard(ToolContext::plain(overlay, PathBuf::from("lib.py")));
                    let model = Instant { turns, n: AtomicU32::new(0) };
                    let out = agent::run(
                        "system",
                        vec![agentfix::model::Message::user_text("fix it")],
                        &model,
                        &tools,
                        &limits,
                        &CancellationToken::new(),
                        &|_| {},
                    )
                    .await;
                    assert_eq!(out.turns, turns);
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
