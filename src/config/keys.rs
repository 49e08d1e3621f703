//! Every key the file may hold, read from the raw types themselves: a
//! field added to a raw section is a key here at once.

use serde::de::value::{Error, StrDeserializer};
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::Deserialize;

use super::RawConfig;

/// Every key of the file, dotted as errors name them (`listen`,
/// `proxy.connect_timeout`), in the order the raw types declare them. A
/// table of tables (`verify.ranges`) is one key.
pub fn keys() -> Vec<String> {
    let mut keys = Vec::new();
    let names = KeyNames {
        path: String::new(),
        keys: &mut keys,
    };
    RawConfig::deserialize(names).expect("the raw config reads from its field names");
    keys
}

/// A deserializer that reads no data: a struct (a section) yields its
/// field names, as serde's derive states them, and anything else records
/// its path as a key and reads as absent (every key is optional).
struct KeyNames<'a> {
    /// The dotted path of the value asked for; empty at the top.
    path: String,
    /// The keys found so far.
    keys: &'a mut Vec<String>,
}

impl<'de> de::Deserializer<'de> for KeyNames<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.keys.push(self.path);
        // `None` for an `Option`.
        visitor.visit_unit()
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_map(Fields {
            prefix: self.path,
            fields: fields.iter(),
            field: None,
            keys: self.keys,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// A section's fields, each given as present.
struct Fields<'a> {
    /// The section's dotted path; empty at the top.
    prefix: String,
    fields: std::slice::Iter<'static, &'static str>,
    /// The field whose value comes next.
    field: Option<&'static str>,
    keys: &'a mut Vec<String>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some(&field) = self.fields.next() else {
            return Ok(None);
        };
        self.field = Some(field);
        seed.deserialize(StrDeserializer::<Error>::new(field))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let field = self
            .field
            .take()
            .ok_or_else(|| de::Error::custom("a value before its key"))?;
        let path = match self.prefix.as_str() {
            "" => field.to_owned(),
            prefix => format!("{prefix}.{field}"),
        };
        seed.deserialize(KeyNames {
            path,
            keys: self.keys,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_every_section_is_listed() {
        let keys = keys();
        for key in [
            "listen",
            "sitemap_cache_control",
            "proxy.connect_timeout",
            "proxy.upstream_sni",
            "limits.max_headers",
            "shed.capped_share",
            "bot_cache.max_stale",
            "verify.enabled",
            "verify.ranges",
            "ai.search",
            "admin.listen",
        ] {
            assert!(keys.iter().any(|k| k == key), "{key} missing: {keys:?}");
        }
        // Sections are not keys themselves.
        assert!(!keys.iter().any(|k| k == "proxy" || k == "shed"));
        assert_eq!(keys.first().map(String::as_str), Some("listen"));
    }
}
