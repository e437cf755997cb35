//! Relay frames (docs/relay.md sec. 2): what travels around the sync messages on a WebSocket —
//! the challenge, the client's answer, the welcome, and error frames with stable codes.

use cairn_sync::wire::{Reader, Writer};
use cairn_sync::AuthorId;

pub const FRAMING_VERSION: u8 = 1;
pub const RELAY_MAGIC: [u8; 2] = *b"CR";
pub const SYNC_MAGIC: [u8; 2] = *b"CS";
/// The domain tag of the AUTH signature: an answer can never be mistaken for a signature over
/// anything else a key signs (blocks, heads, writer lists).
pub const AUTH_TAG: &[u8] = b"cairn-relay auth v1";

/// Why the relay refused something. The codes are stable: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    AuthRequired,
    BadSignature,
    TooLarge,
    Malformed,
    Forbidden,
    RateLimited,
    TooSlow,
    TooManyErrors,
    Internal,
    TokenRequired,
    BadToken,
    TokenExpired,
}

impl Code {
    pub const ALL: [Code; 12] = [
        Code::AuthRequired,
        Code::BadSignature,
        Code::TooLarge,
        Code::Malformed,
        Code::Forbidden,
        Code::RateLimited,
        Code::TooSlow,
        Code::TooManyErrors,
        Code::Internal,
        Code::TokenRequired,
        Code::BadToken,
        Code::TokenExpired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Code::AuthRequired => "AUTH_REQUIRED",
            Code::BadSignature => "BAD_SIGNATURE",
            Code::TooLarge => "TOO_LARGE",
            Code::Malformed => "MALFORMED",
            Code::Forbidden => "FORBIDDEN",
            Code::RateLimited => "RATE_LIMITED",
            Code::TooSlow => "TOO_SLOW",
            Code::TooManyErrors => "TOO_MANY_ERRORS",
            Code::Internal => "INTERNAL",
            Code::TokenRequired => "TOKEN_REQUIRED",
            Code::BadToken => "BAD_TOKEN",
            Code::TokenExpired => "TOKEN_EXPIRED",
        }
    }

    pub fn from_code(s: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == s)
    }

    pub fn index(self) -> usize {
        Code::ALL
            .iter()
            .position(|c| *c == self)
            .expect("invariant: every code is listed")
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An ERROR frame's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub fatal: bool,
    /// The stable code as sent (a newer relay may send a code this build does not know).
    pub code: String,
    pub message: String,
    pub retry_after_ms: u32,
}

impl Refusal {
    pub fn new(code: Code, fatal: bool, message: impl Into<String>) -> Refusal {
        Refusal {
            fatal,
            code: code.as_str().to_string(),
            message: message.into(),
            retry_after_ms: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Challenge {
        nonce: [u8; 32],
        relay: AuthorId,
        max_message: u32,
    },
    Auth {
        key: AuthorId,
        sig: [u8; 64],
    },
    Welcome {
        key: AuthorId,
    },
    Error(Refusal),
    /// The app's token for its user (a JWT), sent after CHALLENGE and before AUTH.
    Token {
        token: String,
    },
}

impl Frame {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.raw(&RELAY_MAGIC);
        w.u8(FRAMING_VERSION);
        match self {
            Frame::Challenge {
                nonce,
                relay,
                max_message,
            } => {
                w.u8(1);
                w.raw(nonce);
                w.raw(&relay.0);
                w.raw(&max_message.to_le_bytes());
            }
            Frame::Auth { key, sig } => {
                w.u8(2);
                w.raw(&key.0);
                w.raw(sig);
            }
            Frame::Welcome { key } => {
                w.u8(3);
                w.raw(&key.0);
            }
            Frame::Error(r) => {
                w.u8(4);
                w.u8(u8::from(r.fatal));
                w.bytes(r.code.as_bytes());
                w.bytes(r.message.as_bytes());
                w.raw(&r.retry_after_ms.to_le_bytes());
            }
            Frame::Token { token } => {
                w.u8(5);
                w.bytes(token.as_bytes());
            }
        }
        w.buf
    }

    /// Decodes a relay frame (one starting with `CR`). Any inconsistency is an `Err` with a
    /// message for the `MALFORMED` refusal; never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Frame, String> {
        let mut r = Reader::new(bytes);
        let err = |e: cairn_sync::Error| e.to_string();
        let magic: [u8; 2] = r.array().map_err(err)?;
        if magic != RELAY_MAGIC {
            return Err("not a relay frame".into());
        }
        let version = r.u8().map_err(err)?;
        if version != FRAMING_VERSION {
            return Err(format!(
                "relay framing version {version} is not supported (expected {FRAMING_VERSION})"
            ));
        }
        let frame = match r.u8().map_err(err)? {
            1 => Frame::Challenge {
                nonce: r.array().map_err(err)?,
                relay: AuthorId(r.array().map_err(err)?),
                max_message: u32::from_le_bytes(r.array().map_err(err)?),
            },
            2 => Frame::Auth {
                key: AuthorId(r.array().map_err(err)?),
                sig: r.array().map_err(err)?,
            },
            3 => Frame::Welcome {
                key: AuthorId(r.array().map_err(err)?),
            },
            4 => {
                let fatal = match r.u8().map_err(err)? {
                    0 => false,
                    1 => true,
                    _ => return Err("bad fatal flag".into()),
                };
                let code = r.text().map_err(err)?;
                let message = r.text().map_err(err)?;
                let retry_after_ms = u32::from_le_bytes(r.array().map_err(err)?);
                Frame::Error(Refusal {
                    fatal,
                    code,
                    message,
                    retry_after_ms,
                })
            }
            5 => Frame::Token {
                token: r.text().map_err(err)?,
            },
            t => return Err(format!("unknown relay frame type {t}")),
        };
        r.finish().map_err(err)?;
        Ok(frame)
    }
}

/// What the client signs to answer a challenge.
pub fn auth_message(nonce: &[u8; 32], relay: &AuthorId) -> Vec<u8> {
    let mut m = Vec::with_capacity(AUTH_TAG.len() + 64);
    m.extend_from_slice(AUTH_TAG);
    m.extend_from_slice(nonce);
    m.extend_from_slice(&relay.0);
    m
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_refuse_other_versions() {
        let frames = [
            Frame::Challenge {
                nonce: [7; 32],
                relay: AuthorId([1; 32]),
                max_message: 1 << 20,
            },
            Frame::Auth {
                key: AuthorId([2; 32]),
                sig: [3; 64],
            },
            Frame::Welcome {
                key: AuthorId([2; 32]),
            },
            Frame::Error(Refusal::new(Code::RateLimited, false, "slow down")),
            Frame::Token {
                token: "a.b.c".into(),
            },
        ];
        for f in frames {
            let bytes = f.encode();
            assert_eq!(&bytes[..3], b"CR\x01");
            assert_eq!(Frame::decode(&bytes), Ok(f.clone()));
            let mut v2 = bytes.clone();
            v2[2] = 2;
            assert!(Frame::decode(&v2).unwrap_err().contains("version 2"));
            let mut long = bytes.clone();
            long.push(0);
            assert!(Frame::decode(&long).is_err());
            for cut in 0..bytes.len() {
                assert!(Frame::decode(&bytes[..cut]).is_err());
            }
        }
        for c in Code::ALL {
            assert_eq!(Code::from_code(c.as_str()), Some(c));
        }
    }

    #[test]
    fn challenge_layout_is_the_documented_one() {
        let bytes = Frame::Challenge {
            nonce: [0xAA; 32],
            relay: AuthorId([0xBB; 32]),
            max_message: 0x0102_0304,
        }
        .encode();
        assert_eq!(bytes.len(), 72);
        assert_eq!(&bytes[..4], &[0x43, 0x52, 1, 1]);
        assert_eq!(&bytes[4..36], &[0xAA; 32]);
        assert_eq!(&bytes[36..68], &[0xBB; 32]);
        assert_eq!(&bytes[68..], &[4, 3, 2, 1]);
    }
}
