//! Model providers behind one trait. A provider turns the neutral
//! [`ModelRequest`](crate::model::ModelRequest) into its wire format, sends it
//! over HTTP and turns the answer (or the failure) back into neutral types.
//! Providers know nothing of tools, documents or LSP.

mod anthropic;

use std::sync::Arc;

use async_trait::async_trait;

pub use anthropic::Anthropic;

use crate::config::{Config, ProviderKind};
use crate::model::{ModelError, ModelRequest, ModelResponse};

/// A model that answers one request at a time. Dropping the future aborts
/// the HTTP request (that is how the loop cancels).
#[async_trait]
pub trait ModelClient: Send + Sync {
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError>;
}

/// The configured provider. Fails when the configuration cannot work (no
/// key): the caller shows the error, and no request is sent.
pub fn from_config(config: &Config) -> Result<Arc<dyn ModelClient>, crate::config::ConfigError> {
    match config.provider {
        ProviderKind::Anthropic => {
            let key = config.require_api_key()?;
            Ok(Arc::new(Anthropic::new(
                &config.base_url,
                key,
                &config.model,
            )))
        }
    }
}
