//! HTTP plumbing shared by the providers: the client, error mapping that
//! never exposes a key, retry hints from response headers, and reading an
//! SSE body with an idle timeout.

use std::time::Duration;

use eventsource_stream::{Event, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::header::HeaderMap;

use crate::model::{ModelError, ModelErrorKind};

/// Connection settings of one provider endpoint.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Base URL without the trailing path the provider appends.
    pub base_url: String,
    pub api_key: Option<crate::config::Secret>,
    /// Where the key came from, for error messages (`ANTHROPIC_API_KEY`).
    pub key_source: String,
    pub model: String,
    pub max_retries: u32,
    pub connect_timeout: Duration,
    /// Longest silence allowed while a response streams.
    pub idle_timeout: Duration,
}

pub fn client(endpoint: &Endpoint) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(endpoint.connect_timeout)
        .user_agent(concat!("agentfix/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

/// A transport failure. reqwest's messages never include headers, so the
/// key cannot leak here.
pub fn network_error(provider: &str, e: &reqwest::Error) -> ModelError {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    ModelError::new(ModelErrorKind::Network, None, format!("request to the {provider} API {what}: {}", error_chain(e)))
}

pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        src = inner.source();
    }
    s
}

/// The server's retry hints: `x-should-retry`, then `retry-after-ms`,
/// then `retry-after` (seconds or an HTTP date).
pub fn retry_hints(headers: &HeaderMap) -> (Option<bool>, Option<Duration>) {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::trim);
    let should = match get("x-should-retry") {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    };
    let after = get("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0))
        .or_else(|| {
            let v = get("retry-after")?;
            if let Ok(secs) = v.parse::<f64>() {
                return Some(Duration::from_secs_f64(secs.max(0.0)));
            }
            let when = httpdate(v)?;
            Some(when.duration_since(std::time::SystemTime::now()).unwrap_or_default())
        });
    (should, after)
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn httpdate(s: &str) -> Option<std::time::SystemTime> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else { return None };
    let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        .iter()
        .position(|m| m == month)? as i64
        + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let [h, m, sec] = hms.as_slice() else { return None };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + m * 60 + sec;
    u64::try_from(secs).ok().map(|s| std::time::UNIX_EPOCH + Duration::from_secs(s))
}

/// Whether an HTTP status is worth retrying (the SDKs' rule).
pub fn status_retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// The SSE events of a streaming response body.
pub fn sse(response: reqwest::Response) -> impl Stream<Item = Result<Event, String>> + Unpin {
    response.bytes_stream().eventsource().map(|r| r.map_err(|e| e.to_string())).boxed()
}

/// The next event, or an error after `idle` without one.
pub async fn next_event<S>(stream: &mut S, idle: Duration, provider: &str) -> Result<Option<Event>, ModelError>
where
    S: Stream<Item = Result<Event, String>> + Unpin,
{
    match tokio::time::timeout(idle, stream.next()).await {
        Err(_) => Err(ModelError::new(
            ModelErrorKind::Network,
            None,
            format!("the {provider} stream stalled: no data for {} s", idle.as_secs_f32()),
        )),
        Ok(None) => Ok(None),
        Ok(Some(Ok(ev))) => Ok(Some(ev)),
        Ok(Some(Err(e))) => {
            Err(ModelError::new(ModelErrorKind::Network, None, format!("the {provider} stream broke: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_hints_prefer_ms_then_seconds_then_dates() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_hints(&h), (None, Some(Duration::from_secs(2))));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_hints(&h).1, Some(Duration::from_millis(150)));
        h.insert("x-should-retry", HeaderValue::from_static("false"));
        assert_eq!(retry_hints(&h).0, Some(false));
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"));
        assert_eq!(retry_hints(&h).1, Some(Duration::ZERO), "a past date means now");
        assert_eq!(
            httpdate("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(std::time::UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert_eq!(httpdate("yesterday"), None);
    }

    #[test]
    fn retryable_statuses_follow_the_sdks() {
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(status_retryable(s), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!status_retryable(s), "{s}");
        }
    }
}
