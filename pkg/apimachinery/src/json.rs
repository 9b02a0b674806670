//! Compatibility with Go's `encoding/json` output.

/// Makes compact JSON produced by `serde_json` byte-identical to Go's `encoding/json` output for
/// the same document: Go additionally escapes `<`, `>`, `&`, U+2028 and U+2029. Those characters
/// can only occur inside string literals, so replacing them everywhere is safe.
pub fn go_escape_json(serde_output: &str) -> String {
    let mut out = String::with_capacity(serde_output.len());
    for c in serde_output.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_go() {
        assert_eq!(
            go_escape_json("{\"a\":\"<&>\",\"b\":\"x\u{2028}\"}"),
            r#"{"a":"\u003c\u0026\u003e","b":"x\u2028"}"#
        );
    }
}
