//! proptest strategies for the fields the derive cannot generate on its own.

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Unix seconds in a plausible range.
pub fn timestamp() -> impl Strategy<Value = f64> {
    0.0f64..4.0e9
}

/// Any finite float (JSON has no NaN or infinity).
pub fn finite() -> impl Strategy<Value = f64> {
    -1.0e12f64..1.0e12
}

/// Arbitrary JSON, a few levels deep.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        finite().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(".{0,8}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An optional `_meta` object.
pub fn meta() -> impl Strategy<Value = Option<Map<String, Value>>> {
    proptest::option::of(btree_map("[a-z_.]{1,12}", json_value(), 0..3).prop_map(|m| m.into_iter().collect()))
}
