//! Any `Serialize` value as a tree that keeps its fields in the order they are serialized (a
//! struct's declaration order), for [`crate::write`] to lay out as YAML. `serde_json::Value`
//! would sort them (its `preserve_order` feature would change JSON everywhere in the
//! workspace), hence this small serializer of our own.

use std::fmt;

use serde::ser::{self, Serialize};

/// A serialized value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    /// A number, already written (integers, `serde_json`'s raw values: a price's `2.50`).
    Number(String),
    Float(f64),
    Text(String),
    List(Vec<Node>),
    /// Keys in the order they were serialized.
    Map(Vec<(String, Node)>),
}

/// What a value's `Serialize` reported (ours report nothing).
#[derive(Debug)]
pub(crate) struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

pub(crate) fn to_tree<T: Serialize + ?Sized>(value: &T) -> Result<Node, Error> {
    value.serialize(Tree)
}

/// How `serde_json` serializes a `RawValue`: a struct of this name with one field of this name.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

struct Tree;

/// Whole numbers, written as they are.
macro_rules! numbers {
    ($($method:ident: $t:ty),* $(,)?) => {
        $(fn $method(self, v: $t) -> Result<Node, Error> {
            Ok(Node::Number(v.to_string()))
        })*
    };
}

/// A map key as text: strings as they are, scalars as they are written.
fn key_of(node: Node) -> String {
    match node {
        Node::Text(s) | Node::Number(s) => s,
        Node::Bool(b) => b.to_string(),
        Node::Float(f) => f.to_string(),
        Node::Null => "null".into(),
        other => format!("{other:?}"),
    }
}

impl ser::Serializer for Tree {
    type Ok = Node;
    type Error = Error;
    type SerializeSeq = List;
    type SerializeTuple = List;
    type SerializeTupleStruct = List;
    type SerializeTupleVariant = Variant<List>;
    type SerializeMap = Map;
    type SerializeStruct = Map;
    type SerializeStructVariant = Variant<Map>;

    fn serialize_bool(self, v: bool) -> Result<Node, Error> {
        Ok(Node::Bool(v))
    }
    numbers! {
        serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128
    }
    fn serialize_f32(self, v: f32) -> Result<Node, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<Node, Error> {
        Ok(Node::Float(v))
    }
    fn serialize_char(self, v: char) -> Result<Node, Error> {
        Ok(Node::Text(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Node, Error> {
        Ok(Node::Text(v.to_string()))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Node, Error> {
        Ok(Node::List(
            v.iter().map(|b| Node::Number(b.to_string())).collect(),
        ))
    }
    fn serialize_none(self) -> Result<Node, Error> {
        Ok(Node::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Node, Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Node, Error> {
        Ok(Node::Null)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Node, Error> {
        Ok(Node::Null)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Node, Error> {
        Ok(Node::Text(variant.into()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Node, Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Node, Error> {
        Ok(Node::Map(vec![(variant.into(), value.serialize(Tree)?)]))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<List, Error> {
        Ok(List(Vec::with_capacity(len.unwrap_or(0))))
    }
    fn serialize_tuple(self, len: usize) -> Result<List, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<List, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Variant<List>, Error> {
        Ok(Variant(variant, self.serialize_seq(Some(len))?))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Map, Error> {
        Ok(Map {
            entries: Vec::with_capacity(len.unwrap_or(0)),
            key: None,
            raw: false,
        })
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Map, Error> {
        let mut map = self.serialize_map(Some(len))?;
        map.raw = name == RAW_VALUE;
        Ok(map)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Variant<Map>, Error> {
        Ok(Variant(variant, self.serialize_map(Some(len))?))
    }
}

pub(crate) struct List(Vec<Node>);

impl List {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.0.push(value.serialize(Tree)?);
        Ok(())
    }
}

/// A list's three ways in: a sequence, a tuple, a tuple struct.
macro_rules! list {
    ($($trait:ident :: $method:ident),*) => {
        $(impl ser::$trait for List {
            type Ok = Node;
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.push(value)
            }
            fn end(self) -> Result<Node, Error> {
                Ok(Node::List(self.0))
            }
        })*
    };
}

list!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

pub(crate) struct Map {
    entries: Vec<(String, Node)>,
    key: Option<String>,
    /// A `serde_json` raw value: its one field is the number's text.
    raw: bool,
}

impl Map {
    fn end(self) -> Node {
        match (self.raw, self.entries.as_slice()) {
            (true, [(_, Node::Text(text))]) => Node::Number(text.clone()),
            _ => Node::Map(self.entries),
        }
    }
}

impl ser::SerializeMap for Map {
    type Ok = Node;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(key_of(key.serialize(Tree)?));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = self.key.take().unwrap_or_default();
        self.entries.push((key, value.serialize(Tree)?));
        Ok(())
    }
    fn end(self) -> Result<Node, Error> {
        Ok(Map::end(self))
    }
}

impl ser::SerializeStruct for Map {
    type Ok = Node;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.entries.push((key.into(), value.serialize(Tree)?));
        Ok(())
    }
    fn end(self) -> Result<Node, Error> {
        Ok(Map::end(self))
    }
}

/// An enum's variant with fields: `{variant: fields}`.
pub(crate) struct Variant<T>(&'static str, T);

impl ser::SerializeTupleVariant for Variant<List> {
    type Ok = Node;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.1.push(value)
    }
    fn end(self) -> Result<Node, Error> {
        Ok(Node::Map(vec![(self.0.into(), Node::List(self.1.0))]))
    }
}

impl ser::SerializeStructVariant for Variant<Map> {
    type Ok = Node;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(&mut self.1, key, value)
    }
    fn end(self) -> Result<Node, Error> {
        Ok(Node::Map(vec![(self.0.into(), self.1.end())]))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_their_order_and_raw_numbers_their_digits() {
        #[derive(serde::Serialize)]
        struct S {
            z: u32,
            a: Option<String>,
            m: Box<serde_json::value::RawValue>,
        }
        let s = S {
            z: 1,
            a: None,
            m: serde_json::value::RawValue::from_string("2.50".into()).unwrap(),
        };
        assert_eq!(
            to_tree(&s).unwrap(),
            Node::Map(vec![
                ("z".into(), Node::Number("1".into())),
                ("a".into(), Node::Null),
                ("m".into(), Node::Number("2.50".into())),
            ])
        );
    }
}
