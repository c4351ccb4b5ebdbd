//! A streamable HTTP MCP server: rmcp's client transport over reqwest
//! (rustls), the `headers` of its settings sent with every request and
//! marked sensitive (so no `Debug` of a request shows them), and the
//! handshake. The url shown in messages is the one the settings write
//! (`${env:…}` unresolved); what the server or the HTTP stack says is
//! scrubbed of the resolved values by the caller (`Server::scrub`).

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::service::{ClientInitializeError, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::Client;
use crate::config::mcp::HttpServer;

/// Connects to the server `name` and does the handshake, within `wait`.
pub(super) async fn connect(name: &str, server: &HttpServer, wait: Duration) -> Result<Client, String> {
    let mut headers = HashMap::new();
    for (key, value) in &server.headers {
        let key_ = HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| format!("MCP server `{name}`: `{key}` is not a valid HTTP header name"))?;
        let mut value = HeaderValue::from_str(value.expose()).map_err(|_| {
            format!("MCP server `{name}`: the value of header `{key}` is not a valid HTTP header value")
        })?;
        value.set_sensitive(true);
        headers.insert(key_, value);
    }
    if plain_http_off_machine(server.url.expose()) && !headers.is_empty() {
        tracing::warn!(
            server = name,
            "MCP server over plain http:// to another machine: its headers travel unencrypted"
        );
    }
    let config = StreamableHttpClientTransportConfig::with_uri(server.url.expose()).custom_headers(headers);
    let transport = StreamableHttpClientTransport::from_config(config);
    let shown = &server.shown_url;
    match tokio::time::timeout(wait, ().serve(transport)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => {
            let why = match &e {
                // Past rmcp's name of the transport's type, to what went wrong.
                ClientInitializeError::TransportError { error, context } => {
                    format!("{} ({context})", chain(&*error.error))
                }
                other => chain(other),
            };
            if refused_credentials(&why) {
                Err(format!(
                    "MCP server `{name}` ({shown}) refused the credentials ({why}): check its `headers` and the variables they name"
                ))
            } else {
                Err(format!("MCP server `{name}` ({shown}) did not start: {why}"))
            }
        }
        Err(_) => {
            Err(format!("MCP server `{name}` ({shown}) did not answer the handshake within {} s", wait.as_secs()))
        }
    }
}

/// What went wrong in a request after the handshake.
pub(super) fn service_error(e: &ServiceError) -> String {
    match e {
        ServiceError::TransportSend(d) => chain(&*d.error),
        other => chain(other),
    }
}

/// An error and its sources, each said once.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = s.source();
    }
    text
}

/// Whether the error says the server refused the request's credentials
/// (401, 403, an authentication challenge).
pub(super) fn refused_credentials(why: &str) -> bool {
    ["HTTP 401", "HTTP 403", "Auth required", "Insufficient scope"].iter().any(|s| why.contains(s))
}

/// `http://` to a host other than this machine.
fn plain_http_off_machine(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    !(host == "localhost" || host == "::1" || host.starts_with("127."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_to_another_machine_is_told_apart_from_loopback_and_tls() {
        for (url, off) in [
            ("http://127.0.0.1:8080/mcp", false),
            ("http://localhost/mcp", false),
            ("http://[::1]:9/mcp", false),
            ("http://user:pw@127.0.0.1/mcp", false),
            ("https://mcp.example/mcp", false),
            ("http://mcp.example/mcp", true),
            ("http://10.0.0.2:80", true),
        ] {
            assert_eq!(plain_http_off_machine(url), off, "{url}");
        }
    }
}
