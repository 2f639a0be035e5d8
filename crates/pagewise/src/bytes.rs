//! What a write takes as a key or value: bytes it may keep without a copy.

use std::borrow::Cow;

/// A key, value or operand handed to a write ([`crate::Batch::insert`],
/// [`crate::Tree::insert`] and their siblings). Borrowed bytes (`&[u8]`,
/// `&Vec<u8>`, `b"..."`, `&str`: any `&T` where `T: AsRef<[u8]>`) are
/// copied once; owned ones (`Vec<u8>`, `String`, `Box<[u8]>`, `[u8; N]`,
/// `Cow<[u8]>`) are moved into the batch, so a caller that built its bytes
/// for the write pays no second allocation and copy.
pub trait IntoBytes {
    /// The bytes, as the write keeps them.
    fn into_bytes(self) -> Vec<u8>;
}

impl<T: AsRef<[u8]> + ?Sized> IntoBytes for &T {
    fn into_bytes(self) -> Vec<u8> {
        self.as_ref().to_vec()
    }
}

impl IntoBytes for Vec<u8> {
    fn into_bytes(self) -> Vec<u8> {
        self
    }
}

impl IntoBytes for String {
    fn into_bytes(self) -> Vec<u8> {
        String::into_bytes(self)
    }
}

impl IntoBytes for Box<[u8]> {
    fn into_bytes(self) -> Vec<u8> {
        self.into_vec()
    }
}

impl<const N: usize> IntoBytes for [u8; N] {
    fn into_bytes(self) -> Vec<u8> {
        self.to_vec()
    }
}

impl IntoBytes for Cow<'_, [u8]> {
    fn into_bytes(self) -> Vec<u8> {
        self.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_bytes_move_and_borrowed_bytes_copy() {
        let v = b"value".to_vec();
        let at = v.as_ptr();
        let moved = v.into_bytes();
        assert_eq!((moved.as_ptr(), &moved[..]), (at, &b"value"[..]));
        let copied = (&moved).into_bytes();
        assert_ne!(copied.as_ptr(), moved.as_ptr());
        assert_eq!(copied, moved);
        assert_eq!(b"ab".into_bytes(), b"ab");
        assert_eq!("ab".into_bytes(), b"ab");
        assert_eq!(String::from("ab").into_bytes(), b"ab");
        assert_eq!(7u64.to_le_bytes().into_bytes(), 7u64.to_le_bytes());
        assert_eq!(Cow::Borrowed(&b"ab"[..]).into_bytes(), b"ab");
        let boxed: Box<[u8]> = Box::from(&b"ab"[..]);
        let at = boxed.as_ptr();
        let unboxed = boxed.into_bytes();
        assert_eq!((unboxed.as_ptr(), &unboxed[..]), (at, &b"ab"[..]));
    }
}
