//! The official SDKs' retry policy: `maxRetries` (default 2) further
//! attempts for retryable failures; the server's `retry-after(-ms)` when it
//! is at most 60 s, else 0.5 s doubling to 8 s with up to 25 % jitter.

use std::future::Future;
use std::time::Duration;

use crate::model::{ModelError, StreamUpdate};

/// A server-requested delay longer than this is not honoured (backoff is
/// used instead), as in the Anthropic SDKs.
const MAX_SERVER_DELAY: Duration = Duration::from_secs(60);

/// The delay before retry number `retries_done + 1`.
pub fn delay(retries_done: u32, server: Option<Duration>, jitter: f64) -> Duration {
    if let Some(d) = server
        && d <= MAX_SERVER_DELAY
    {
        return d;
    }
    let base = (0.5 * 2f64.powi(retries_done.min(16) as i32)).min(8.0);
    Duration::from_secs_f64(base * (1.0 - 0.25 * jitter.clamp(0.0, 1.0)))
}

/// A number in [0, 1) that differs between calls; good enough for jitter.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Runs `attempt` until it succeeds, fails for good, or `max_retries`
/// retries are spent. Each retry is announced through `updates`.
pub async fn with_retries<T, F, Fut>(
    max_retries: u32,
    updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    mut attempt: F,
) -> Result<T, ModelError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, ModelError>>,
{
    let mut retries = 0;
    loop {
        match attempt(retries).await {
            Ok(v) => return Ok(v),
            Err(e) if e.retryable && retries < max_retries => {
                let wait = delay(retries, e.retry_after, jitter());
                tracing::warn!(attempt = retries + 1, delay_ms = wait.as_millis() as u64, "retrying: {}", e.message);
                updates(StreamUpdate::Retrying {
                    attempt: retries + 1,
                    delay_ms: wait.as_millis() as u64,
                    reason: e.message.clone(),
                });
                tokio::time::sleep(wait).await;
                retries += 1;
            }
            Err(mut e) => {
                if e.retryable && retries > 0 {
                    e.message = format!("{} (after {} retries)", e.message, retries);
                }
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelErrorKind;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn backoff_doubles_to_eight_seconds_with_jitter_and_honours_short_server_delays() {
        assert_eq!(delay(0, None, 0.0), Duration::from_millis(500));
        assert_eq!(delay(0, None, 1.0), Duration::from_millis(375));
        assert_eq!(delay(1, None, 0.0), Duration::from_secs(1));
        assert_eq!(delay(2, None, 0.0), Duration::from_secs(2));
        assert_eq!(delay(9, None, 0.0), Duration::from_secs(8));
        assert_eq!(delay(0, Some(Duration::from_millis(1200)), 0.5), Duration::from_millis(1200));
        assert_eq!(delay(0, Some(Duration::from_secs(61)), 0.0), Duration::from_millis(500));
        for _ in 0..100 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_retryable_errors_up_to_the_limit() {
        let calls = AtomicU32::new(0);
        let updates = std::sync::Mutex::new(Vec::new());
        let r: Result<(), _> = with_retries(2, &|u| updates.lock().unwrap().push(u), |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(ModelError::new(ModelErrorKind::Server, Some(529), "overloaded")) }
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(r.unwrap_err().message, "overloaded (after 2 retries)");
        assert_eq!(updates.lock().unwrap().len(), 2);
        let calls = AtomicU32::new(0);
        let r: Result<(), _> = with_retries(2, &|_| {}, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(ModelError::new(ModelErrorKind::Auth, Some(401), "bad key")) }
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(r.unwrap_err().message, "bad key");
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_success_ends_the_retries() {
        let r = with_retries(2, &|_| {}, |n| async move {
            if n == 0 { Err(ModelError::new(ModelErrorKind::Network, None, "reset")) } else { Ok(n) }
        })
        .await;
        assert_eq!(r.unwrap(), 1);
    }
}
