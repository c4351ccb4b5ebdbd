//! A long streamed answer, end to end: the test suite's mock model streams
//! a text answer in 7-character deltas over loopback, the provider parses
//! the SSE and assembles the message, and every delta goes through the
//! progress formatter (`ProgressLines`) as in a run. 32 KB and 128 KB side by
//! side, for both wire formats: with linear work the 128 KB case costs about
//! 4x the 32 KB one (quadratic assembly made it ~15x). The loopback figures
//! are bound by the mock (one write per event); `sse_in_process` feeds the
//! same bytes, in 16 KB chunks, straight to the SSE parser and the progress
//! formatter, without sockets.

use std::time::Duration;

use agentfix::agent::RunEvent;
use agentfix::config::provider::Secret;
use agentfix::fix::ProgressLines;
use agentfix::model::{Message, ModelRequest, StreamUpdate};
use agentfix::providers::http::Sse;
use agentfix::providers::openai::Flavor;
use agentfix::providers::{Anthropic, Endpoint, ModelClient, OpenAi};
use agentfix_mock_model::{self as mock_model, Chunk, MockModel, Reply};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn text(len: usize) -> String {
    let mut t = String::with_capacity(len + 16);
    let mut n = 0;
    while t.len() < len {
        t.push_str(&format!("word{n} "));
        n += 1;
        if n % 12 == 0 {
            t.push('\n');
        }
    }
    t.truncate(len);
    t
}

fn endpoint(base_url: String) -> Endpoint {
    Endpoint {
        base_url,
        api_key: Some(Secret::new(mock_model::API_KEY)),
        key_source: "BENCH_KEY".into(),
        model: "bench-model".into(),
        max_retries: 0,
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(60),
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mock = MockModel::start();
    let anthropic = Anthropic::new(endpoint(mock.base_url()));
    let openai = OpenAi::new(endpoint(format!("{}/v1", mock.base_url())), Flavor::OpenAi);
    let messages = vec![Message::user_text("Explain the code.")];
    let request = ModelRequest {
        system: "system",
        messages: &messages,
        tools: &[],
        max_output_tokens: 8192,
        allow_tools: true,
        revisions: &[],
    };
    let mut group = c.benchmark_group("streamed_text");
    group.sample_size(10);
    for kb in [32usize, 128] {
        let answer = text(kb * 1024);
        group.throughput(Throughput::Bytes(answer.len() as u64));
        let providers: [(&str, &dyn ModelClient, Reply); 2] = [
            ("anthropic", &anthropic, mock_model::text_reply(&answer)),
            ("openai", &openai, mock_model::openai_text(&answer)),
        ];
        for (name, client, reply) in providers {
            group.bench_with_input(BenchmarkId::new(name, format!("{kb}KB")), &kb, |b, _| {
                b.to_async(&runtime).iter(|| {
                    mock.push(reply.clone());
                    async {
                        let lines = ProgressLines::default();
                        let updates = |u: StreamUpdate| {
                            std::hint::black_box(lines.line(&RunEvent::Stream(u)));
                        };
                        let response = client.complete(request, &updates).await.unwrap();
                        assert_eq!(response.message.text().len(), answer.len());
                    }
                })
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("sse_in_process");
    group.sample_size(20);
    for kb in [32usize, 128] {
        let answer = text(kb * 1024);
        let Reply::Message(mut message) = mock_model::text_reply(&answer) else { unreachable!() };
        message["model"] = "bench-model".into();
        message["usage"]["input_tokens"] = 10.into();
        let bytes: Vec<u8> = mock_model::sse_events(&message)
            .into_iter()
            .flat_map(|c| match c {
                Chunk::Raw(t) => t.into_bytes(),
                _ => Vec::new(),
            })
            .collect();
        group.throughput(Throughput::Bytes(answer.len() as u64));
        group.bench_with_input(BenchmarkId::new("anthropic", format!("{kb}KB")), &kb, |b, _| {
            b.to_async(&runtime).iter(|| async {
                let chunks = bytes.chunks(16 * 1024).map(Ok::<_, String>);
                let mut sse = Sse::new(futures::stream::iter(chunks), Duration::from_secs(60), "bench");
                let lines = ProgressLines::default();
                let mut streamed = 0;
                while let Some(ev) = sse.next().await.unwrap() {
                    let v: serde_json::Value = serde_json::from_str(&ev.data).unwrap();
                    if let Some(t) = v["delta"]["text"].as_str() {
                        streamed += t.len();
                        std::hint::black_box(lines.line(&RunEvent::Stream(StreamUpdate::Text(t.to_string()))));
                    }
                }
                assert_eq!(streamed, answer.len());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
