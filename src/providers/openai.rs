//! OpenAI Chat Completions and compatible servers (placeholder until the
//! streaming implementation lands).

use async_trait::async_trait;

use super::{Endpoint, ModelClient};
use crate::model::{ModelError, ModelErrorKind, ModelRequest, ModelResponse, StreamUpdate};

/// Which server family: the real OpenAI API or a compatible server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    OpenAi,
    Compatible,
}

pub struct OpenAi {
    endpoint: Endpoint,
    flavor: Flavor,
}

impl OpenAi {
    pub fn new(endpoint: Endpoint, flavor: Flavor) -> Self {
        Self { endpoint, flavor }
    }
}

#[async_trait]
impl ModelClient for OpenAi {
    async fn complete(
        &self,
        _request: ModelRequest<'_>,
        _updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let _ = (&self.endpoint, self.flavor);
        Err(ModelError::new(ModelErrorKind::InvalidRequest, None, "the openai provider is not available yet"))
    }

    async fn check(&self) -> Result<String, ModelError> {
        Err(ModelError::new(ModelErrorKind::InvalidRequest, None, "the openai provider is not available yet"))
    }
}
