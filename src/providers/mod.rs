//! Model providers behind one trait. A provider turns the neutral
//! [`ModelRequest`](crate::model::ModelRequest) into its wire format, streams
//! the answer over HTTP (retrying what the SDKs retry), and returns the
//! assembled response in neutral types. Providers are configuration data
//! (an [`Endpoint`], the `effort`) plus a wire format; they know nothing of
//! tools, documents or LSP.
//!
//! A run with another model or effort than the settings' gets its own client
//! from a modified clone of the [`ProviderConfig`] ([`from_config`]): building
//! one sends nothing and shares nothing with the others.
//!
//! Its parts:
//! `ModelClient` trait (`complete`, `check`, `count_tokens`: a request's
//! exact prompt tokens from the provider's free counting endpoint, `None` by
//! default, and `output_ceiling`: the most output a request may produce,
//! thinking included); `from_config(&ProviderConfig)`, the one way a run gets
//! its client (a per-run model or `effort` override is a modified
//! `ProviderConfig` clone: building a client sends nothing and shares
//! nothing); `effort_note` for `agentfix check`; `anthropic.rs`, `openai.rs`
//! (wire formats, SSE assembly, error mapping, usage with cache reads/writes;
//! Anthropic's prompt-cache breakpoints: system prompt + the two newest user
//! messages; with `countTokens`, `POST /v1/messages/count_tokens` with the
//! Messages body of the same request minus the fields that endpoint refuses,
//! answered by a typed struct; `effort` as Anthropic extended thinking for
//! the models that have it, `budget_tokens` 2048/8192/24576 on top of
//! `max_tokens` within the model's output limit (`Thinking::sizes`), on every
//! request including `tool_choice: none`, but for a turn that lost its
//! thinking start; as OpenAI `reasoning_effort` for reasoning models, which
//! always get `max_completion_tokens` and no `temperature`; sent as is to
//! compatible servers; `tool_choice: "auto"` whenever tools are allowed; for
//! compatible servers `content: ""` beside tool calls, `function_call`
//! ignored beside `tool_calls`, a stream without any data event asked again
//! unstreamed and the client unstreamed from then on, usage estimated from
//! the bytes when none is reported (`Usage::estimated`), errors naming a
//! server setting or a validation error not retried, `check` through `GET
//! /models` where `/models/{id}` is 404; whether the provider is a compatible
//! server reaches the no-tool-call verdict through `fix`
//! (`config.provider.kind`), never the loop); `encoded.rs` (`Encoded`: each
//! client's JSON texts of the messages it sent, by revision, reused for the
//! next body, so a turn encodes only new messages and the two that carry
//! Anthropic's rolling breakpoints; `Body`: the body's small members as a
//! `Value`, the messages as texts, written out once); `http.rs` (client: one
//! per process and connect timeout, shared by every run, so runs reuse
//! connections and certificates are read once; retry hints, capped bodies,
//! the SSE parser with its per-event deadline and limits); `retry.rs` (the
//! SDKs' policy)

pub mod anthropic;
pub mod encoded;
pub mod http;
pub mod openai;
pub mod retry;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use anthropic::Anthropic;
pub use http::Endpoint;
pub use openai::OpenAi;

use crate::config::ConfigError;
use crate::config::provider::{ProviderConfig, ProviderKind};
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

    /// The most output tokens a request asking for `requested` may produce
    /// and be billed for, thinking included: `requested`, unless the
    /// provider adds room of its own (Anthropic's thinking budget,
    /// [`anthropic::Thinking::sizes`]; OpenAI's reasoning tokens count
    /// within `max_completion_tokens`). What bounds a run's tokens or cost
    /// must count.
    fn output_ceiling(&self, requested: u32) -> u32 {
        requested
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
///
/// This is how a run gets its model client, and a run that overrides the
/// model or the effort passes a modified clone of the configuration: the
/// client is built from `config` alone (its own HTTP client, no request
/// sent, nothing shared with other clients), so building one per run is
/// cheap, and two clients never see each other's model or effort.
pub fn from_config(config: &ProviderConfig) -> Result<Arc<dyn ModelClient>, ConfigError> {
    let endpoint = endpoint(config)?;
    let redactor = Redactor::new(endpoint.api_key.iter().map(|k| k.expose().to_string()));
    let inner: Arc<dyn ModelClient> = match config.kind {
        ProviderKind::Anthropic => {
            Arc::new(Anthropic::new(endpoint).with_token_counting(config.count_tokens).with_effort(config.effort))
        }
        ProviderKind::Openai => Arc::new(OpenAi::new(endpoint, openai::Flavor::OpenAi).with_effort(config.effort)),
        ProviderKind::OpenaiCompatible => {
            Arc::new(OpenAi::new(endpoint, openai::Flavor::Compatible).with_effort(config.effort))
        }
    };
    Ok(Arc::new(Redacting { inner, redactor }))
}

/// What the configured `effort` does with the configured model, for
/// `agentfix check`: empty when unset, else `"; "` and how it reaches the
/// model, or why it is ignored.
pub fn effort_note(config: &ProviderConfig) -> String {
    let Some(effort) = config.effort else { return String::new() };
    let model = &config.model;
    match config.kind {
        ProviderKind::Anthropic => match anthropic::thinking_for(model, Some(effort)) {
            Some(t) => format!("; extended thinking, budget_tokens {} on top of maxOutputTokens", t.budget_tokens),
            None => format!("; ignored: {model} is not known to have extended thinking"),
        },
        ProviderKind::Openai if openai::is_reasoning_model(model) => {
            format!("; reasoning_effort \"{}\"", effort.name())
        }
        ProviderKind::Openai => format!("; ignored: {model} is not a reasoning model"),
        ProviderKind::OpenaiCompatible => {
            format!("; sent as reasoning_effort \"{}\", which a server that does not know it ignores", effort.name())
        }
    }
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

    fn output_ceiling(&self, requested: u32) -> u32 {
        self.inner.output_ceiling(requested)
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

    fn config(kind: ProviderKind, model: &str, effort: Option<crate::config::provider::Effort>) -> ProviderConfig {
        ProviderConfig {
            kind,
            model: model.into(),
            base_url: "http://127.0.0.1:9".into(),
            api_key: Some(crate::config::provider::Secret::new(KEY)),
            max_retries: 0,
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            count_tokens: false,
            effort,
        }
    }

    #[test]
    fn a_run_with_another_model_or_effort_gets_its_own_client_from_a_modified_clone() {
        use crate::config::provider::Effort;
        let settings = config(ProviderKind::Anthropic, "claude-sonnet-4-5", None);
        let first = from_config(&settings).unwrap();
        let hard_config = ProviderConfig { effort: Some(Effort::High), ..settings.clone() };
        let hard = from_config(&hard_config).unwrap();
        let cheap = from_config(&ProviderConfig { model: "claude-3-5-haiku-latest".into(), ..hard_config }).unwrap();
        // Each keeps its own: the thinking budget of the hard one shows in its ceiling only.
        assert_eq!((first.output_ceiling(8192), hard.output_ceiling(8192)), (8192, 32_768));
        assert_eq!(cheap.output_ceiling(8192), 8192, "no extended thinking on that model");
        assert_eq!(from_config(&settings).unwrap().output_ceiling(8192), 8192);
    }

    #[test]
    fn check_says_what_the_effort_does_with_the_model() {
        use crate::config::provider::Effort::{High, Low};
        let note = |kind, model: &str, effort| effort_note(&config(kind, model, effort));
        assert_eq!(note(ProviderKind::Anthropic, "claude-sonnet-4-5", None), "");
        assert_eq!(note(ProviderKind::Openai, "o3", None), "");
        assert_eq!(
            note(ProviderKind::Anthropic, "claude-sonnet-4-5", Some(High)),
            "; extended thinking, budget_tokens 24576 on top of maxOutputTokens"
        );
        assert_eq!(
            note(ProviderKind::Anthropic, "claude-3-5-haiku-latest", Some(Low)),
            "; ignored: claude-3-5-haiku-latest is not known to have extended thinking"
        );
        assert_eq!(note(ProviderKind::Openai, "o4-mini", Some(Low)), "; reasoning_effort \"low\"");
        assert_eq!(note(ProviderKind::Openai, "gpt-4.1", Some(Low)), "; ignored: gpt-4.1 is not a reasoning model");
        assert_eq!(
            note(ProviderKind::OpenaiCompatible, "qwen3", Some(High)),
            "; sent as reasoning_effort \"high\", which a server that does not know it ignores"
        );
    }

    #[tokio::test]
    async fn counting_is_forwarded_with_the_key_scrubbed_and_absent_by_default() {
        let messages = vec![Message::user_text("hi")];
        let request = ModelRequest {
            system: "s",
            messages: &messages,
            tools: &[],
            max_output_tokens: 8,
            allow_tools: true,
            revisions: &[],
        };
        let redacting = Redacting { inner: Arc::new(Echoing), redactor: Redactor::new([KEY.to_string()]) };
        let e = redacting.count_tokens(request).await.unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::Auth);
        assert!(!e.message.contains(KEY) && e.message.starts_with("rejected x-api-key: "), "{}", e.message);
        assert_eq!(Minimal.count_tokens(request).await, Ok(None));
        let redacting = Redacting { inner: Arc::new(Minimal), redactor: Redactor::new([KEY.to_string()]) };
        assert_eq!(redacting.count_tokens(request).await, Ok(None));
    }
}
