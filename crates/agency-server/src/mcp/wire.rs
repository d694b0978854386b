//! MCP's JSON-RPC on the wire, for both revisions served: the messages read, the errors and
//! results written. Shapes and codes follow the official SDKs (`mcp_types` of PyPI `mcp`
//! 2.3.0, `@modelcontextprotocol/sdk` 1.32.2).

use serde_json::{Map, Value, json};

/// The stateless revision: no handshake, every request carries its envelope in `_meta`.
pub const MODERN: &str = "2026-07-28";
/// The revisions reached through the `initialize` handshake, newest first (the one offered
/// to a client that asks for another).
pub const HANDSHAKE: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// `_meta` keys of the 2026-07-28 envelope.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// JSON-RPC's codes, and MCP's.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const HEADER_MISMATCH: i64 = -32020;
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Every revision served.
pub fn supported() -> Vec<&'static str> {
    let mut all = vec![MODERN];
    all.extend(HANDSHAKE);
    all
}

/// Whether `version` is one this server speaks.
pub fn is_supported(version: &str) -> bool {
    version == MODERN || HANDSHAKE.contains(&version)
}

/// One message a client sent.
#[derive(Debug)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A response to a request of the server's (it sends none): ignored.
    Response,
}

/// A JSON-RPC error, before it is addressed to a request.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        Self {
            data: Some(Value::String(method.to_string())),
            ..Self::new(METHOD_NOT_FOUND, "Method not found")
        }
    }

    /// A version this server does not speak; `data` names those it does.
    pub fn unsupported_version(requested: &str) -> Self {
        Self {
            data: Some(json!({ "supported": supported(), "requested": requested })),
            ..Self::new(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
        }
    }

    /// The HTTP status of a response carrying this error (see [`http_status`]).
    pub fn http_status(&self) -> u16 {
        http_status(self.code)
    }

    /// The error response to request `id` (`null` when it could not be read).
    pub fn to(&self, id: Value) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        json!({ "jsonrpc": "2.0", "id": id, "error": error })
    }
}

/// The HTTP status of a response carrying an error of `code` at 2026-07-28 (the SDKs' table;
/// other codes are 200). Handshake-era clients read errors from 200 responses only.
pub fn http_status(code: i64) -> u16 {
    match code {
        PARSE_ERROR
        | INVALID_REQUEST
        | INVALID_PARAMS
        | HEADER_MISMATCH
        | UNSUPPORTED_PROTOCOL_VERSION => 400,
        METHOD_NOT_FOUND => 404,
        _ => 200,
    }
}

/// A result to request `id`.
pub fn result(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// A notification of the server's.
pub fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

/// Reads one message (a batch is not one: neither revision has batches).
pub fn parse(body: &[u8]) -> Result<Message, RpcError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| RpcError::new(PARSE_ERROR, "Parse error"))?;
    read(value)
}

/// A decoded message's kind.
pub fn read(value: Value) -> Result<Message, RpcError> {
    let invalid = || {
        RpcError::new(
            INVALID_REQUEST,
            "Body must be a single JSON-RPC request or notification object",
        )
    };
    let Value::Object(mut object) = value else {
        return Err(invalid());
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid());
    }
    let params = match object.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return Err(RpcError::invalid_params("`params` must be an object")),
    };
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        None if object.contains_key("result") || object.contains_key("error") => {
            return Ok(Message::Response);
        }
        _ => return Err(invalid()),
    };
    match object.remove("id") {
        None => Ok(Message::Notification { method, params }),
        Some(id @ (Value::String(_) | Value::Number(_))) => {
            Ok(Message::Request { id, method, params })
        }
        Some(_) => Err(invalid()),
    }
}

/// The `_meta` of a request's params.
pub fn meta(params: &Map<String, Value>) -> Option<&Map<String, Value>> {
    params.get("_meta").and_then(Value::as_object)
}

/// The progress token a request carries, if any.
pub fn progress_token(params: &Map<String, Value>) -> Option<Value> {
    meta(params)
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned()
}

/// The protocol version a request's 2026-07-28 envelope names: `Ok(None)` without one (a
/// handshake-era request), an error when the envelope is malformed.
pub fn envelope_version(params: &Map<String, Value>) -> Result<Option<String>, RpcError> {
    let Some(meta) = meta(params) else {
        return Ok(None);
    };
    let Some(version) = meta.get(META_VERSION) else {
        return Ok(None);
    };
    let Some(version) = version.as_str() else {
        return Err(RpcError::invalid_params(
            "the protocol-version envelope value must be a string",
        ));
    };
    if !meta.contains_key(META_CAPABILITIES) {
        return Err(RpcError::invalid_params(format!(
            "params._meta is missing the required envelope key(s): {META_CAPABILITIES}"
        )));
    }
    Ok(Some(version.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart() {
        let m = parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
        assert!(matches!(m, Message::Request { method, .. } if method == "tools/list"));
        let m = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(m, Message::Notification { .. }));
        let m = parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        assert!(matches!(m, Message::Response));
        assert_eq!(parse(b"{").unwrap_err().code, PARSE_ERROR);
        assert_eq!(parse(b"[]").unwrap_err().code, INVALID_REQUEST);
        let e = parse(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).unwrap_err();
        assert_eq!(e.code, INVALID_REQUEST);
        let e = parse(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
    }

    #[test]
    fn the_envelope_names_the_version() {
        let params = |v: Value| v.as_object().unwrap().clone();
        let p = params(json!({"_meta": {META_VERSION: MODERN, META_CAPABILITIES: {}}}));
        assert_eq!(envelope_version(&p).unwrap().as_deref(), Some(MODERN));
        assert_eq!(envelope_version(&params(json!({}))).unwrap(), None);
        let p = params(json!({"_meta": {META_VERSION: MODERN}}));
        assert_eq!(envelope_version(&p).unwrap_err().code, INVALID_PARAMS);
        let e = RpcError::unsupported_version("1999-01-01");
        assert_eq!(e.http_status(), 400);
        assert_eq!(e.to(json!(3))["error"]["data"]["requested"], "1999-01-01");
    }
}
