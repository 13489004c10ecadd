//! `X-Ctxgate-Signature: sha256=<hex>` = HMAC-SHA256(secret, `"{timestamp}.{raw body}"`), with the
//! unix timestamp (seconds) in `X-Ctxgate-Timestamp`. The timestamp is part of the signed data and
//! must be within the tolerance window of the receiver's clock.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SIGNATURE_HEADER: &str = "x-ctxgate-signature";
pub const TIMESTAMP_HEADER: &str = "x-ctxgate-timestamp";

type HmacSha256 = Hmac<Sha256>;

/// Why a signature was refused. The variants map to stable error codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the X-Ctxgate-Signature or X-Ctxgate-Timestamp header is missing")]
    Missing,
    #[error("the signature header is not of the form sha256=<64 hex digits>")]
    Malformed,
    #[error("the timestamp is not a unix time in seconds")]
    BadTimestamp,
    #[error("the timestamp is outside the accepted window of {window_secs} s")]
    Stale { window_secs: i64 },
    #[error("the signature does not match the body")]
    Mismatch,
}

impl SignatureError {
    pub fn code(&self) -> &'static str {
        match self {
            SignatureError::Missing => "missing_signature",
            SignatureError::Malformed => "malformed_signature",
            SignatureError::BadTimestamp => "bad_timestamp",
            SignatureError::Stale { .. } => "stale_timestamp",
            SignatureError::Mismatch => "bad_signature",
        }
    }
}

fn mac(secret: &[u8], timestamp: &str, body: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length.
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The signature header value for `body` sent at `timestamp`.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let tag = mac(secret, &timestamp.to_string(), body)
        .finalize()
        .into_bytes();
    format!("sha256={}", hex::encode(tag))
}

/// Checks a signature in constant time and the timestamp against `now` (unix seconds).
/// Returns the signature in its canonical form (lowercase hex), which identifies the request
/// whatever letter case the sender used.
pub fn verify(
    secret: &[u8],
    signature: Option<&str>,
    timestamp: Option<&str>,
    body: &[u8],
    now: i64,
    window_secs: i64,
) -> Result<String, SignatureError> {
    let (Some(signature), Some(timestamp)) = (signature, timestamp) else {
        return Err(SignatureError::Missing);
    };
    let hex_tag = signature
        .trim()
        .strip_prefix("sha256=")
        .ok_or(SignatureError::Malformed)?;
    let tag = hex::decode(hex_tag).map_err(|_| SignatureError::Malformed)?;
    if tag.len() != 32 {
        return Err(SignatureError::Malformed);
    }
    let timestamp = timestamp.trim();
    let ts: i64 = timestamp
        .parse()
        .map_err(|_| SignatureError::BadTimestamp)?;
    if now.abs_diff(ts) > window_secs.unsigned_abs() {
        return Err(SignatureError::Stale { window_secs });
    }
    mac(secret, timestamp, body)
        .verify_slice(&tag)
        .map_err(|_| SignatureError::Mismatch)?;
    Ok(hex::encode(tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper() {
        let sig = sign(b"k", 1_700_000_000, b"{}");
        assert_eq!(
            verify(
                b"k",
                Some(&sig),
                Some("1700000000"),
                b"{}",
                1_700_000_010,
                300
            ),
            Ok(sig.trim_start_matches("sha256=").to_owned())
        );
        // Upper case is the same signature, canonically lowercase.
        let upper = format!(
            "sha256={}",
            sig.trim_start_matches("sha256=").to_uppercase()
        );
        assert_eq!(
            verify(
                b"k",
                Some(&upper),
                Some("1700000000"),
                b"{}",
                1_700_000_010,
                300
            ),
            Ok(sig.trim_start_matches("sha256=").to_owned())
        );
        // Extreme timestamps are stale, not an overflow.
        assert_eq!(
            verify(
                b"k",
                Some(&sig),
                Some("-9223372036854775808"),
                b"{}",
                i64::MAX,
                300
            ),
            Err(SignatureError::Stale { window_secs: 300 })
        );
        assert_eq!(
            verify(
                b"k",
                Some(&sig),
                Some("1700000000"),
                b"{ }",
                1_700_000_010,
                300
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(
                b"other",
                Some(&sig),
                Some("1700000000"),
                b"{}",
                1_700_000_010,
                300
            ),
            Err(SignatureError::Mismatch)
        );
        // The timestamp is signed: moving it breaks the signature.
        assert_eq!(
            verify(
                b"k",
                Some(&sig),
                Some("1700000001"),
                b"{}",
                1_700_000_010,
                300
            ),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn window_and_shapes() {
        let sig = sign(b"k", 1000, b"x");
        assert_eq!(
            verify(b"k", Some(&sig), Some("1000"), b"x", 1301, 300),
            Err(SignatureError::Stale { window_secs: 300 })
        );
        assert_eq!(
            verify(b"k", Some(&sig), Some("1000"), b"x", 699, 300),
            Err(SignatureError::Stale { window_secs: 300 })
        );
        assert_eq!(
            verify(b"k", None, Some("1000"), b"x", 1000, 300),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(b"k", Some("md5=00"), Some("1000"), b"x", 1000, 300),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(b"k", Some("sha256=zz"), Some("1000"), b"x", 1000, 300),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(b"k", Some(&sig), Some("soon"), b"x", 1000, 300),
            Err(SignatureError::BadTimestamp)
        );
    }
}
