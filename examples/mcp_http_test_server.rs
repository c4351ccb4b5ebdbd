//! A streamable HTTP MCP server for the tests, on rmcp's own server side
//! (`StreamableHttpService`), served by hyper on 127.0.0.1 at a free port.
//! It prints its endpoint (`http://127.0.0.1:PORT/mcp`) as its first line on
//! stdout and serves until its stdin closes.
//!
//! With `MCP_TEST_TOKEN` set, every request must carry `Authorization:
//! Bearer <token>`; any other is answered 401 (no challenge). Each request
//! appends `auth ok` or `auth refused` to the file `MCP_TEST_LOG` names,
//! when set (never the header itself).
//!
//! Tools: `lookup` (`readOnlyHint`): `found <query> over http`; the query
//! `auth` answers with the Authorization header it received (a server that
//! echoes its credentials). `write_note`: `wrote <text>`.
//! Resources: `test://notes/readme` (text), `test://logo.png` (a blob);
//! any other uri is `resource not found`.

use std::convert::Infallible;
use std::io::Write;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;
use tower::ServiceExt;

/// The last Authorization header seen, for the `auth` query.
static LAST_AUTH: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

#[derive(Clone)]
struct TestServer;

fn schema(field: &str) -> Arc<serde_json::Map<String, serde_json::Value>> {
    let v = json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]});
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("lookup", "Looks a thing up.", schema("query"))
                .with_annotations(ToolAnnotations::new().read_only(true)),
            Tool::new("write_note", "Writes a note.", schema("text")),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arg = |k: &str| request.arguments.as_ref().and_then(|a| a.get(k)).and_then(|v| v.as_str()).unwrap_or("");
        let text = match request.name.as_ref() {
            "lookup" if arg("query") == "auth" => format!("auth header: {}", LAST_AUTH.lock().unwrap()),
            "lookup" => format!("found {} over http", arg("query")),
            "write_note" => format!("wrote {}", arg("text")),
            _ => return Err(ErrorData::invalid_params("unknown tool", None)),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new("test://notes/readme", "readme")
                .with_mime_type("text/markdown")
                .with_description("The project's notes."),
            Resource::new("test://logo.png", "logo").with_mime_type("image/png"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = match request.uri.as_str() {
            "test://notes/readme" => ResourceContents::text("# Notes\nDivide with care.", "test://notes/readme"),
            "test://logo.png" => ResourceContents::blob("iVBORw0KGgo=", "test://logo.png"),
            uri => return Err(ErrorData::resource_not_found(format!("no resource {uri}"), None)),
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

fn log(line: &str) {
    if let Ok(path) = std::env::var("MCP_TEST_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = f.write_all(format!("{line}\n").as_bytes()); // One write: logs are shared.
    }
}

#[tokio::main]
async fn main() {
    let token = std::env::var("MCP_TEST_TOKEN").ok();
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(|| Ok(TestServer), Default::default(), StreamableHttpServerConfig::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    println!("http://{addr}/mcp");
    let _ = std::io::stdout().flush();
    // Serves until stdin closes (the test dropped its end).
    tokio::spawn(async {
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
        std::process::exit(0);
    });
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let (service, token) = (service.clone(), token.clone());
        tokio::spawn(async move {
            let handle = service_fn(move |req: Request<hyper::body::Incoming>| {
                let (service, token) = (service.clone(), token.clone());
                async move {
                    let got = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
                    *LAST_AUTH.lock().unwrap() = got.to_string();
                    if let Some(token) = &token {
                        if got != format!("Bearer {token}") {
                            log("auth refused");
                            let body =
                                Full::new(Bytes::from("unauthorized")).map_err(|e: Infallible| match e {}).boxed();
                            let mut refused = Response::new(body);
                            *refused.status_mut() = StatusCode::UNAUTHORIZED;
                            return Ok::<_, Infallible>(refused);
                        }
                        log("auth ok");
                    }
                    service.oneshot(req).await
                }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handle).await;
        });
    }
}
