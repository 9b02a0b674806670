//! JSON Pointer (RFC 6901) and the `add` / `remove` / `replace` operations of JSON Patch (RFC 6902),
//! with the conventions of the patch library Karmada uses (evanphx/json-patch v5): negative array
//! indices count from the end, `-` appends, `replace` and `remove` need an existing target, and the
//! empty path addresses the whole document.

use super::doc::Doc;

/// A patch operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Remove,
    Replace,
}

/// One patch operation with its pointer and value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Patch {
    pub(crate) op: Op,
    pub(crate) path: String,
    pub(crate) value: Doc,
}

/// Splits a JSON pointer into unescaped reference tokens (`~1` → `/`, then `~0` → `~`).
pub(crate) fn parse_pointer(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!(
            "JSON pointer {path:?} must be empty or start with '/'"
        ));
    };
    Ok(rest
        .split('/')
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// Resolves an array index token against an array of `len` items; `extra` is 1 when the index
/// may point one past the end (add), else 0.
fn array_index(token: &str, len: usize, extra: usize) -> Result<usize, String> {
    let idx: i64 = token
        .parse()
        .map_err(|_| format!("{token:?} is not a valid array index"))?;
    let size = i64::try_from(len + extra).map_err(|_| "array too large".to_owned())?;
    let resolved = if idx < 0 { idx + size } else { idx };
    if resolved < 0 || resolved >= size {
        return Err(format!("array index {idx} is out of range (length {len})"));
    }
    usize::try_from(resolved).map_err(|_| format!("array index {idx} is out of range"))
}

/// One step of a walk to `tokens`: the child of `current` named by `token` (`tokens[depth]`), with
/// its position among the object's entries or the array's items.
fn child<'d>(
    current: &'d Doc,
    token: &str,
    tokens: &[String],
    depth: usize,
) -> Result<(usize, &'d Doc), String> {
    match current {
        Doc::Object(entries) => entries
            .iter()
            .enumerate()
            .find(|(_, (k, _))| k == token)
            .map(|(at, (_, v))| (at, v))
            .ok_or_else(|| format!("{} does not exist", describe(tokens, depth + 1))),
        Doc::Array(items) => {
            let idx = array_index(token, items.len(), 0)
                .map_err(|e| format!("{}: {e}", describe(tokens, depth + 1)))?;
            items
                .get(idx)
                .map(|v| (idx, v))
                .ok_or_else(|| format!("{} does not exist", describe(tokens, depth + 1)))
        }
        other => Err(format!(
            "{} is a {}, not an object or array",
            describe(tokens, depth),
            other.type_name()
        )),
    }
}

/// Walks to the value at `tokens`, which must exist.
pub(crate) fn get<'d>(doc: &'d Doc, tokens: &[String]) -> Result<&'d Doc, String> {
    let mut current = doc;
    for (depth, token) in tokens.iter().enumerate() {
        current = child(current, token, tokens, depth)?.1;
    }
    Ok(current)
}

/// [`get`], for changing the value.
fn get_mut<'d>(doc: &'d mut Doc, tokens: &[String]) -> Result<&'d mut Doc, String> {
    let mut current = doc;
    for (depth, token) in tokens.iter().enumerate() {
        let (at, _) = child(current, token, tokens, depth)?;
        current = match current {
            Doc::Object(entries) => entries.get_mut(at).map(|(_, v)| v),
            Doc::Array(items) => items.get_mut(at),
            _ => None,
        }
        .ok_or_else(|| format!("{} does not exist", describe(tokens, depth + 1)))?;
    }
    Ok(current)
}

/// The pointer made of the first `n` tokens, for messages.
fn describe(tokens: &[String], n: usize) -> String {
    if n == 0 {
        return "the document root".to_owned();
    }
    let mut pointer = String::new();
    for token in tokens.iter().take(n) {
        pointer.push('/');
        pointer.push_str(&token.replace('~', "~0").replace('/', "~1"));
    }
    format!("path {pointer:?}")
}

/// Applies one operation in place. On error the document may be partially changed only at the
/// failing operation's target, which callers avoid by patching a copy.
pub(crate) fn apply_one(doc: &mut Doc, patch: &Patch) -> Result<(), String> {
    let tokens = parse_pointer(&patch.path)?;
    let Some((last, parent_tokens)) = tokens.split_last() else {
        return match patch.op {
            Op::Add | Op::Replace => {
                *doc = patch.value.clone();
                Ok(())
            }
            Op::Remove => Err("cannot remove the whole document".to_owned()),
        };
    };
    let parent = get_mut(doc, parent_tokens)?;
    match parent {
        Doc::Object(entries) => {
            let slot = entries.iter().position(|(k, _)| k == last);
            match (patch.op, slot) {
                (Op::Add | Op::Replace, Some(i)) => {
                    if let Some(entry) = entries.get_mut(i) {
                        entry.1 = patch.value.clone();
                    }
                    Ok(())
                }
                (Op::Add, None) => {
                    entries.push((last.clone(), patch.value.clone()));
                    Ok(())
                }
                (Op::Remove, Some(i)) => {
                    entries.remove(i);
                    Ok(())
                }
                (Op::Replace | Op::Remove, None) => Err(format!(
                    "{} does not exist",
                    describe(&tokens, tokens.len())
                )),
            }
        }
        Doc::Array(items) => match patch.op {
            Op::Add => {
                let idx = if last == "-" {
                    items.len()
                } else {
                    array_index(last, items.len(), 1)
                        .map_err(|e| format!("{}: {e}", describe(&tokens, tokens.len())))?
                };
                items.insert(idx, patch.value.clone());
                Ok(())
            }
            Op::Remove | Op::Replace => {
                let idx = array_index(last, items.len(), 0)
                    .map_err(|e| format!("{}: {e}", describe(&tokens, tokens.len())))?;
                if patch.op == Op::Remove {
                    items.remove(idx);
                } else if let Some(item) = items.get_mut(idx) {
                    *item = patch.value.clone();
                }
                Ok(())
            }
        },
        other => Err(format!(
            "{} is a {}, not an object or array",
            describe(&tokens, parent_tokens.len()),
            other.type_name()
        )),
    }
}

/// Applies the operations in order to a copy of `doc`; returns the patched copy, or the index of
/// the failing operation and why it failed.
pub(crate) fn apply_all(doc: &Doc, patches: &[Patch]) -> Result<Doc, (usize, String)> {
    let mut patched = doc.clone();
    for (index, patch) in patches.iter().enumerate() {
        apply_one(&mut patched, patch).map_err(|e| (index, e))?;
    }
    Ok(patched)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Doc {
        Doc::parse(text).unwrap()
    }

    fn patch(op: Op, path: &str, value: &str) -> Patch {
        Patch {
            op,
            path: path.into(),
            value: doc(value),
        }
    }

    fn run(start: &str, patches: &[Patch]) -> Result<String, (usize, String)> {
        apply_all(&doc(start), patches).map(|d| d.to_go_json())
    }

    #[test]
    fn pointer_parsing() {
        assert_eq!(parse_pointer("").unwrap(), Vec::<String>::new());
        assert_eq!(
            parse_pointer("/a~1b/c~0d/~01").unwrap(),
            vec!["a/b", "c~d", "~1"]
        );
        assert_eq!(parse_pointer("/").unwrap(), vec![""]);
        assert!(parse_pointer("a/b").is_err());
    }

    #[test]
    fn add_semantics() {
        assert_eq!(
            run(r#"{"a":1}"#, &[patch(Op::Add, "/b", "2")]).unwrap(),
            r#"{"a":1,"b":2}"#
        );
        assert_eq!(
            run(r#"{"a":1}"#, &[patch(Op::Add, "/a", "3")]).unwrap(),
            r#"{"a":3}"#
        );
        assert_eq!(
            run("[1,2]", &[patch(Op::Add, "/-", "3")]).unwrap(),
            "[1,2,3]"
        );
        assert_eq!(
            run("[1,2]", &[patch(Op::Add, "/0", "0")]).unwrap(),
            "[0,1,2]"
        );
        assert_eq!(
            run("[1,2]", &[patch(Op::Add, "/2", "3")]).unwrap(),
            "[1,2,3]"
        );
        assert_eq!(
            run("[1,2]", &[patch(Op::Add, "/-1", "9")]).unwrap(),
            "[1,2,9]"
        );
        assert!(run("[1,2]", &[patch(Op::Add, "/3", "3")]).is_err());
        assert!(run("[1,2]", &[patch(Op::Add, "/x", "3")]).is_err());
        assert!(run(r#"{"a":1}"#, &[patch(Op::Add, "/b/c", "1")]).is_err());
        assert!(run(r#"{"a":1}"#, &[patch(Op::Add, "/a/c", "1")]).is_err());
        assert_eq!(
            run(r#"{"a":1}"#, &[patch(Op::Add, "", "[]")]).unwrap(),
            "[]"
        );
    }

    #[test]
    fn remove_and_replace_semantics() {
        assert_eq!(
            run(r#"{"a":1,"b":2}"#, &[patch(Op::Remove, "/a", "null")]).unwrap(),
            r#"{"b":2}"#
        );
        assert!(run(r#"{"a":1}"#, &[patch(Op::Remove, "/x", "null")]).is_err());
        assert_eq!(
            run("[1,2,3]", &[patch(Op::Remove, "/-1", "null")]).unwrap(),
            "[1,2]"
        );
        assert!(run("[1,2,3]", &[patch(Op::Remove, "/3", "null")]).is_err());
        assert!(run("[1]", &[patch(Op::Remove, "", "null")]).is_err());
        assert_eq!(
            run(r#"{"a":1}"#, &[patch(Op::Replace, "/a", "\"x\"")]).unwrap(),
            r#"{"a":"x"}"#
        );
        assert!(run(r#"{"a":1}"#, &[patch(Op::Replace, "/b", "1")]).is_err());
        assert_eq!(
            run("[1,2]", &[patch(Op::Replace, "/1", "5")]).unwrap(),
            "[1,5]"
        );
        assert!(run("[1,2]", &[patch(Op::Replace, "/-", "5")]).is_err());
    }

    #[test]
    fn failing_operation_is_reported_and_input_untouched() {
        let start = doc(r#"{"a":{"b":1}}"#);
        let err = apply_all(
            &start,
            &[
                patch(Op::Add, "/a/c", "2"),
                patch(Op::Replace, "/a/zz", "3"),
            ],
        )
        .unwrap_err();
        assert_eq!(err.0, 1);
        assert!(err.1.contains("/a/zz"), "{}", err.1);
        assert_eq!(start.to_go_json(), r#"{"a":{"b":1}}"#);
    }

    #[test]
    fn get_paths() {
        let d = doc(r#"{"a":[{"b":"x"}]}"#);
        let tokens = parse_pointer("/a/0/b").unwrap();
        assert_eq!(get(&d, &tokens).unwrap(), &Doc::String("x".into()));
        assert!(get(&d, &parse_pointer("/a/1/b").unwrap()).is_err());
        assert!(get(&d, &parse_pointer("/a/0/b/c").unwrap()).is_err());
    }
}
