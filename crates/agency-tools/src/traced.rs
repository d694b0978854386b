//! The trace context of a tool call, to the MCP server. The hub puts the `execute_tool` span's
//! W3C `traceparent` (and `tracestate`) in the `tools/call` request's `params._meta` (SEP-414:
//! what servers on every transport read); over Streamable HTTP, [`Traced`] also sends them as
//! the request's HTTP headers, which is what HTTP middleware and proxies read. The request
//! leaves from the connection's own task (outside the call's span), so the context travels
//! with the message rather than being read from the current span there.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, GetMeta, JsonRpcMessage, RequestMetaObject};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// The current span's trace context as a request's `_meta`; `None` with tracing off.
pub(crate) fn meta() -> Option<RequestMetaObject> {
    let mut meta = RequestMetaObject::new();
    for (key, value) in agency_telemetry::propagate::pairs() {
        match key.as_str() {
            "traceparent" => meta.set_traceparent(value),
            "tracestate" => meta.set_tracestate(value),
            _ => {}
        }
    }
    meta.get_traceparent().is_some().then_some(meta)
}

/// `headers` with the `traceparent` and `tracestate` of `message`'s `_meta`, when it is a
/// request that carries them (and they are valid header values).
fn with_trace(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    let JsonRpcMessage::Request(request) = message else {
        return headers;
    };
    let meta = request.request.get_meta();
    for (name, value) in [
        ("traceparent", meta.get_traceparent()),
        ("tracestate", meta.get_tracestate()),
    ] {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

/// rmcp's reqwest client, with each request's trace context as HTTP headers too. Everything
/// else (limits, redirects, errors) is the inner client's.
#[derive(Clone)]
pub(crate) struct Traced(pub reqwest::Client);

type Post = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;
type Stream =
    Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<reqwest::Error>>;

impl StreamableHttpClient for Traced {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Post {
        let headers = with_trace(&message, custom_headers);
        self.0
            .post_message(uri, message, session_id, auth_header, headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Post {
        let headers = with_trace(&message, custom_headers);
        self.0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Post {
        let headers = with_trace(&message, custom_headers);
        self.0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Stream {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Stream {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequestParams, ClientRequest, JsonRpcRequest, Request, RequestId};

    fn call(meta: Option<RequestMetaObject>) -> ClientJsonRpcMessage {
        let mut request =
            ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("now")));
        if let Some(meta) = meta {
            *request.get_meta_mut() = meta;
        }
        JsonRpcMessage::Request(JsonRpcRequest::new(RequestId::Number(7), request))
    }

    #[test]
    fn a_requests_trace_context_goes_into_its_headers() {
        let mut meta = RequestMetaObject::new();
        meta.set_traceparent("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01");
        meta.set_tracestate("vendor=1");
        let mut given = HashMap::new();
        given.insert(
            HeaderName::from_static("authorization"),
            HeaderValue::from_static("Bearer x"),
        );
        let headers = with_trace(&call(Some(meta)), given.clone());
        // (`HeaderName` hashes apart from `str`: looked up by name.)
        let header = |name| &headers[&HeaderName::from_static(name)];
        assert_eq!(
            header("traceparent"),
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
        );
        assert_eq!(header("tracestate"), "vendor=1");
        assert_eq!(header("authorization"), "Bearer x");
        // Without a context, or with one no header can carry, the headers stay as given.
        assert_eq!(with_trace(&call(None), given.clone()), given);
        let mut bad = RequestMetaObject::new();
        bad.set_traceparent("00-\n-bad");
        assert_eq!(with_trace(&call(Some(bad)), given.clone()), given);
    }

    #[test]
    fn without_tracing_there_is_no_context() {
        assert!(meta().is_none());
    }
}
