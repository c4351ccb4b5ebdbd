//! What the check of a proposal costs (`fix::verify`), against real
//! pyright, side by side with what every edit already pays: the edit tools'
//! diagnostics feedback (one query of the edited text). `check` is the time
//! from the loop's end to the offer: the proposal's diagnostics (the server
//! most likely holds that text already), then the text before the run (one
//! sync), compared. Median of 15 of each, interleaved, on a warm server.
//!
//! Without `pyright-langserver` on PATH it says so and measures nothing.
//! `cargo bench --bench verify`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use agentfix::config::Config;
use agentfix::config::settings::Settings;
use agentfix::downstream::{Downstream, SymbolSource};
use agentfix::fix::verify::Checker;
use agentfix::tools::ToolContext;
use agentfix::workspace::{NoBuffers, Overlay, Workspace};

const MODELS: &str = "class User:\n    def __init__(self, name: str) -> None:\n        self.name = name\n\n\ndef make_user(name: str) -> User:\n    return User(name)\n";
const APP: &str = "from models import make_user\n\nuser = make_user(\"ann\")\nage: int = user.name\n";
const FIXED: &str = "from models import make_user\n\nuser = make_user(\"ann\")\nage: int = len(user.name)\n";
const SAMPLES: usize = 15;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("pyright-langserver").is_file()));
    if !on_path {
        println!("verify: SKIPPED (needs pyright-langserver on PATH; install: npm install -g pyright@1.1.414)");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("models.py"), MODELS).unwrap();
    std::fs::write(root.join("app.py"), APP).unwrap();
    std::fs::write(root.join("pyrightconfig.json"), "{}\n").unwrap();
    let config = Config::resolve(&Settings::default(), &Settings::default(), &|_| None).expect("configuration");
    let downstream = Arc::new(Downstream::from_config(&config.downstream, vec![root.clone()]));
    let symbols: Arc<dyn SymbolSource> = downstream.clone();
    let overlay = Arc::new(Overlay::new(Arc::new(Workspace::new(vec![root.clone()])), Arc::new(NoBuffers)));
    let app = root.join("app.py");
    overlay.write(&app, FIXED.into()).unwrap();
    let ctx = ToolContext {
        overlay: overlay.clone(),
        symbols: Some(symbols.clone()),
        target: app.clone(),
        editor_diagnostics: Vec::new(),
    };
    let changes = overlay.changes();
    let (mut feedback, mut check) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        // Warm: the server started, the project analysed.
        symbols.diagnostics(&app, APP).await.expect("pyright answers");
        let checker = Checker { symbols: Some(symbols.as_ref()), commands: None, names: &[] };
        for _ in 0..SAMPLES {
            // The edit's feedback: one query of the edited text (a sync).
            symbols.diagnostics(&app, APP).await.unwrap();
            let t = Instant::now();
            symbols.diagnostics(&app, FIXED).await.unwrap();
            feedback.push(t.elapsed().as_secs_f64() * 1000.0);
            // The check, with the server holding the proposal as after the
            // loop's last edit.
            let t = Instant::now();
            let checked = checker.check(&ctx, &changes, &[]).await;
            check.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(checked.diff.is_some_and(|d| d.fixed == 1 && d.introduced.is_empty()), "the check saw the fix");
        }
        downstream.stop_all().await;
    });
    let (f, c) = (median(feedback), median(check));
    println!("verify: pyright, median of {SAMPLES}, interleaved, one run");
    println!("{:<46} {:>9}", "row", "ms");
    println!("{:<46} {f:>9.1}", "an edit's diagnostics feedback (one query)");
    println!("{:<46} {c:>9.1}", "the check of the proposal (loop end to offer)");
    println!("check / feedback: {:.2}", c / f);
}
