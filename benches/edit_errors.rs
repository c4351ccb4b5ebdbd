//! `edit_file` with an `old_text` that occurs many times: the error must
//! cost linear work. 5,000 and 20,000 matches side by side: the ratio stays
//! near 4 (measured 103 µs against 550 µs, 5.4×, on a loaded 2-core machine),
//! where each match used to count its line from the start of the file, so 4×
//! the matches cost about 16× the time (20,000 took 5–10 s).

use std::sync::Arc;

use agentfix::tools::{ToolContext, ToolSet, Toolbox};
use agentfix::workspace::{NoBuffers, Overlay, Workspace};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut group = c.benchmark_group("edit_file_many_matches");
    group.sample_size(20);
    for matches in [5_000usize, 20_000] {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let text: String = (0..matches).map(|i| format!("x = 1  # line {i}\n")).collect();
        std::fs::write(root.join("many.py"), text).unwrap();
        let overlay = Arc::new(Overlay::new(Arc::new(Workspace::new(vec![root.clone()])), Arc::new(NoBuffers)));
        let tools = Toolbox::standard(ToolContext::plain(overlay, root.join("many.py")));
        let input = json!({"path": "many.py", "old_text": "x = 1", "new_text": "x = 2"});
        group.bench_with_input(BenchmarkId::from_parameter(matches), &matches, |b, _| {
            b.iter(|| {
                let out = runtime.block_on(tools.call("edit_file", &input));
                assert!(out.is_error && out.content.len() < 4096);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
