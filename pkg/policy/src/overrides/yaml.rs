//! YAML documents embedded in string fields: parsed into a [`Doc`] and written back the way
//! Karmada's `sigs.k8s.io/yaml.JSONToYAML` (go-yaml v2) writes them: keys in go-yaml's natural
//! order, two-space indentation, block sequences not indented under their key, YAML 1.1 look-alike
//! strings double-quoted, multi-line strings as literal blocks.
//!
//! Known difference: go-yaml folds plain and double-quoted scalars longer than 80 columns at spaces;
//! this writer never folds. Both forms load to the same value.

use std::cmp::Ordering;

use super::doc::Doc;

/// Parses a YAML document into a [`Doc`].
pub(crate) fn parse(text: &str) -> Result<Doc, String> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| format!("invalid YAML: {e}"))?;
    Ok(Doc::from_value(&value))
}

/// Writes a [`Doc`] as a YAML document (with a trailing newline).
pub(crate) fn emit(doc: &Doc) -> String {
    let mut out = String::new();
    match doc {
        Doc::Object(entries) if !entries.is_empty() => write_mapping(entries, 0, &mut out),
        Doc::Array(items) if !items.is_empty() => write_sequence(items, 0, &mut out),
        scalar => {
            write_scalar(scalar, 2, false, &mut out);
            out.push('\n');
        }
    }
    out
}

fn write_indent(indent: usize, out: &mut String) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// Writes a block mapping whose first key starts at the current position (already indented).
fn write_mapping(entries: &[(String, Doc)], indent: usize, out: &mut String) {
    let mut sorted: Vec<&(String, Doc)> = entries.iter().collect();
    sorted.sort_by(|a, b| key_order(&a.0, &b.0));
    for (i, (key, value)) in sorted.into_iter().enumerate() {
        if i > 0 {
            write_indent(indent, out);
        }
        write_string(key, indent + 2, true, out);
        out.push(':');
        match value {
            Doc::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                write_indent(indent + 2, out);
                write_mapping(inner, indent + 2, out);
            }
            Doc::Array(items) if !items.is_empty() => {
                // go-yaml does not indent a block sequence that is a mapping value.
                out.push('\n');
                write_indent(indent, out);
                write_sequence(items, indent, out);
            }
            scalar => {
                out.push(' ');
                write_scalar(scalar, indent + 2, false, out);
                out.push('\n');
            }
        }
    }
}

/// Writes a block sequence whose first `- ` starts at the current position (already indented).
fn write_sequence(items: &[Doc], indent: usize, out: &mut String) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            write_indent(indent, out);
        }
        out.push_str("- ");
        match item {
            Doc::Object(inner) if !inner.is_empty() => write_mapping(inner, indent + 2, out),
            Doc::Array(inner) if !inner.is_empty() => write_sequence(inner, indent + 2, out),
            scalar => {
                write_scalar(scalar, indent + 2, false, out);
                out.push('\n');
            }
        }
    }
}

/// Writes a scalar (or an empty collection) in flow position.
fn write_scalar(doc: &Doc, indent: usize, simple_key: bool, out: &mut String) {
    match doc {
        Doc::Null => out.push_str("null"),
        Doc::Bool(true) => out.push_str("true"),
        Doc::Bool(false) => out.push_str("false"),
        Doc::Number(text) => out.push_str(&format_number(text)),
        Doc::String(s) => write_string(s, indent, simple_key, out),
        Doc::Array(_) => out.push_str("[]"),
        Doc::Object(_) => out.push_str("{}"),
    }
}

/// Numbers as go-yaml writes the value it decoded from JSON: integers verbatim, everything else as
/// a float in Go's shortest `%g` form.
fn format_number(text: &str) -> String {
    if text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok() {
        return text.trim_start_matches('+').to_owned();
    }
    match text.parse::<f64>() {
        Ok(f) => go_format_g(f),
        Err(_) => text.to_owned(),
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`.
pub(crate) fn go_format_g(f: f64) -> String {
    if f.is_nan() {
        return ".nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Go's shortest formatting does.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i64 = exponent.parse().unwrap_or(0);
    let nd = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let mut s = format!("{sign}{first}");
        if !rest.is_empty() {
            s.push('.');
            s.push_str(rest);
        }
        let exp_sign = if exp < 0 { '-' } else { '+' };
        s.push_str(&format!("e{exp_sign}{:02}", exp.abs()));
        return s;
    }
    // Fixed notation: the decimal point sits after `exp + 1` digits.
    let point = exp + 1;
    let mut s = String::from(sign);
    if point <= 0 {
        s.push_str("0.");
        s.extend(std::iter::repeat_n(
            '0',
            usize::try_from(-point).unwrap_or(0),
        ));
        s.push_str(&digits);
    } else if point >= nd {
        s.push_str(&digits);
        s.extend(std::iter::repeat_n(
            '0',
            usize::try_from(point - nd).unwrap_or(0),
        ));
    } else {
        let (int_part, frac) = digits.split_at(usize::try_from(point).unwrap_or(0));
        s.push_str(int_part);
        s.push('.');
        s.push_str(frac);
    }
    s
}

/// go-yaml v2's map key order: at the first differing character two letters compare by code
/// point, a non-letter sorts before a letter, and runs of digits compare by value.
fn key_order(a: &str, b: &str) -> Ordering {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        let (ca, cb) = (ar[i], br[i]);
        if ca == cb {
            i += 1;
            continue;
        }
        let (al, bl) = (ca.is_alphabetic(), cb.is_alphabetic());
        if al && bl {
            return ca.cmp(&cb);
        }
        if al || bl {
            return if bl {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if ca == '0' || cb == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                if ar[j - 1] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
                j -= 1;
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .wrapping_mul(10)
                .wrapping_add(i64::from(u32::from(ar[ai]) - u32::from('0')));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(i64::from(u32::from(br[bi]) - u32::from('0')));
            bi += 1;
        }
        if an != bn {
            return an.cmp(&bn);
        }
        if ai != bi {
            return ai.cmp(&bi);
        }
        return ca.cmp(&cb);
    }
    ar.len().cmp(&br.len())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
}

/// What the emitter's scalar analysis allows for a string.
struct Analysis {
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// libyaml's notion of printable (it rejects tabs, most C0/C1 controls, surrogates, U+FEFF, the
/// non-characters U+FFFE/U+FFFF and everything beyond the BMP).
fn is_printable(c: char) -> bool {
    let u = u32::from(c);
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || (0xA0..=0xD7FF).contains(&u)
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
}

fn analyze(s: &str) -> Analysis {
    if s.is_empty() {
        return Analysis {
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    let chars: Vec<char> = s.chars().collect();
    let mut block_indicators = s.starts_with("---") || s.starts_with("...");
    let mut line_breaks = false;
    let mut special = false;
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let mut preceded_by_whitespace = true;
    let blank = |c: char| c == ' ' || c == '\t';
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_whitespace = chars.get(i + 1).is_none_or(|&n| blank(n) || is_break(n));
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => block_indicators = true,
                '?' | ':' | '-' if followed_by_whitespace => block_indicators = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_whitespace => block_indicators = true,
                '#' if preceded_by_whitespace => block_indicators = true,
                _ => {}
            }
        }
        if !is_printable(c) {
            special = true;
        }
        let last = i + 1 == chars.len();
        if c == ' ' {
            leading_space |= i == 0;
            trailing_space |= last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if is_break(c) {
            line_breaks = true;
            leading_break |= i == 0;
            trailing_break |= last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = blank(c) || is_break(c);
    }
    let mut a = Analysis {
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.block_plain_allowed = false;
    }
    if trailing_space {
        a.block_allowed = false;
    }
    if break_space {
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
    }
    if space_break || special {
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
        a.block_allowed = false;
    }
    if line_breaks || block_indicators {
        a.block_plain_allowed = false;
    }
    a
}

fn write_string(s: &str, indent: usize, simple_key: bool, out: &mut String) {
    let requested = if s.contains('\n') {
        Style::Literal
    } else if !resolves_to_non_string(s) {
        Style::Plain
    } else {
        Style::DoubleQuoted
    };
    let analysis = analyze(s);
    let mut style = requested;
    if style == Style::Plain && (!analysis.block_plain_allowed || (s.is_empty() && simple_key)) {
        style = Style::SingleQuoted;
    }
    if style == Style::SingleQuoted && !analysis.single_quoted_allowed {
        style = Style::DoubleQuoted;
    }
    if style == Style::Literal && (!analysis.block_allowed || simple_key) {
        style = Style::DoubleQuoted;
    }
    match style {
        Style::Plain => out.push_str(s),
        Style::SingleQuoted => {
            out.push('\'');
            out.push_str(&s.replace('\'', "''"));
            out.push('\'');
        }
        Style::DoubleQuoted => write_double_quoted(s, out),
        Style::Literal => write_literal(s, indent, out),
    }
}

fn write_double_quoted(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        let u = u32::from(c);
        if is_printable(c) && !is_break(c) && c != '"' && c != '\\' && c != '\u{FEFF}' {
            out.push(c);
            continue;
        }
        match c {
            '\0' => out.push_str("\\0"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{B}' => out.push_str("\\v"),
            '\u{C}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\u{1B}' => out.push_str("\\e"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{85}' => out.push_str("\\N"),
            '\u{A0}' => out.push_str("\\_"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            _ if u <= 0xFF => out.push_str(&format!("\\x{u:02X}")),
            _ if u <= 0xFFFF => out.push_str(&format!("\\u{u:04X}")),
            _ => out.push_str(&format!("\\U{u:08X}")),
        }
    }
    out.push('"');
}

fn write_literal(s: &str, indent: usize, out: &mut String) {
    out.push('|');
    if s.starts_with(' ') || s.starts_with(is_break) {
        out.push('2');
    }
    let chars: Vec<char> = s.chars().collect();
    match chars.as_slice() {
        [.., last] if !is_break(*last) => out.push('-'),
        [only] if is_break(*only) => out.push('+'),
        [.., before, last] if is_break(*last) && is_break(*before) => out.push('+'),
        _ => {}
    }
    out.push('\n');
    let mut at_line_start = true;
    for &c in &chars {
        if is_break(c) {
            out.push('\n');
            at_line_start = true;
        } else {
            if at_line_start {
                write_indent(indent, out);
                at_line_start = false;
            }
            out.push(c);
        }
    }
    // The caller ends the line; the content's final break already did.
    if chars.last().is_some_and(|c| is_break(*c)) {
        out.pop();
    }
}

/// Whether go-yaml v2 would read `s`, written plain, as something other than a string (bool, null,
/// number, timestamp, merge key or a base-60 float).
fn resolves_to_non_string(s: &str) -> bool {
    const SPECIAL: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "n", "N", "no",
        "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "", "~", "null", "Null",
        "NULL", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF", "<<",
    ];
    if SPECIAL.contains(&s) {
        return true;
    }
    let Some(first) = s.chars().next() else {
        return true;
    };
    if is_base60_float(s) {
        return true;
    }
    match first {
        '.' => s.parse::<f64>().is_ok() && !s.contains(['i', 'I', 'n', 'N']),
        '0'..='9' | '+' | '-' => {
            if looks_like_timestamp(s) {
                return true;
            }
            let plain = s.replace('_', "");
            go_parse_int(&plain)
                || is_yaml_float(&plain)
                || plain
                    .strip_prefix("0b")
                    .or_else(|| plain.strip_prefix("-0b"))
                    .is_some_and(|b| !b.is_empty() && b.bytes().all(|c| c == b'0' || c == b'1'))
        }
        _ => false,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)` / `ParseUint` syntax (range not checked: out-of-range values
/// are still numbers for go-yaml, as floats).
fn go_parse_int(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let digits_in = |d: &str, radix: u32| !d.is_empty() && d.chars().all(|c| c.is_digit(radix));
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        return digits_in(hex, 16);
    }
    if let Some(oct) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        return digits_in(oct, 8);
    }
    if let Some(bin) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        return digits_in(bin, 2);
    }
    if body.len() > 1 && body.starts_with('0') {
        return digits_in(&body[1..], 8);
    }
    digits_in(body, 10)
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (number, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    let number_ok = match number.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(number),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    number_ok && exponent_ok
}

/// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`.
fn is_base60_float(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (main, frac) = match body.split_once('.') {
        Some((main, frac)) => (main, Some(frac)),
        None => (body, None),
    };
    if frac.is_some_and(|f| !f.bytes().all(|b| b.is_ascii_digit() || b == b'_')) {
        return false;
    }
    let mut parts = main.split(':');
    let Some(head) = parts.next() else {
        return false;
    };
    let head_ok = head.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && head.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    let rest: Vec<&str> = parts.collect();
    head_ok
        && !rest.is_empty()
        && rest.iter().all(|p| {
            let b = p.as_bytes();
            match b {
                [d] => d.is_ascii_digit(),
                [a, d] => (b'0'..=b'5').contains(a) && d.is_ascii_digit(),
                _ => false,
            }
        })
}

/// go-yaml's timestamp detection: four digits, `-`, then a date (optionally followed by a time).
fn looks_like_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 8 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let rest = &s[5..];
    let Some((month, day_and_time)) = rest.split_once('-') else {
        return false;
    };
    let day_len = day_and_time.bytes().take_while(u8::is_ascii_digit).count();
    let (day, time) = day_and_time.split_at(day_len);
    let valid_num = |t: &str, max: u32| {
        (1..=2).contains(&t.len()) && t.parse::<u32>().is_ok_and(|v| (1..=max).contains(&v))
    };
    if !valid_num(month, 12) || !valid_num(day, 31) {
        return false;
    }
    time.is_empty()
        || (time.starts_with(['T', 't', ' '])
            && time.as_bytes().get(1).is_some_and(u8::is_ascii_digit)
            && time[1..].contains(':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(yaml: &str) -> String {
        emit(&parse(yaml).unwrap())
    }

    #[test]
    fn mappings_and_sequences() {
        // `y` reads as a boolean in YAML 1.1, so go-yaml quotes it even as a key.
        let out =
            roundtrip("b: 1\na:\n  z: [1, 2]\n  y: {}\nc:\n- x: 1\n  w: 2\n- - 3\n  - 4\n- []\n");
        assert_eq!(
            out,
            "a:\n  \"y\": {}\n  z:\n  - 1\n  - 2\nb: 1\nc:\n- w: 2\n  x: 1\n- - 3\n  - 4\n- []\n"
        );
    }

    #[test]
    fn scalar_styles() {
        let doc = Doc::Object(vec![
            ("bool-like".into(), Doc::String("yes".into())),
            ("empty".into(), Doc::String(String::new())),
            ("num-like".into(), Doc::String("0x1F".into())),
            ("date".into(), Doc::String("2001-12-14".into())),
            ("colon".into(), Doc::String("a: b".into())),
            ("hash".into(), Doc::String("#x".into())),
            ("quote".into(), Doc::String("it's".into())),
            ("tab".into(), Doc::String("a\tb".into())),
            ("multi".into(), Doc::String("l1\nl2\n".into())),
            ("multi2".into(), Doc::String("l1\n\nl2".into())),
            ("plain".into(), Doc::String("hello world".into())),
            ("base60".into(), Doc::String("1:20".into())),
            ("float".into(), Doc::Number("1.0".into())),
            ("big".into(), Doc::Number("1000000.0".into())),
            ("null".into(), Doc::Null),
        ]);
        assert_eq!(
            emit(&doc),
            "base60: \"1:20\"\nbig: 1e+06\nbool-like: \"yes\"\ncolon: 'a: b'\ndate: \"2001-12-14\"\nempty: \"\"\nfloat: 1\nhash: '#x'\nmulti: |\n  l1\n  l2\nmulti2: |-\n  l1\n\n  l2\n\"null\": null\nnum-like: \"0x1F\"\nplain: hello world\nquote: it's\ntab: \"a\\tb\"\n"
        );
    }

    #[test]
    fn key_ordering() {
        let mut keys = vec!["b", "a10", "a2", "A", "_x", "a", "1", "10", "2"];
        keys.sort_by(|a, b| key_order(a, b));
        // A non-digit, non-letter compares as the number 0 against a digit run.
        assert_eq!(keys, vec!["_x", "1", "2", "10", "A", "a", "a2", "a10", "b"]);
    }

    #[test]
    fn go_float_format() {
        assert_eq!(go_format_g(1.5), "1.5");
        assert_eq!(go_format_g(123_456.0), "123456");
        assert_eq!(go_format_g(1e6), "1e+06");
        assert_eq!(go_format_g(0.0001), "0.0001");
        assert_eq!(go_format_g(0.00001), "1e-05");
        assert_eq!(go_format_g(-2.25e-7), "-2.25e-07");
        assert_eq!(go_format_g(1e21), "1e+21");
    }

    #[test]
    fn timestamps_and_numbers_detected() {
        assert!(resolves_to_non_string("2020-1-2"));
        assert!(resolves_to_non_string("2020-01-02T10:00:00Z"));
        assert!(!resolves_to_non_string("2020-13-02"));
        assert!(resolves_to_non_string("1_000"));
        assert!(resolves_to_non_string("-0b101"));
        assert!(resolves_to_non_string(".5"));
        assert!(resolves_to_non_string("1e3"));
        assert!(!resolves_to_non_string("1.2.3"));
        assert!(!resolves_to_non_string("v1"));
        assert!(!resolves_to_non_string("nginx"));
    }

    #[test]
    fn scalar_root_and_literal_in_sequence() {
        assert_eq!(emit(&Doc::String("x".into())), "x\n");
        let doc = Doc::Array(vec![Doc::String("a\nb".into())]);
        assert_eq!(emit(&doc), "- |-\n  a\n  b\n");
    }
}
