//! [`PoolIndex`]: which pools could select a node, found from the node's labels instead
//! of by trying every pool.
//!
//! Each pool is filed under one label its selector requires (a `matchLabels` pair, or
//! each value of an `In` expression); a pool whose selector requires no particular value
//! (only `Exists`, `NotIn`, `DoesNotExist`, or nothing) is a candidate for every node. A
//! node's candidates are then the pools filed under its own labels plus those: a few
//! hash lookups, however many pools the repository has. The selector is still checked
//! in full on each candidate; the index only skips the pools that cannot match.

use std::collections::HashMap;

use super::{Operator, PoolSpec, StrMap};

/// Pools by a label their selector requires.
#[derive(Debug, Clone, Default)]
pub struct PoolIndex {
    /// Label key, then value, to the pools (by position) requiring it.
    by_label: HashMap<String, HashMap<String, Vec<usize>>>,
    /// Pools that require no particular label value.
    everywhere: Vec<usize>,
}

impl PoolIndex {
    /// Indexes `pools` (positions are into this slice).
    pub fn new(pools: &[PoolSpec]) -> PoolIndex {
        let mut index = PoolIndex::default();
        for (i, pool) in pools.iter().enumerate() {
            let sel = &pool.selector;
            let anchor: Option<(&str, Vec<&str>)> =
                if let Some((k, v)) = sel.match_labels.iter().next() {
                    Some((k, vec![v.as_str()]))
                } else {
                    sel.match_expressions
                        .iter()
                        .find(|r| r.operator == Operator::In)
                        .map(|r| {
                            (
                                r.key.as_str(),
                                r.values.iter().map(String::as_str).collect(),
                            )
                        })
                };
            match anchor {
                Some((key, values)) => {
                    let by_value = index.by_label.entry(key.to_string()).or_default();
                    for v in values {
                        let pools = by_value.entry(v.to_string()).or_default();
                        if pools.last() != Some(&i) {
                            pools.push(i);
                        }
                    }
                }
                None => index.everywhere.push(i),
            }
        }
        index
    }

    /// The positions of the pools that may select a node with `labels`, ascending, into
    /// `out` (cleared first).
    pub fn candidates(&self, labels: &StrMap, out: &mut Vec<usize>) {
        out.clear();
        out.extend_from_slice(&self.everywhere);
        for (key, by_value) in &self.by_label {
            if let Some(pools) = labels.get(key).and_then(|v| by_value.get(v)) {
                out.extend_from_slice(pools);
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}

/// Where a node goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The pool at this position.
    Pool(usize),
    /// Two pools of the same, highest, priority select it (the first two, by position).
    Overlap(usize, usize),
    /// No pool selects it.
    None,
}

/// Places a node with `labels` among `pools` (indexed by `index`): the highest priority
/// pool that selects it; the first two of the same highest priority are an overlap.
/// `scratch` is reused between calls.
pub fn place(
    pools: &[PoolSpec],
    index: &PoolIndex,
    labels: &StrMap,
    scratch: &mut Vec<usize>,
) -> Placement {
    index.candidates(labels, scratch);
    let mut best: Option<usize> = None;
    let mut tie: Option<usize> = None;
    for &i in scratch.iter() {
        let pool = &pools[i];
        if !pool.selector.matches(labels) {
            continue;
        }
        match best {
            None => best = Some(i),
            Some(b) if pool.priority > pools[b].priority => {
                best = Some(i);
                tie = None;
            }
            Some(b) if pool.priority == pools[b].priority && tie.is_none() => tie = Some(i),
            _ => {}
        }
    }
    match (best, tie) {
        (Some(a), Some(b)) => Placement::Overlap(a, b),
        (Some(a), None) => Placement::Pool(a),
        (None, _) => Placement::None,
    }
}
