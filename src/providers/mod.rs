//! Model providers behind one trait. A provider turns the neutral
//! [`ModelRequest`](crate::model::ModelRequest) into its wire format, streams
//! the answer over HTTP (retrying what the SDKs retry), and returns the
//! assembled response in neutral types. Providers are configuration data
//! (an [`Endpoint`]) plus a wire format; they know nothing of tools,
//! documents or LSP.

pub mod anthropic;
pub mod http;
pub mod openai;
pub mod retry;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use anthropic::Anthropic;
pub use http::Endpoint;
pub use openai::OpenAi;

use crate::config::{ConfigError, ProviderConfig, ProviderKind};
use crate::model::{ModelError, ModelRequest, ModelResponse, StreamUpdate};
use crate::secrets::Redactor;

/// A model that answers one request at a time. Dropping the future aborts
/// the HTTP request (that is how the loop cancels).
#[async_trait]
pub trait ModelClient: Send + Sync {
    /// Sends `request` and returns the whole response; `updates` hears the
    /// text and tool calls as they stream, and retries.
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError>;

    /// A cheap request that proves the endpoint, the key and the model
    /// work (no tokens spent); returns what answered.
    async fn check(&self) -> Result<String, ModelError>;

    /// The exact prompt tokens of `request` as the provider counts them
    /// (system prompt, tool declarations, messages and cache markers
    /// included), from the provider's own counting endpoint: free of
    /// charge, and nothing is generated. `None` when there is no such
    /// endpoint or the `countTokens` setting is off (the default), so the
    /// caller keeps its estimate. An error is a [`ModelError`] like any
    /// other; the caller may fall back to its estimate.
    async fn count_tokens(&self, _request: ModelRequest<'_>) -> Result<Option<u64>, ModelError> {
        Ok(None)
    }
}

/// The endpoint a provider section describes.
pub fn endpoint(config: &ProviderConfig) -> Result<Endpoint, ConfigError> {
    Ok(Endpoint {
        base_url: config.base_url.clone(),
        api_key: config.require_api_key()?,
        key_source: config.kind.key_var().to_string(),
        model: config.model.clone(),
        max_retries: config.max_retries,
        connect_timeout: config.connect_timeout,
        idle_timeout: config.idle_timeout,
    })
}

/// The configured provider. Fails when the configuration cannot work (no
/// key): the caller shows the error, and no request is sent.
pub fn from_config(config: &ProviderConfig) -> Result<Arc<dyn ModelClient>, ConfigError> {
    let endpoint = endpoint(config)?;
    let redactor = Redactor::new(endpoint.api_key.iter().map(|k| k.expose().to_string()));
    let inner: Arc<dyn ModelClient> = match config.kind {
        ProviderKind::Anthropic => Arc::new(Anthropic::new(endpoint).with_token_counting(config.count_tokens)),
        ProviderKind::Openai => Arc::new(OpenAi::new(endpoint, openai::Flavor::OpenAi)),
        ProviderKind::OpenaiCompatible => Arc::new(OpenAi::new(endpoint, openai::Flavor::Compatible)),
    };
    Ok(Arc::new(Redacting { inner, redactor }))
}

/// Scrubs the key (and any credential-shaped string, such as an
/// `Authorization` value) from every error and retry reason a provider
/// reports: some proxies echo the request's headers in their error bodies,
/// and these texts reach messages, results, progress and logs.
struct Redacting {
    inner: Arc<dyn ModelClient>,
    redactor: Redactor,
}

impl Redacting {
    fn error(&self, mut e: ModelError) -> ModelError {
        e.message = self.redactor.redact(&e.message).into_owned();
        e
    }
}

#[async_trait]
impl ModelClient for Redacting {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let scrubbed = |u: StreamUpdate| {
            updates(match u {
                StreamUpdate::Retrying { attempt, delay_ms, reason } => {
                    StreamUpdate::Retrying { attempt, delay_ms, reason: self.redactor.redact(&reason).into_owned() }
                }
                other => other,
            })
        };
        self.inner.complete(request, &scrubbed).await.map_err(|e| self.error(e))
    }

    async fn check(&self) -> Result<String, ModelError> {
        self.inner.check().await.map_err(|e| self.error(e))
    }

    async fn count_tokens(&self, request: ModelRequest<'_>) -> Result<Option<u64>, ModelError> {
        self.inner.count_tokens(request).await.map_err(|e| self.error(e))
    }
}

/// A short timeout for the connection check of `agentfix check`.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(20);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, ModelErrorKind};

    /// A provider whose every answer is an error echoing the key, as some proxies do.
    struct Echoing;

    const KEY: &str = "sk-ant-echoed-0123456789abcdef";

    fn echoed() -> ModelError {
        ModelError::new(ModelErrorKind::Auth, Some(401), format!("rejected x-api-key: {KEY}"))
    }

    #[async_trait]
    impl ModelClient for Echoing {
        async fn complete(
            &self,
            _request: ModelRequest<'_>,
            _updates: &(dyn Fn(StreamUpdate) + Send + Sync),
        ) -> Result<ModelResponse, ModelError> {
            Err(echoed())
        }

        async fn check(&self) -> Result<String, ModelError> {
            Err(echoed())
        }

        async fn count_tokens(&self, _request: ModelRequest<'_>) -> Result<Option<u64>, ModelError> {
            Err(echoed())
        }
    }

    /// Implements only what it must: the default has no endpoint.
    struct Minimal;

    #[async_trait]
    impl ModelClient for Minimal {
        async fn complete(
            &self,
            _request: ModelRequest<'_>,
            _updates: &(dyn Fn(StreamUpdate) + Send + Sync),
        ) -> Result<ModelResponse, ModelError> {
            Err(echoed())
        }

        async fn check(&self) -> Result<String, ModelError> {
            Ok("minimal".into())
        }
    }

    #[tokio::test]
    async fn counting_is_forwarded_with_the_key_scrubbed_and_absent_by_default() {
        let messages = vec![Message::user_text("hi")];
        let request =
            ModelRequest { system: "s", messages: &messages, tools: &[], max_output_tokens: 8, allow_tools: true };
        let redacting = Redacting { inner: Arc::new(Echoing), redactor: Redactor::new([KEY.to_string()]) };
        let e = redacting.count_tokens(request).await.unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::Auth);
        assert!(!e.message.contains(KEY) && e.message.starts_with("rejected x-api-key: "), "{}", e.message);
        assert_eq!(Minimal.count_tokens(request).await, Ok(None));
        let redacting = Redacting { inner: Arc::new(Minimal), redactor: Redactor::new([KEY.to_string()]) };
        assert_eq!(redacting.count_tokens(request).await, Ok(None));
    }
}
