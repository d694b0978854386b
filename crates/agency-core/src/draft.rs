//! An agency as a person writes it: the one schema of the agency file (YAML, JSON accepted),
//! the management API's body (its OpenAPI schema is derived from these types) and the stored
//! draft. Names stand where the domain has ids, strings where it has types;
//! [`AgencyDraft::validate`] turns a draft into an [`crate::Agency`].
//!
//! The shape is the file's: providers, MCP servers, prices and environments are mappings keyed
//! by name, in the order written; a rule's text is `do`. Writing a file back
//! (`agency_file::to_yaml`) is `serde` of these types, so a field declared here is written,
//! read and sent everywhere, in declaration order.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

mod every;
mod fields;
pub(crate) mod validate;

pub use every::{CONFIGURATION_ONLY, every_agency_field, every_field, unset_fields};
pub use fields::fields_of;

/// An agency as its owner writes it. Agents are listed in display order.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgencyDraft {
    /// Letters, digits, `_`, `-` and `.`, starting with a letter; used in URLs.
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_.-]*$", max_length = 64)]
    pub name: String,
    /// An id for other systems (MQTT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    /// `json` (`{"to": 143, "context": ...}`, the default) or `directives` (`TO name: ...`).
    #[serde(default = "json_protocol")]
    pub protocol: String,
    /// The name of the agent who talks to the user.
    pub manager: String,
    /// Replies per turn before the manager must answer (default 16).
    #[schema(minimum = 1, maximum = 100_000)]
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_hops: Option<u32>,
    /// Time per turn before the manager must answer (default 300).
    #[schema(minimum = 1, maximum = 86_400)]
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn_deadline_secs: Option<u64>,
    /// What one turn may cost at most, in dollars: once its calls cost this much the manager
    /// is told to answer now, as at `max_hops`, and the turn records `stopped_by: budget`.
    /// Every agent's model then needs a price.
    #[serde(
        default,
        with = "amount_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<f64>)]
    pub max_turn_cost_usd: Option<String>,
    /// What the agency may spend per `budget_period`, in dollars: every key, the playground
    /// and MQTT together. Calls past it are refused. Every agent's model then needs a price.
    #[serde(
        default,
        with = "amount_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<f64>)]
    pub budget_usd: Option<String>,
    /// When `budget_usd` renews: `day`, `week`, `month` (the default; at midnight UTC) or
    /// `total` (never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::spend::Period>)]
    pub budget_period: Option<String>,
    /// Providers of the agency's own, by name.
    #[serde(default, with = "named", skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = BTreeMap<String, ProviderDraft>)]
    pub providers: Vec<ProviderDraft>,
    /// MCP servers of the agency's own, by name, whose tools its agents may list.
    #[serde(default, with = "named", skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = BTreeMap<String, McpServerDraft>)]
    pub mcp_servers: Vec<McpServerDraft>,
    pub agents: Vec<AgentDraft>,
}

fn json_protocol() -> String {
    "json".into()
}

/// A provider of the agency's own. Its key is never here: only the environment variable that
/// holds it (or a key stored under `/api/provider-keys`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderDraft {
    /// Its key in `providers`: what models name (`name/model`).
    #[serde(skip)]
    pub name: String,
    /// `openai` or `anthropic`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Calls in flight at once.
    #[schema(minimum = 1)]
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_concurrency: Option<u32>,
    /// Calls a minute at most; none: no limit.
    #[schema(minimum = 1)]
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub requests_per_minute: Option<u32>,
    /// Prices by model name, in dollars per million tokens: what turns cost.
    #[serde(default, with = "pairs", skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = BTreeMap<String, PriceDraft>)]
    pub prices: Vec<(String, PriceDraft)>,
}

/// A model's price: dollars per million tokens, as numbers (`2.5`) or decimal strings
/// (`"2.50"`), kept as written (validation reads them exactly, never through a float).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceDraft {
    #[serde(with = "amount")]
    #[schema(value_type = f64)]
    pub input: String,
    #[serde(with = "amount")]
    #[schema(value_type = f64)]
    pub output: String,
}

/// An MCP server of the agency's own: a Streamable HTTP `url`. (A `command`, which starts a
/// process on the server's machine, and `headers_env`, which reads server variables, are only
/// for the server's own configuration and are refused in an account's agency at their field.)
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerDraft {
    /// Its key in `mcp_servers`: what its tools' names start with (`name/tool`).
    #[serde(skip)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, with = "pairs", skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub env: Vec<(String, String)>,
    /// Header → the server variable holding its value.
    #[serde(default, with = "pairs", skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub headers_env: Vec<(String, String)>,
    /// Longest a call may run, in seconds (default 60).
    #[schema(minimum = 1, maximum = 3600)]
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout_secs: Option<u64>,
    /// Calls in flight at once (default 16).
    #[schema(minimum = 1, maximum = 256)]
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_concurrency: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentDraft {
    /// The number other agents address it by (0 is the user); given when absent.
    #[schema(minimum = 1)]
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub id: Option<u32>,
    /// Unique in the agency, case-insensitively; not `user` or `any`.
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_.-]*$", max_length = 64)]
    pub name: String,
    /// An id for other systems (MQTT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `provider/model`, e.g. `builtin/rules` or `openai/gpt-4o`.
    pub model: String,
    /// 0 to 2.
    #[schema(minimum = 0, maximum = 2)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// 0 to 1.
    #[schema(minimum = 0, maximum = 1)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// At least 1.
    #[schema(minimum = 1)]
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_tokens: Option<u32>,
    /// Reflect once the decayed importance of new observations passes this (default 2.0).
    #[schema(exclusive_minimum = 0, maximum = 1_000_000)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflection_threshold: Option<f64>,
    /// Hours in which an observation's weight halves (default 24).
    #[schema(exclusive_minimum = 0, maximum = 1_000_000)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflection_half_life_hours: Option<f64>,
    /// After each chat message it is sent over MQTT, it checks whether the message tells it
    /// something worth remembering, and observes it if so (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observe_chats: Option<bool>,
    /// Free text of its instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The tools it may call: `server/tool`, or `server/*` for every tool of a server
    /// (`builtin` is the server of the built-in tools).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Its tools whose every call waits for a person's approval first: `server/tool`, or
    /// `server/*` (each of a server named in `tools`). See `docs/approvals.md`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approve: Vec<String>,
    /// How long a call waits for an answer, in seconds (default: the server's, 300).
    #[schema(minimum = 1, maximum = 604_800)]
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub approve_timeout_secs: Option<u64>,
    /// What a call nobody answered in time gets: `deny` (the default) or `approve`.
    #[schema(pattern = "^(deny|approve)$")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve_on_timeout: Option<String>,
    /// Whoever approves may change the call's arguments (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve_edits: Option<bool>,
    /// Ad-lib rules: when a message is from `when`, `do` something, and send the response to
    /// `send_to`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleDraft>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleDraft {
    /// An agent's name, `user` or `any`.
    pub when: String,
    /// A tool to call first (`server/tool`, one of the agent's tools); `do` then sends its
    /// result as `{{result}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The call's arguments: an object whose strings may hold `{{message}}`, `{{from}}` and
    /// `{{count}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub with: Option<serde_json::Value>,
    /// What to send, with `{{message}}`, `{{from}}` and `{{count}}` filled in.
    #[serde(rename = "do")]
    pub action: String,
    /// Agents' names, or `user` (a list: a fan-out; one name alone is taken too).
    #[serde(deserialize_with = "one_or_many")]
    pub send_to: Vec<String>,
}

/// A draft item kept in a mapping under its name (`providers: { local: {...} }`).
trait Named {
    fn name(&self) -> &str;
    fn set_name(&mut self, name: String);
}

impl Named for ProviderDraft {
    fn name(&self) -> &str {
        &self.name
    }
    fn set_name(&mut self, name: String) {
        self.name = name;
    }
}

impl Named for McpServerDraft {
    fn name(&self) -> &str {
        &self.name
    }
    fn set_name(&mut self, name: String) {
        self.name = name;
    }
}

/// Items with a name as a mapping of name → the item's other fields, in order.
mod named {
    use serde::de::{Deserialize, Deserializer};
    use serde::ser::{SerializeMap, Serializer};

    use super::Named;

    pub fn serialize<S: Serializer, T: serde::Serialize + Named>(
        items: &[T],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(items.len()))?;
        for item in items {
            map.serialize_entry(item.name(), item)?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de> + Named>(
        d: D,
    ) -> Result<Vec<T>, D::Error> {
        let pairs: Vec<(String, T)> = super::pairs::deserialize(d)?;
        Ok(pairs
            .into_iter()
            .map(|(name, mut item)| {
                item.set_name(name);
                item
            })
            .collect())
    }
}

/// `(key, value)` pairs as a mapping, in order (a key given twice is kept twice, for
/// validation to name).
mod pairs {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
    use serde::ser::{Serialize, SerializeMap, Serializer};

    pub fn serialize<S: Serializer, T: Serialize>(
        pairs: &[(String, T)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(pairs.len()))?;
        for (k, v) in pairs {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Vec<(String, T)>, D::Error> {
        struct Pairs<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Pairs<T> {
            type Value = Vec<(String, T)>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping of names to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(pair) = map.next_entry()? {
                    out.push(pair);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Pairs(PhantomData))
    }
}

/// A decimal amount: read from a number or a string, exactly as written (never through a
/// float); written as the number it is (its digits kept), or as text when it is not one
/// (validation will name it).
mod amount {
    use serde::{Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(text: &String, s: S) -> Result<S::Ok, S::Error> {
        let number = text.starts_with(|c: char| c.is_ascii_digit())
            && crate::price::parse_dollars(text).is_ok()
            && text.trim() == text;
        match number
            .then(|| serde_json::value::RawValue::from_string(text.clone()).ok())
            .flatten()
        {
            Some(raw) => raw.serialize(s),
            None => text.serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        d.deserialize_any(Amount)
    }

    /// A number's JSON text (`2.5`, `10`), or a string as it is.
    struct Amount;

    impl<'de> serde::de::Visitor<'de> for Amount {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("dollars per million tokens: a number or a decimal string")
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<String, E> {
            Ok(n.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<String, E> {
            Ok(n.to_string())
        }
        fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<String, E> {
            serde_json::Number::from_f64(n)
                .map(|n| n.to_string())
                .ok_or_else(|| E::custom("not a finite number"))
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<String, E> {
            Ok(text.to_string())
        }
    }
}

/// `send_to: name` or `send_to: [a, b]`.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct OneOrMany;
    impl<'de> serde::de::Visitor<'de> for OneOrMany {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a name or a list of names (`[a, b]`)")
        }
        fn visit_str<E: serde::de::Error>(self, one: &str) -> Result<Self::Value, E> {
            Ok(vec![one.to_string()])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut items: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(name) = items.next_element()? {
                out.push(name);
            }
            Ok(out)
        }
    }
    d.deserialize_any(OneOrMany)
}

/// Whole numbers as JSON Schema reads them: `3` and `3.0` alike (the document's `integer` takes
/// both, so a client that writes every number as a float is not refused). The server's other
/// bodies read theirs with it too.
/// An optional amount of dollars (`with = "amount_option"`), kept as written.
pub mod amount_option {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    struct Written(#[serde(with = "super::amount")] String);

    pub fn serialize<S: Serializer>(text: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
        match text {
            Some(text) => super::amount::serialize(text, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(Option::<Written>::deserialize(d)?.map(|w| w.0))
    }
}

pub mod whole {
    use serde::{Deserialize, Deserializer, de::Error};

    /// An optional whole number (`deserialize_with = "whole::option"`).
    pub fn option<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<u64>,
    {
        let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
            return Ok(None);
        };
        let whole = n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 18_446_744_073_709_551_616.0)
                .map(|f| f as u64)
        });
        let whole =
            whole.ok_or_else(|| D::Error::custom(format!("`{n}` is not a whole number")))?;
        T::try_from(whole)
            .map(Some)
            .map_err(|_| D::Error::custom(format!("`{n}` is too large")))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_json_shape_is_the_files() {
        // Text, not `json!`: a `Value` would sort the keys before they are read.
        let d: AgencyDraft = serde_json::from_str(
            r#"{
            "name": "s", "manager": "m",
            "providers": { "local": { "kind": "openai", "prices": { "x": { "input": 2.50, "output": "10" } } } },
            "mcp_servers": { "web": { "url": "https://mcp.example.com/mcp", "env": { "B": "1", "A": "2" } } },
            "agents": [ { "name": "m", "model": "builtin/rules", "max_tokens": 3.0,
                          "rules": [ { "when": "user", "do": "hi", "send_to": "user" } ] } ]
        }"#,
        )
        .unwrap();
        assert_eq!(d.protocol, "json");
        assert_eq!(d.providers[0].name, "local");
        assert_eq!(d.providers[0].prices[0].1.input, "2.5");
        assert_eq!(d.providers[0].prices[0].1.output, "10");
        assert_eq!(d.mcp_servers[0].name, "web");
        assert_eq!(
            d.mcp_servers[0].env,
            [("B".into(), "1".into()), ("A".into(), "2".into())]
        );
        assert_eq!(d.agents[0].max_tokens, Some(3));
        assert_eq!(d.agents[0].rules[0].send_to, ["user"]);
        let back = serde_json::to_value(&d).unwrap();
        assert_eq!(
            back["providers"]["local"]["prices"]["x"],
            json!({"input": 2.5, "output": 10})
        );
        assert_eq!(back["agents"][0]["rules"][0]["send_to"], json!(["user"]));
        assert!(back["providers"]["local"].get("name").is_none());
    }

    #[test]
    fn amounts_keep_their_digits_and_text_stays_text() {
        let price = |input: &str| PriceDraft {
            input: input.into(),
            output: "x".into(),
        };
        let text = serde_json::to_string(&price("2.50")).unwrap();
        assert_eq!(text, r#"{"input":2.50,"output":"x"}"#);
        let e = serde_json::from_str::<PriceDraft>(r#"{"input": [], "output": 1}"#).unwrap_err();
        assert!(
            e.to_string().contains("a number or a decimal string"),
            "{e}"
        );
        for not_a_number in ["0012", ".5", " 1", "-1", "1e3", ""] {
            let text = serde_json::to_string(&price(not_a_number)).unwrap();
            let back: PriceDraft = serde_json::from_str(&text).unwrap();
            assert_eq!(back.input, not_a_number, "{text}");
        }
    }

    #[test]
    fn unknown_fields_and_fractions_are_refused() {
        let agent = |extra: serde_json::Value| {
            let mut a = json!({"name": "a", "model": "builtin/rules"});
            a.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value::<AgentDraft>(a)
        };
        assert!(agent(json!({"colour": 1})).is_err());
        assert!(agent(json!({"max_tokens": 1.5})).is_err());
        assert!(agent(json!({"max_tokens": 4294967296u64})).is_err());
        let rule = |send_to: serde_json::Value| {
            serde_json::from_value::<RuleDraft>(
                json!({"when": "user", "do": "x", "send_to": send_to}),
            )
        };
        assert_eq!(rule(json!(["a", "b"])).unwrap().send_to, ["a", "b"]);
        let e = rule(json!(3)).unwrap_err().to_string();
        assert!(e.contains("a name or a list of names"), "{e}");
    }
}
