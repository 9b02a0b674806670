//! An order-preserving JSON document with numbers kept as written, so that JSON embedded in string
//! fields round-trips the way Karmada's JSON-patch library writes it: keys in their original order,
//! new keys appended, numbers verbatim, compact output with Go's HTML escaping.

use std::fmt::Write as _;

use serde_json::Value;

/// A JSON value whose objects keep their key order and whose numbers keep their text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Doc {
    Null,
    Bool(bool),
    /// A number, as written (already validated as JSON number syntax).
    Number(String),
    String(String),
    Array(Vec<Doc>),
    Object(Vec<(String, Doc)>),
}

impl Doc {
    /// The JSON type name, for error messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "boolean",
            Self::Number(_) => "number",
            Self::String(_) => "string",
            Self::Array(_) => "array",
            Self::Object(_) => "object",
        }
    }

    /// Looks up a key of an object.
    pub(crate) fn get_key(&self, key: &str) -> Option<&Doc> {
        match self {
            Self::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Converts from a `serde_json::Value` (object keys in the map's order).
    pub(crate) fn from_value(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => Self::Number(n.to_string()),
            Value::String(s) => Self::String(s.clone()),
            Value::Array(items) => Self::Array(items.iter().map(Self::from_value).collect()),
            Value::Object(map) => Self::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), Self::from_value(v)))
                    .collect(),
            ),
        }
    }

    /// Converts into a `serde_json::Value`; a number that `serde_json` cannot represent becomes an
    /// error message.
    pub(crate) fn to_value(&self) -> Result<Value, String> {
        Ok(match self {
            Self::Null => Value::Null,
            Self::Bool(b) => Value::Bool(*b),
            Self::Number(n) => serde_json::from_str::<Value>(n)
                .map_err(|e| format!("number {n} cannot be represented: {e}"))?,
            Self::String(s) => Value::String(s.clone()),
            Self::Array(items) => {
                Value::Array(items.iter().map(Self::to_value).collect::<Result<_, _>>()?)
            }
            Self::Object(entries) => {
                let mut map = serde_json::Map::new();
                for (k, v) in entries {
                    map.insert(k.clone(), v.to_value()?);
                }
                Value::Object(map)
            }
        })
    }

    /// Parses JSON text (RFC 8259; surrounding whitespace allowed).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut parser = Parser {
            bytes: text.as_bytes(),
            pos: 0,
            depth: 0,
        };
        parser.skip_ws();
        let doc = parser.value()?;
        parser.skip_ws();
        if parser.pos != parser.bytes.len() {
            return Err(format!(
                "invalid JSON: unexpected data after the document at offset {}",
                parser.pos
            ));
        }
        Ok(doc)
    }

    /// Compact JSON as Go's `encoding/json` writes it (HTML characters and U+2028/U+2029 escaped).
    pub(crate) fn to_go_json(&self) -> String {
        let mut out = String::new();
        self.write_go_json(&mut out);
        out
    }

    fn write_go_json(&self, out: &mut String) {
        match self {
            Self::Null => out.push_str("null"),
            Self::Bool(true) => out.push_str("true"),
            Self::Bool(false) => out.push_str("false"),
            Self::Number(n) => out.push_str(n),
            Self::String(s) => write_go_string(s, out),
            Self::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_go_json(out);
                }
                out.push(']');
            }
            Self::Object(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_go_string(k, out);
                    out.push(':');
                    v.write_go_json(out);
                }
                out.push('}');
            }
        }
    }
}

/// Writes a JSON string literal escaped like Go's `encoding/json` (with HTML escaping).
pub(crate) fn write_go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Nesting limit, so hostile input cannot exhaust the stack.
const MAX_DEPTH: usize = 512;

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("invalid JSON: {what} at offset {}", self.pos))
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &str, doc: Doc) -> Result<Doc, String> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(doc)
        } else {
            self.err("unexpected token")
        }
    }

    fn value(&mut self) -> Result<Doc, String> {
        match self.peek() {
            None => self.err("unexpected end of input"),
            Some(b'n') => self.literal("null", Doc::Null),
            Some(b't') => self.literal("true", Doc::Bool(true)),
            Some(b'f') => self.literal("false", Doc::Bool(false)),
            Some(b'"') => Ok(Doc::String(self.string()?)),
            Some(b'[') => self.nested(Parser::array),
            Some(b'{') => self.nested(Parser::object),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.err("unexpected character"),
        }
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Result<Doc, String>) -> Result<Doc, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("document nested too deeply");
        }
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn array(&mut self) -> Result<Doc, String> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Doc::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Doc::Array(items));
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
    }

    fn object(&mut self) -> Result<Doc, String> {
        self.pos += 1;
        let mut entries: Vec<(String, Doc)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Doc::Object(entries));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return self.err("expected a string key");
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return self.err("expected ':'");
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value()?;
            // Duplicate keys: the last one wins, in the position of the first (as Go maps do).
            if let Some(slot) = entries.iter_mut().find(|(k, _)| *k == key) {
                slot.1 = value;
            } else {
                entries.push((key, value));
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Doc::Object(entries));
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
    }

    fn number(&mut self) -> Result<Doc, String> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while matches!(self.peek(), Some(b'0'..=b'9')) {
                    self.pos += 1;
                }
            }
            _ => return self.err("invalid number"),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return self.err("invalid number");
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return self.err("invalid number");
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        let text = String::from_utf8_lossy(&self.bytes[start..self.pos]).into_owned();
        Ok(Doc::Number(text))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let Some(chunk) = self.bytes.get(self.pos..self.pos + 4) else {
            return self.err("truncated \\u escape");
        };
        let text =
            std::str::from_utf8(chunk).map_err(|_| "invalid JSON: bad \\u escape".to_owned())?;
        let code = u32::from_str_radix(text, 16)
            .map_err(|_| format!("invalid JSON: bad \\u escape at offset {}", self.pos))?;
        self.pos += 4;
        Ok(code)
    }

    fn string(&mut self) -> Result<String, String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            let chunk = std::str::from_utf8(&self.bytes[start..self.pos])
                .map_err(|_| format!("invalid JSON: invalid UTF-8 at offset {start}"))?;
            out.push_str(chunk);
            match self.peek() {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let Some(escape) = self.peek() else {
                        return self.err("unterminated escape");
                    };
                    self.pos += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let first = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&first)
                                && self.bytes.get(self.pos..self.pos + 2) == Some(b"\\u")
                            {
                                let save = self.pos;
                                self.pos += 2;
                                let second = self.hex4()?;
                                if (0xDC00..0xE000).contains(&second) {
                                    0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                                } else {
                                    self.pos = save;
                                    0xFFFD
                                }
                            } else {
                                first
                            };
                            out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                        }
                        _ => return self.err("invalid escape"),
                    }
                }
                Some(_) => return self.err("control character in string"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_order_and_numbers() {
        let text = r#" {"b": 1.0, "a": [1e3, -0, "x<y&z>"], "c": {"z": null, "y": true}} "#;
        let doc = Doc::parse(text).unwrap();
        assert_eq!(
            doc.to_go_json(),
            r#"{"b":1.0,"a":[1e3,-0,"x\u003cy\u0026z\u003e"],"c":{"z":null,"y":true}}"#
        );
    }

    #[test]
    fn escapes_and_unicode() {
        let doc = Doc::parse(r#""\u00e9\ud83d\ude00\n\t\"\\\/""#).unwrap();
        assert_eq!(doc, Doc::String("é😀\n\t\"\\/".into()));
        assert_eq!(doc.to_go_json(), "\"é😀\\n\\t\\\"\\\\/\"");
        assert_eq!(Doc::String("\u{1}".into()).to_go_json(), "\"\\u0001\"");
    }

    #[test]
    fn rejects_invalid() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "01",
            "1.",
            "tru",
            "\"a",
            "{} x",
            "-",
        ] {
            assert!(Doc::parse(bad).is_err(), "{bad:?} should fail");
        }
        let deep = "[".repeat(MAX_DEPTH + 5);
        assert!(Doc::parse(&deep).is_err());
    }

    #[test]
    fn value_conversion() {
        let v = serde_json::json!({"a": [1, 2.5, "s", null, true], "b": {"c": -3}});
        let doc = Doc::from_value(&v);
        assert_eq!(doc.to_value().unwrap(), v);
    }
}
