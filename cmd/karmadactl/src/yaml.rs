//! YAML output in the shape Karmada's `karmadactl` prints (gopkg.in/yaml.v3 of a JSON value):
//! 4-space indentation, sequences indented under their key, keys sorted, strings plain unless
//! they would read back as another type (then double-quoted) or contain YAML indicators (then
//! single-quoted), multi-line strings as literal blocks. Long lines are not folded; a key spanning
//! lines, and a multi-line string whose first line starts with a space, are double-quoted (yaml.v3
//! writes a complex key and an indentation indicator). Whatever it writes reads back as the same
//! value (property test below).

use serde_json::Value;

/// yaml.v3's indentation (Karmada's `interpret`).
const INDENT: usize = 4;

/// How collections are laid out.
#[derive(Debug, Clone, Copy)]
struct Style {
    /// Spaces per level.
    indent: usize,
    /// A sequence under a mapping key starts at the key's column (yaml.v2, sigs.k8s.io/yaml).
    indentless: bool,
}

const V3: Style = Style {
    indent: INDENT,
    indentless: false,
};

/// sigs.k8s.io/yaml (kubectl's `-o yaml`): 2 spaces, sequences at their key's column.
const K8S: Style = Style {
    indent: 2,
    indentless: true,
};

/// `value` as a YAML document (ending in a newline), as yaml.v3 writes it.
pub fn to_string(value: &Value) -> String {
    document(value, V3)
}

/// `value` as kubectl's `-o yaml` writes an object (sigs.k8s.io/yaml: 2-space indentation,
/// sequences not indented under their key).
pub fn to_string_k8s(value: &Value) -> String {
    document(value, K8S)
}

fn document(value: &Value, style: Style) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => mapping(&mut out, value, 0, style),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0, style),
        _ => {
            out.push_str(&scalar(value, style.indent));
            out.push('\n');
        }
    }
    out
}

fn sorted(m: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = m.iter().collect();
    entries.sort_by(|a, b| key_order(a.0, b.0));
    entries
}

/// yaml.v3's key order: letters compare as characters, letters sort after other characters
/// except right after a digit, and runs of digits compare as numbers (`item-9` < `item-10`).
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (ar, br): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut digits = false;
    for i in 0..ar.len().min(br.len()) {
        if ar[i] == br[i] {
            digits = ar[i].is_numeric();
            continue;
        }
        let (al, bl) = (ar[i].is_alphabetic(), br[i].is_alphabetic());
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            // `al` sorts first after a digit, else `bl` does.
            let a_first = if digits { al } else { bl };
            return if a_first {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_numeric() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let run = |r: &[char], mut n: i64| {
            let mut k = i;
            while k < r.len() && r[k].is_ascii_digit() {
                n = n
                    .wrapping_mul(10)
                    .wrapping_add(i64::from(r[k] as u8 - b'0'));
                k += 1;
            }
            (n, k)
        };
        let ((an, ai), (bn, bi)) = (run(&ar, an), run(&br, bn));
        return an.cmp(&bn).then(ai.cmp(&bi)).then(ar[i].cmp(&br[i]));
    }
    ar.len().cmp(&br.len())
}

/// The indentation of what a mapping at `indent` holds: the next multiple of the step (yaml.v3
/// aligns everything but sequence items to the chosen indentation).
fn nested(indent: usize, style: Style) -> usize {
    style.indent * ((indent + style.indent) / style.indent)
}

/// A mapping's entries, each line indented by `indent` (the first line's indentation is written by
/// the caller when the mapping starts a sequence item).
fn mapping(out: &mut String, value: &Value, indent: usize, style: Style) {
    let Value::Object(m) = value else { return };
    let child = nested(indent, style);
    for (i, (key, v)) in sorted(m).into_iter().enumerate() {
        if i > 0 {
            out.push_str(&" ".repeat(indent));
        }
        // A key spanning lines is written double-quoted (yaml.v3 would write a `? ` complex key).
        out.push_str(&if key.contains('\n') {
            double_quoted(key)
        } else {
            string(key, child)
        });
        out.push(':');
        match v {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                out.push_str(&" ".repeat(child));
                mapping(out, v, child, style);
            }
            Value::Array(items) if !items.is_empty() => {
                let at = if style.indentless { indent } else { child };
                out.push('\n');
                out.push_str(&" ".repeat(at));
                sequence(out, items, at, style);
            }
            _ => {
                out.push(' ');
                out.push_str(&scalar(v, child));
                out.push('\n');
            }
        }
    }
}

/// A sequence's items, `- ` at `indent` (the first item's indentation written by the caller);
/// what an item holds starts right after the `- `.
fn sequence(out: &mut String, items: &[Value], indent: usize, style: Style) {
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str("- ");
        match v {
            Value::Object(inner) if !inner.is_empty() => mapping(out, v, indent + 2, style),
            Value::Array(inner) if !inner.is_empty() => sequence(out, inner, indent + 2, style),
            _ => {
                out.push_str(&scalar(v, indent + 2));
                out.push('\n');
            }
        }
    }
}

fn scalar(v: &Value, indent: usize) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => string(s, indent),
        Value::Object(_) => "{}".to_owned(),
        Value::Array(_) => "[]".to_owned(),
    }
}

/// Numbers as Go's yaml.v3 prints the float64 `encoding/json` decodes them into
/// (`strconv.FormatFloat(f, 'g', -1, 64)`: exponent form from 1e+06 on and below 1e-04).
fn number(n: &serde_json::Number) -> String {
    let f = n.as_f64().unwrap_or(0.0);
    if f == 0.0 {
        return "0".to_owned();
    }
    if !f.is_finite() {
        return if f.is_nan() {
            ".nan".to_owned()
        } else if f > 0.0 {
            ".inf".to_owned()
        } else {
            "-.inf".to_owned()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits, like Go's precision -1.
    let e = format!("{f:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        f.to_string()
    }
}

/// Whether a plain scalar `s` would read back as something other than a string (yaml.v3's
/// resolver, plus its old YAML 1.1 booleans and base-60 numbers).
fn resolves_to_other_type(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "", "~", "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE", "y",
        "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
        "OFF", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
        ".nan", ".NaN", ".NAN", "<<",
    ];
    if WORDS.contains(&s) {
        return true;
    }
    let Some(first) = s.chars().next() else {
        return true;
    };
    if !(first.is_ascii_digit() || matches!(first, '+' | '-' | '.')) {
        return false;
    }
    let plain = s.replace('_', "");
    let unsigned = plain.trim_start_matches(['+', '-']);
    let is_int =
        |digits: &str, radix: u32| !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix));
    if is_int(unsigned, 10)
        || unsigned.strip_prefix("0x").is_some_and(|d| is_int(d, 16))
        || unsigned.strip_prefix("0o").is_some_and(|d| is_int(d, 8))
        || unsigned.strip_prefix("0b").is_some_and(|d| is_int(d, 2))
        || is_float(unsigned)
    {
        return true;
    }
    // Timestamps (2001-12-14, 2001-12-14t21:59:43.10-05:00, ...) and base-60 numbers (1:20).
    let b = s.as_bytes();
    let date = b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && (b[5..].iter().take_while(|c| c.is_ascii_digit()).count() > 0);
    date || base60(s)
}

/// YAML 1.1's base-60 numbers (`190:20:30.15`): `[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?`.
fn base60(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
    if !fraction.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return false;
    }
    let mut parts = whole.split(':');
    let head = parts.next().unwrap_or("");
    let head_ok = head.chars().next().is_some_and(|c| c.is_ascii_digit())
        && head.chars().all(|c| c.is_ascii_digit() || c == '_');
    let mut sexagesimal = 0;
    for p in parts {
        let ok = match p.as_bytes() {
            [d] => d.is_ascii_digit(),
            [t, d] => (b'0'..=b'5').contains(t) && d.is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
        sexagesimal += 1;
    }
    head_ok && sexagesimal > 0
}

fn is_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |p: &str| p.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = digits(int) && digits(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.trim_start_matches(['+', '-']);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok && (mantissa.contains('.') || exponent.is_some())
}

/// libyaml's check for a plain scalar: no leading indicator, no `: ` or ` #`, no leading or
/// trailing space, printable characters only.
fn plain_allowed(s: &str) -> bool {
    let first = s.chars().next().unwrap_or(' ');
    let second_blank = s.chars().nth(1).is_none_or(|c| c == ' ');
    if matches!(
        first,
        '#' | ','
            | '['
            | ']'
            | '{'
            | '}'
            | '&'
            | '*'
            | '!'
            | '|'
            | '>'
            | '\''
            | '"'
            | '%'
            | '@'
            | '`'
    ) || (matches!(first, '-' | '?' | ':') && second_blank)
        || s.starts_with("---")
        || s.starts_with("...")
        || s.starts_with(' ')
        || s.ends_with(' ')
        || s.ends_with(':')
        || s.contains(": ")
        || s.contains(" #")
        || s.contains(['\t', '\r'])
    {
        return false;
    }
    !s.chars().any(special)
}

fn special(c: char) -> bool {
    c.is_control() || c == '\u{feff}'
}

fn string(s: &str, indent: usize) -> String {
    if s.contains('\n') {
        // A first line starting with a space would need an indentation indicator; such strings
        // are written double-quoted instead.
        if !s.chars().any(|c| special(c) && c != '\n') && !s.contains(" \n") && !s.starts_with(' ')
        {
            return literal(s, indent);
        }
        return double_quoted(s);
    }
    if resolves_to_other_type(s) {
        return double_quoted(s);
    }
    if plain_allowed(s) {
        return s.to_owned();
    }
    if !s.chars().any(special) {
        return format!("'{}'", s.replace('\'', "''"));
    }
    double_quoted(s)
}

/// A double-quoted scalar: `"` and `\\` escaped, non-printable characters as escapes.
fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if special(c) || matches!(c, '\u{2028}' | '\u{2029}') => {
                out.push_str(&format!("\\u{:04X}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn literal(s: &str, indent: usize) -> String {
    let chomp = if !s.ends_with('\n') {
        "-"
    } else if s == "\n" || s.ends_with("\n\n") {
        "+"
    } else {
        ""
    };
    let pad = " ".repeat(indent);
    let mut out = format!("|{chomp}");
    let body = s.strip_suffix('\n').unwrap_or(s);
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            out.push_str(&pad);
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn yaml_v3_shape() {
        let v = json!({
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.25", "args": ["a", "b"]}
            ]}}},
            "metadata": {"name": "web", "labels": {}, "creationTimestamp": "2024-01-02T03:04:05Z"},
            "status": {"ok": true, "ratio": 0.5, "none": null, "list": []},
        });
        assert_eq!(
            to_string(&v),
            "metadata:\n    creationTimestamp: \"2024-01-02T03:04:05Z\"\n    labels: {}\n    name: web\n\
             spec:\n    replicas: 3\n    template:\n        spec:\n            containers:\n\
             \x20               - args:\n                    - a\n                    - b\n\
             \x20                 image: nginx:1.25\n                  name: nginx\n\
             status:\n    list: []\n    none: null\n    ok: true\n    ratio: 0.5\n"
        );
    }

    #[test]
    fn keys_in_yaml_v3_order() {
        let mut keys = vec![
            "b", "a10", "a9", "a", "B", "_x", "x-2754", "x-4104", "1", "a0",
        ];
        keys.sort_by(|a, b| key_order(a, b));
        assert_eq!(
            keys,
            [
                "_x", "1", "B", "a", "a0", "a9", "a10", "b", "x-2754", "x-4104"
            ]
        );
        assert!(base60("1:20") && base60("190:20:30.15") && base60("-1:59"));
        assert!(!base60("10.11.254.226:4040") && !base60("1:60") && !base60("a:1"));
    }

    #[test]
    fn scalars_and_quoting() {
        assert_eq!(to_string(&json!(true)), "true\n");
        assert_eq!(to_string(&json!(2)), "2\n");
        assert_eq!(to_string(&json!(null)), "null\n");
        assert_eq!(to_string(&json!([])), "[]\n");
        assert_eq!(to_string(&json!([1, "x"])), "- 1\n- x\n");
        for (s, want) in [
            ("", "\"\""),
            ("true", "\"true\""),
            ("yes", "\"yes\""),
            ("123", "\"123\""),
            ("1.5", "\"1.5\""),
            ("1e3", "\"1e3\""),
            ("0x1F", "\"0x1F\""),
            ("null", "\"null\""),
            ("plain text", "plain text"),
            ("100m", "100m"),
            ("1Gi", "1Gi"),
            ("v1", "v1"),
            ("*", "'*'"),
            ("- x", "'- x'"),
            ("a: b", "'a: b'"),
            ("it's: x", "'it''s: x'"),
            (" lead", "' lead'"),
        ] {
            assert_eq!(string(s, 0), want, "{s:?}");
        }
        assert_eq!(
            to_string(&json!({"script": "line1\nline2\n"})),
            "script: |\n    line1\n    line2\n"
        );
        assert_eq!(
            to_string(&json!({"m": "a\n\nb"})),
            "m: |-\n    a\n\n    b\n"
        );
    }
}

#[cfg(test)]
mod number_tests {
    use super::*;

    #[test]
    fn go_g_format() {
        for (v, want) in [
            (serde_json::json!(3), "3"),
            (serde_json::json!(-2), "-2"),
            (serde_json::json!(100_000), "100000"),
            (serde_json::json!(1_000_000), "1e+06"),
            (serde_json::json!(1_234_567), "1.234567e+06"),
            (serde_json::json!(0.5), "0.5"),
            (serde_json::json!(0.0001), "0.0001"),
            (serde_json::json!(0.00001), "1e-05"),
        ] {
            assert_eq!(to_string(&v), format!("{want}\n"), "{v}");
        }
    }
}

#[cfg(test)]
mod k8s_tests {
    #[test]
    fn kubectl_shape() {
        let v = serde_json::json!({"spec": {"resourceSelectors": [{"kind": "Deployment", "name": "web"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}});
        assert_eq!(
            super::to_string_k8s(&v),
            "spec:\n  placement:\n    clusterAffinity:\n      clusterNames:\n      - member1\n\
             \x20 resourceSelectors:\n  - kind: Deployment\n    name: web\n"
        );
    }
}

#[cfg(test)]
mod round_trip {
    use proptest::prelude::*;
    use serde_json::Value;

    /// Numbers compared by value: Go's `%g` writes large integers in exponent form.
    fn normalized(v: &Value) -> Value {
        match v {
            Value::Number(n) => serde_json::json!(n.as_f64()),
            Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), normalized(v))).collect())
            }
            other => other.clone(),
        }
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ -~]{0,10}",
            "[ -~\n\t]{0,16}",
            "(true|no|yes|null|~|on|0x1F|1e3|.5|-1|1_000|2024-01-02|12:30|-|- x|:|#a|a #b|a: b|'q'|\"d\"|\\*x|&a|!t|%p|@a|`b|---|\\.\\.\\.| lead|trail |)",
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|i| serde_json::json!(i)),
            (-1.0e9f64..1.0e9).prop_map(|f| serde_json::json!(f)),
            text().prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(text(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Whatever the writer prints reads back as the same value: no string is left plain where
        /// it would read as another type, and no layout breaks the structure.
        #[test]
        fn written_yaml_reads_back(v in value()) {
            for text in [super::to_string(&v), super::to_string_k8s(&v)] {
                let back: Value = serde_saphyr::from_str(&text)
                    .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
                prop_assert_eq!(normalized(&back), normalized(&v), "{}", text);
            }
        }
    }
}
