//! The fields a draft type declares, read off its `Deserialize`: what a file may say (the
//! reader's known fields) and what [`super::unset_fields`] checks is what the type says.

use serde::de::{self, DeserializeOwned, Visitor};

/// The fields `T` declares, by their names in a file (`do` for a rule's action), in declaration
/// order; none when `T` is not a struct. Fields serde skips (a provider's `name`, which is its
/// key) are not among them.
pub fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    match T::deserialize(Probe) {
        Err(Found(Some(fields))) => fields,
        _ => &[],
    }
}

/// A deserializer that answers a struct's request with the names of its fields.
struct Probe;

#[derive(Debug)]
struct Found(Option<&'static [&'static str]>);

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not a struct")
    }
}

impl std::error::Error for Found {}

impl de::Error for Found {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Found(None)
    }
}

impl<'de> de::Deserializer<'de> for Probe {
    type Error = Found;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
        Err(Found(None))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Found> {
        Err(Found(Some(fields)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::draft::{PriceDraft, ProviderDraft, RuleDraft};

    #[test]
    fn the_fields_are_the_types() {
        assert_eq!(
            fields_of::<RuleDraft>(),
            ["when", "call", "with", "do", "send_to"]
        );
        assert!(!fields_of::<ProviderDraft>().contains(&"name"), "the key");
        assert_eq!(fields_of::<PriceDraft>(), ["input", "output"]);
        assert!(fields_of::<String>().is_empty());
    }
}
