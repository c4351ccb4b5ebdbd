//! Harness overhead per turn: runs against an instant in-process model that
//! still pays the real wire costs (it writes every request's body with the
//! Anthropic encoder and decodes a canned JSON response), with real tools
//! (a ~4 KB read_file output every other turn) over a real overlay.
//!
//! `turn_gap/{kept,fresh}/{6,40}`: the harness gap before request 6 and
//! before request 40 (from the response handed back to the loop until the
//! next body is written), with the messages' texts kept between requests
//! as the clients do, and encoded afresh every time as they used to: the
//! goal is ≤ 1 ms and the same at 40 as at 6. `run/turns/{10,40}`: whole
//! runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agentfix::agent;
use agentfix::config::limits::Limits;
use agentfix::model::{ModelError, ModelRequest, ModelResponse, StreamUpdate};
use agentfix::providers::ModelClient;
use agentfix::providers::anthropic::{decode_response, encode_body, encode_request};
use agentfix::providers::encoded::Encoded;
use agentfix::tools::{ToolContext, Toolbox};
use agentfix::workspace::{NoBuffers, Overlay, Workspace};
use async_trait::async_trait;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How the instant model writes each request's body.
enum Encoding {
    /// As the clients do: the messages' texts kept between requests.
    Kept(Encoded),
    /// Every message encoded again for every request (the clients before
    /// `providers::encoded`): the side-by-side baseline.
    Fresh,
}

/// Answers `turns - 1` tool turns (alternating a read_file of ~4 KB and a
/// grep on a 2,000-line file), then ends; measures the harness gap before
/// request `measure_at`: from the moment the previous response was handed
/// back to the loop until this request's body is written (the tools, the
/// loop's bookkeeping and the encoding).
struct Instant {
    turns: u32,
    n: AtomicU32,
    encoding: Encoding,
    measure_at: u32,
    handed_back: Mutex<Option<std::time::Instant>>,
    gap: Mutex<Duration>,
}

impl Instant {
    fn new(turns: u32, encoding: Encoding, measure_at: u32) -> Self {
        Self {
            turns,
            n: AtomicU32::new(0),
            encoding,
            measure_at,
            handed_back: Mutex::new(None),
            gap: Mutex::new(Duration::ZERO),
        }
    }
}

#[async_trait]
impl ModelClient for Instant {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        _: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        // The wire cost a real provider pays for every request.
        let body = match &self.encoding {
            Encoding::Kept(encoded) => encode_body("bench-model", &request, None, encoded).to_bytes(),
            Encoding::Fresh => serde_json::to_vec(&encode_request("bench-model", &request, None)).unwrap(),
        };
        std::hint::black_box(body);
        let n = self.n.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.measure_at
            && let Some(at) = *self.handed_back.lock().unwrap()
        {
            *self.gap.lock().unwrap() = at.elapsed();
        }
        let content = if n < self.turns {
            let call = if n.is_multiple_of(2) {
                json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": "grep", "input": {"pattern": format!("value_{n}\\b")}})
            } else {
                let start = n * 40;
                json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": "read_file", "input": {"path": "lib.py", "start_line": start, "end_line": start + 120}})
            };
            json!([{"type": "text", "text": "Looking at the code."}, call])
        } else {
            json!([{"type": "text", "text": "Done."}])
        };
        let stop = if n < self.turns { "tool_use" } else { "end_turn" };
        let raw = json!({"id": "msg", "type": "message", "role": "assistant", "model": "bench-model", "content": content,
            "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": 1000, "output_tokens": 50}});
        let response = decode_response(serde_json::from_slice(&serde_json::to_vec(&raw).unwrap()).unwrap());
        *self.handed_back.lock().unwrap() = Some(std::time::Instant::now());
        response
    }

    async fn check(&self) -> Result<String, ModelError> {
        Ok("instant".into())
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..2000).map(|i| format!("def f_{i}(x):\n    return x + value_{i}  # 漢字\n")).collect();
    std::fs::write(dir.path().join("lib.py"), text).unwrap();
    let workspace = Arc::new(Workspace::new(vec![dir.path().to_path_buf()]));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let limits = Limits {
        max_turns: 100,
        max_tokens: u64::MAX,
        max_output_tokens: 8192,
        context_budget: u64::MAX,
        // The history grows untouched: what is measured is its cost alone.
        context_editing: agentfix::config::limits::ContextEditing::Budget,
        timeout: Duration::from_secs(600),
        max_cost: None,
    };
    let run = |model: &Instant| {
        let overlay = Arc::new(Overlay::new(workspace.clone(), Arc::new(NoBuffers)));
        let tools = Toolbox::standard(ToolContext::plain(overlay, PathBuf::from("lib.py")));
        runtime.block_on(async {
            let out = agent::run(
                "system",
                vec![agentfix::model::Message::user_text("fix it")],
                model,
                &tools,
                &limits,
                &CancellationToken::new(),
                &|_| {},
            )
            .await;
            assert_eq!(out.turns, model.turns);
        });
    };
    // The gap before request 6 and before request 40, each encoding, side
    // by side: flat means the same at 40 as at 6.
    let mut group = c.benchmark_group("turn_gap");
    group.sample_size(20);
    for encoding in ["kept", "fresh"] {
        // Both after a read_file turn (odd responses read, even ones grep).
        for at in [6u32, 40] {
            group.bench_with_input(BenchmarkId::new(encoding, at), &at, |b, &at| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let e = if encoding == "kept" { Encoding::Kept(Encoded::default()) } else { Encoding::Fresh };
                        let model = Instant::new(at, e, at);
                        run(&model);
                        total += *model.gap.lock().unwrap();
                    }
                    total
                })
            });
        }
    }
    group.finish();
    let mut group = c.benchmark_group("run");
    group.sample_size(10);
    for turns in [10u32, 40] {
        group.bench_with_input(BenchmarkId::new("turns", turns), &turns, |b, &turns| {
            b.iter(|| run(&Instant::new(turns, Encoding::Kept(Encoded::default()), 0)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
