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
        ProviderKind::Anthropic => Arc::new(Anthropic::new(endpoint)),
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
}

/// A short timeout for the connection check of `agentfix check`.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(20);
