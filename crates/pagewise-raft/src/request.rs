//! What clients ask the replicated state machine to do.

use serde::{Deserialize, Serialize};

/// Longest key a request may write (the storage refuses a Db whose pages
/// cannot hold it: `OpenError::PageTooSmall`).
pub const MAX_KEY_BYTES: usize = 512;
/// Longest value a request may write.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Most operations in one request.
pub const MAX_OPS: usize = 10_000;

/// One write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Put { key: String, value: String },
    Delete { key: String },
}

/// A replicated write: its operations are applied together, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub ops: Vec<Op>,
}

/// What applying a request did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Response {
    /// The log index the request was applied at.
    pub index: u64,
    /// Why nothing was written (a request that fails [`Request::validate`]);
    /// None when every operation was applied.
    pub refused: Option<String>,
}

/// Why a request is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("a request needs at least one operation")]
    Empty,
    #[error("{n} operations in one request; at most {MAX_OPS}")]
    TooManyOps { n: usize },
    #[error("a key must not be empty")]
    EmptyKey,
    #[error("key of {len} bytes; at most {MAX_KEY_BYTES}")]
    KeyTooLong { len: usize },
    #[error("value of {len} bytes; at most {MAX_VALUE_BYTES}")]
    ValueTooLong { len: usize },
}

impl Request {
    pub fn put(key: impl Into<String>, value: impl Into<String>) -> Request {
        let (key, value) = (key.into(), value.into());
        Request {
            ops: vec![Op::Put { key, value }],
        }
    }

    pub fn delete(key: impl Into<String>) -> Request {
        let key = key.into();
        Request {
            ops: vec![Op::Delete { key }],
        }
    }

    /// Checks the limits. Servers check before proposing, and the state
    /// machine checks again when applying (a refused request writes
    /// nothing on every node alike), so no entry can fail the Db's checks.
    pub fn validate(&self) -> Result<(), RequestError> {
        if self.ops.is_empty() {
            return Err(RequestError::Empty);
        }
        if self.ops.len() > MAX_OPS {
            return Err(RequestError::TooManyOps { n: self.ops.len() });
        }
        for op in &self.ops {
            let key = match op {
                Op::Put { key, value } => {
                    if value.len() > MAX_VALUE_BYTES {
                        return Err(RequestError::ValueTooLong { len: value.len() });
                    }
                    key
                }
                Op::Delete { key } => key,
            };
            if key.is_empty() {
                return Err(RequestError::EmptyKey);
            }
            if key.len() > MAX_KEY_BYTES {
                return Err(RequestError::KeyTooLong { len: key.len() });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_names_each_limit() {
        assert_eq!(Request { ops: vec![] }.validate(), Err(RequestError::Empty));
        assert_eq!(
            Request::put("", "v").validate(),
            Err(RequestError::EmptyKey)
        );
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert_eq!(
            Request::delete(long).validate(),
            Err(RequestError::KeyTooLong {
                len: MAX_KEY_BYTES + 1
            })
        );
        let big = "v".repeat(MAX_VALUE_BYTES + 1);
        assert!(matches!(
            Request::put("k", big).validate(),
            Err(RequestError::ValueTooLong { .. })
        ));
        assert_eq!(
            Request::put("k".repeat(MAX_KEY_BYTES), "v").validate(),
            Ok(())
        );
    }

    #[test]
    fn ops_are_tagged_json() {
        let r: Request = serde_json::from_str(
            r#"{"ops":[{"op":"put","key":"a","value":"1"},{"op":"delete","key":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(
            r.ops,
            vec![
                Op::Put {
                    key: "a".into(),
                    value: "1".into()
                },
                Op::Delete { key: "b".into() }
            ]
        );
    }
}
