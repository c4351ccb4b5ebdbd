//! Peak resident memory of a child process, for the memory-bound tests: the
//! kernel's high-water mark (`VmHWM` in `/proc/<pid>/status`), polled until
//! the process exits (the mark only grows, so the last reading is the peak
//! up to a few milliseconds before the exit).

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// `VmHWM` of `pid` in KiB, if the process still exists.
pub fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Polls `child` until it exits; returns its output and its peak RSS in KiB.
pub fn wait_measured(mut child: Child) -> (Output, u64) {
    let pid = child.id();
    let mut peak = 0;
    // Output is drained on threads so that a chatty child never blocks.
    let stdout = child.stdout.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut v);
            v
        })
    });
    let stderr = child.stderr.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut v);
            v
        })
    });
    let status = loop {
        if let Some(kib) = peak_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let join =
        |h: Option<std::thread::JoinHandle<Vec<u8>>>| h.map(|h| h.join().unwrap_or_default()).unwrap_or_default();
    (Output { status, stdout: join(stdout), stderr: join(stderr) }, peak)
}

/// Runs `cmd` (stdin closed) and returns its output and peak RSS in KiB.
pub fn run_measured(cmd: &mut Command) -> (Output, u64) {
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_measured(child)
}
