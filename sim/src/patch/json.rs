//! JSON patch (RFC 6902) on JSON pointers (RFC 6901), failing with the messages of
//! upstream's Go implementation.

use serde_json::Value;

use super::PatchError;

fn parse_pointer(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    if !path.starts_with('/') {
        return Err(PatchError::Unprocessable(format!(
            "invalid JSON pointer: {path:?}"
        )));
    }
    Ok(path[1..]
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn parent_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Result<&'a mut Value, PatchError> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(move |i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| PatchError::Unprocessable(format!("doc is missing path: {t}")))?;
    }
    Ok(cur)
}

fn array_index(tok: &str, len: usize, allow_end: bool) -> Result<usize, PatchError> {
    if allow_end && tok == "-" {
        return Ok(len);
    }
    let i: usize = tok
        .parse()
        .map_err(|_| PatchError::Unprocessable(format!("invalid index: {tok}")))?;
    if i > len || (!allow_end && i == len) {
        return Err(PatchError::Unprocessable(format!(
            "Unable to access invalid index: {i}"
        )));
    }
    Ok(i)
}

fn pointer_get(doc: &Value, path: &str) -> Result<Value, PatchError> {
    let toks = parse_pointer(path)?;
    let mut cur = doc;
    for t in &toks {
        cur = match cur {
            Value::Object(m) => m.get(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        }
        .ok_or_else(|| PatchError::Unprocessable(format!("doc is missing path: {path}")))?;
    }
    Ok(cur.clone())
}

fn pointer_add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    let toks = parse_pointer(path)?;
    let Some((last, parent)) = toks.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parent)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            let i = array_index(last, a.len(), true)?;
            a.insert(i, value);
            Ok(())
        }
        _ => Err(PatchError::Unprocessable(format!(
            "doc is missing path: {path}"
        ))),
    }
}

fn pointer_remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let toks = parse_pointer(path)?;
    let Some((last, parent)) = toks.split_last() else {
        return Err(PatchError::Unprocessable(
            "unable to remove the whole document".into(),
        ));
    };
    let missing = || PatchError::Unprocessable(format!("doc is missing path: {path}"));
    match parent_mut(doc, parent)? {
        Value::Object(m) => m.shift_remove(last).ok_or_else(missing),
        Value::Array(a) => {
            let i = array_index(last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

fn pointer_replace(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    let toks = parse_pointer(path)?;
    let Some((last, parent)) = toks.split_last() else {
        *doc = value;
        return Ok(());
    };
    let missing = || {
        PatchError::Unprocessable(format!(
            "replace operation does not apply: doc is missing key: {path}"
        ))
    };
    match parent_mut(doc, parent)? {
        Value::Object(m) => {
            let slot = m.get_mut(last).ok_or_else(missing)?;
            *slot = value;
            Ok(())
        }
        Value::Array(a) => {
            let i = array_index(last, a.len(), false)?;
            a[i] = value;
            Ok(())
        }
        _ => Err(missing()),
    }
}

/// Apply a JSON patch (an array of operations) to `doc`; on error `doc` is unchanged.
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), PatchError> {
    let mut work = doc.clone();
    json_patch_in_place(&mut work, ops)?;
    *doc = work;
    Ok(())
}

fn json_patch_in_place(doc: &mut Value, ops: &Value) -> Result<(), PatchError> {
    let Value::Array(ops) = ops else {
        return Err(PatchError::BadRequest(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
            super::go_json_type(ops)
        )));
    };
    if ops.len() > 10_000 {
        return Err(PatchError::BadRequest(format!(
            "The allowed maximum operations in a JSON patch is 10000, got {}",
            ops.len()
        )));
    }
    for op in ops {
        let s = |k: &str| op.get(k).and_then(Value::as_str);
        let kind = s("op").unwrap_or("");
        let path = s("path").ok_or_else(|| {
            PatchError::Unprocessable(format!("operation missing path field: {kind}"))
        });
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                PatchError::Unprocessable(format!("operation missing value field: {kind}"))
            })
        };
        match kind {
            "add" => pointer_add(doc, path?, value()?)?,
            "remove" => {
                pointer_remove(doc, path?)?;
            }
            "replace" => pointer_replace(doc, path?, value()?)?,
            "move" => {
                let from = s("from").ok_or_else(|| {
                    PatchError::Unprocessable("operation missing from field: move".into())
                })?;
                let v = pointer_remove(doc, from)?;
                pointer_add(doc, path?, v)?;
            }
            "copy" => {
                let from = s("from").ok_or_else(|| {
                    PatchError::Unprocessable("operation missing from field: copy".into())
                })?;
                let v = pointer_get(doc, from)?;
                pointer_add(doc, path?, v)?;
            }
            "test" => {
                let path = path?;
                let want = value()?;
                let got = pointer_get(doc, path).unwrap_or(Value::Null);
                if got != want {
                    return Err(PatchError::Unprocessable(format!(
                        "testing value {path} failed: test failed"
                    )));
                }
            }
            other => {
                return Err(PatchError::Unprocessable(format!(
                    "Unexpected kind: {other}"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_ops() {
        let mut d = json!({"metadata": {"labels": {"a": "1"}}, "list": [1, 2, 3]});
        json_patch(
            &mut d,
            &json!([
                {"op": "add", "path": "/metadata/labels/b", "value": "2"},
                {"op": "remove", "path": "/metadata/labels/a"},
                {"op": "replace", "path": "/list/0", "value": 9},
                {"op": "add", "path": "/list/-", "value": 4},
                {"op": "move", "from": "/list/1", "path": "/moved"},
                {"op": "copy", "from": "/metadata/labels", "path": "/copied"},
                {"op": "test", "path": "/moved", "value": 2},
                {"op": "add", "path": "/metadata/annotations", "value": {"x~y/z": "1"}},
                {"op": "test", "path": "/metadata/annotations/x~0y~1z", "value": "1"}
            ]),
        )
        .unwrap();
        assert_eq!(d["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(d["list"], json!([9, 3, 4]));
        assert_eq!(d["moved"], json!(2));
        assert_eq!(d["copied"], json!({"b": "2"}));
    }

    #[test]
    fn json_patch_failures() {
        let mut d = json!({"a": 1});
        let e = json_patch(&mut d, &json!([{"op": "test", "path": "/a", "value": 2}])).unwrap_err();
        assert!(matches!(e, PatchError::Unprocessable(_)));
        let e = json_patch(&mut d, &json!([{"op": "remove", "path": "/nope"}])).unwrap_err();
        assert!(matches!(e, PatchError::Unprocessable(_)));
        let e = json_patch(
            &mut d,
            &json!([{"op": "replace", "path": "/nope", "value": 1}]),
        )
        .unwrap_err();
        assert!(matches!(e, PatchError::Unprocessable(_)));
        let e =
            json_patch(&mut d, &json!([{"op": "add", "path": "/x/y", "value": 1}])).unwrap_err();
        assert!(matches!(e, PatchError::Unprocessable(_)));
        let e = json_patch(
            &mut d,
            &json!([{"op": "add", "path": "/b", "value": 1}, {"op": "frob", "path": "/a"}]),
        )
        .unwrap_err();
        assert_eq!(e, PatchError::Unprocessable("Unexpected kind: frob".into()));
        let e = json_patch(&mut d, &json!({"op": "add"})).unwrap_err();
        assert!(matches!(e, PatchError::BadRequest(_)));
        assert_eq!(
            d,
            json!({"a": 1}),
            "failed ops leave the document as it was before them"
        );
    }
}
