//! Keys, values and operands from Python: `bytes` is borrowed as is; other
//! buffer-protocol objects (bytearray, memoryview, array, mmap...) are
//! copied, so a concurrent change to them cannot race with the engine.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};
use std::ops::Deref;

pub enum Bytes<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl Deref for Bytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Borrowed(b) => b,
            Bytes::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for Bytes<'_> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

/// A write keeps copied bytes without copying them again.
impl pagewise::IntoBytes for Bytes<'_> {
    fn into_bytes(self) -> Vec<u8> {
        match self {
            Bytes::Borrowed(b) => b.to_vec(),
            Bytes::Owned(v) => v,
        }
    }
}

/// `obj` as bytes; `what` names it in the TypeError ("key", "value").
pub fn extract<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Bytes<'a>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(Bytes::Borrowed(b.as_bytes()));
    }
    if let Ok(b) = obj.downcast::<PyByteArray>() {
        return Ok(Bytes::Owned(b.to_vec()));
    }
    let type_error = || {
        let ty = obj
            .get_type()
            .name()
            .map_or_else(|_| "?".to_string(), |n| n.to_string());
        let hint = if obj.is_instance_of::<PyString>() {
            "; encode it first, e.g. s.encode()"
        } else {
            ""
        };
        PyTypeError::new_err(format!(
            "{what} must be bytes or another buffer-protocol object (bytearray, memoryview), not {ty}{hint}"
        ))
    };
    if obj.is_instance_of::<PyString>() {
        return Err(type_error());
    }
    // memoryview() accepts exactly the buffer-protocol objects (abi3 before
    // 3.11 has no direct buffer API).
    let builtins = obj.py().import("builtins")?;
    let view = builtins
        .getattr("memoryview")?
        .call1((obj,))
        .map_err(|_| type_error())?;
    let copied = view.call_method0("tobytes")?;
    let v = copied.downcast::<PyBytes>()?.as_bytes().to_vec();
    Ok(Bytes::Owned(v))
}

pub fn to_py<'py>(py: Python<'py>, b: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, b)
}
