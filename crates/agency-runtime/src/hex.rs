//! Bytes as lower-case hex digits, and back: how keys, secrets and digests are written.

/// The SHA-256 of `text`, in hex.
pub(crate) fn sha256(text: &str) -> String {
    use sha2::Digest;
    encode(&sha2::Sha256::digest(text.as_bytes()))
}

pub(crate) fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(2 * bytes.len());
    for b in bytes {
        hex.push(char::from(DIGITS[usize::from(b >> 4)]));
        hex.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    hex
}

/// Exactly 32 bytes from 64 hex digits (surrounding white space ignored).
pub(crate) fn decode32(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip() {
        let bytes: [u8; 32] = std::array::from_fn(|i| (i * 7) as u8);
        assert_eq!(
            super::decode32(&format!(" {}\n", super::encode(&bytes))),
            Some(bytes)
        );
        assert_eq!(super::encode(&[0x00, 0x9f, 0xa0, 0xff]), "009fa0ff");
        for bad in ["", "abc", &"g".repeat(64), &"é".repeat(32), &"0".repeat(66)] {
            assert_eq!(super::decode32(bad), None, "{bad}");
        }
    }
}
