//! Objects and options the store's tests build on.

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::meta::{meta_str, obj_rv};
use super::{WatchEvent, WriteOptions};

pub fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

pub fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": "a"}},
           "spec": {"podCIDR": "10.0.0.0/24"},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

pub fn wo(manager: &str) -> WriteOptions {
    WriteOptions {
        field_manager: Some(manager.into()),
        ..WriteOptions::default()
    }
}

pub fn rv(v: &Value) -> u64 {
    obj_rv(v)
}

pub fn drain(rx: &mut mpsc::Receiver<WatchEvent>) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push((
            e.kind.to_string(),
            meta_str(e.object(), "name").to_string(),
            obj_rv(e.object()),
        ));
    }
    out
}
