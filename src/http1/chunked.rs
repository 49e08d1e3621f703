//! A chunked body (RFC 9112 §7.1) read as it passes: [`Chunked::feed`]
//! is given the bytes as they arrive, in pieces of any size, says how
//! many of them belong to the body and whether it has ended, and refuses
//! what a stricter or looser reader could frame differently. The bytes
//! themselves are relayed as they came, so nothing is decoded into a copy.
//!
//! Refused: a chunk size that is not 1 to 16 hex digits (or is followed
//! by white space and anything but `;`), a line ended by
//! a bare LF or by CR without LF, control bytes in a chunk extension, a
//! chunk not followed by CRLF, a trailer field that is not `name: value`
//! (obs-fold included), and extensions or trailers longer than their
//! bounds (so that a client cannot make the reader scan forever without
//! sending data).

/// Bytes of chunk extensions allowed on one chunk's size line.
pub const MAX_EXTENSION: usize = 4096;

/// Bytes of trailer fields allowed after the last chunk.
pub const MAX_TRAILERS: usize = 16 * 1024;

/// Why a chunked body is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// A chunk size that is not 1 to 16 hex digits.
    #[error("an invalid chunk size")]
    Size,
    /// A chunk extension with a control byte, or too long.
    #[error("an invalid chunk extension")]
    Extension,
    /// A line not ended by CRLF, or chunk data not followed by CRLF.
    #[error("a chunk line not ended by CRLF")]
    LineEnd,
    /// A trailer field that is not `name: value`, or too many of them.
    #[error("an invalid trailer field")]
    Trailer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// The first digit of a chunk size.
    SizeStart,
    /// More digits of a chunk size (`digits` so far).
    Size { digits: u8 },
    /// White space after a chunk size, before its `;`.
    SizeWs,
    /// A chunk extension, to its CR.
    Extension,
    /// The LF of a size line.
    SizeLf,
    /// Chunk data, this many bytes left.
    Data(u64),
    /// The CR after chunk data.
    DataCr,
    /// The LF after chunk data.
    DataLf,
    /// The start of a trailer line, or the CR of the blank line.
    TrailerStart,
    /// A trailer field's name, to its colon.
    TrailerName,
    /// A trailer field's value, to its CR.
    TrailerValue,
    /// The LF of a trailer line.
    TrailerLf,
    /// The LF of the blank line that ends the body.
    EndLf,
    /// The body is complete.
    Done,
}

/// The reader of one chunked body.
#[derive(Clone, Debug)]
pub struct Chunked {
    state: State,
    size: u64,
    /// Bytes of the current size line's extensions, or of all trailers.
    extra: usize,
}

impl Default for Chunked {
    fn default() -> Self {
        Self::new()
    }
}

/// What [`Chunked::feed`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// How many bytes at the start of the input belong to the body
    /// (all of them, unless it ended within the input).
    pub consumed: usize,
    /// Whether the body ended with them.
    pub done: bool,
}

/// What [`Chunked::decode`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// How many bytes at the start of the input it read.
    pub consumed: usize,
    /// Where, within them, the chunk data it read lies (empty when it
    /// read only framing).
    pub data: std::ops::Range<usize>,
    /// Whether the body ended with them.
    pub done: bool,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A byte a field value or chunk extension may have: HTAB, visible
/// ASCII, space, and obs-text.
fn is_text(b: u8) -> bool {
    b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80
}

impl Chunked {
    /// A reader at the start of a body.
    pub fn new() -> Self {
        Self {
            state: State::SizeStart,
            size: 0,
            extra: 0,
        }
    }

    /// Whether the body has ended.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Reads `input`, the next bytes of the body (and, once it ends,
    /// perhaps of what follows it).
    pub fn feed(&mut self, input: &[u8]) -> Result<Progress, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            if let State::Data(left) = self.state {
                // The bulk of a body: skip the data at once.
                i += self.take_data(left, input.len() - i);
                continue;
            }
            if self.state == State::Done {
                break;
            }
            let b = input[i];
            i += 1;
            self.state = self.step(b)?;
            if self.state == State::Done {
                break;
            }
        }
        Ok(Progress {
            consumed: i,
            done: self.state == State::Done,
        })
    }

    /// Reads `input` as [`Chunked::feed`] does, but stops after the first
    /// run of chunk data, so that a caller which passes the data on
    /// decoded (a layer that re-frames the body) gets it as a range of
    /// `input`: call again with `input[consumed..]` until `done`, or
    /// until `consumed` is all of `input` and more must be read.
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Data(left) => {
                    let start = i;
                    i += self.take_data(left, input.len() - i);
                    return Ok(Decoded {
                        consumed: i,
                        data: start..i,
                        done: false,
                    });
                }
                State::Done => break,
                _ => {
                    let b = input[i];
                    i += 1;
                    self.state = self.step(b)?;
                }
            }
        }
        Ok(Decoded {
            consumed: i,
            data: i..i,
            done: self.state == State::Done,
        })
    }

    /// Takes as much of the `left` bytes of chunk data as `available`
    /// allows: how many.
    fn take_data(&mut self, left: u64, available: usize) -> usize {
        let take = usize::try_from(left).unwrap_or(usize::MAX).min(available);
        let left = left - take as u64;
        self.state = if left == 0 {
            State::DataCr
        } else {
            State::Data(left)
        };
        take
    }

    /// The state after byte `b` in any state but `Data` and `Done`.
    fn step(&mut self, b: u8) -> Result<State, ChunkError> {
        Ok(match self.state {
            State::SizeStart => {
                let digit = hex(b).ok_or(ChunkError::Size)?;
                self.size = digit;
                self.extra = 0;
                State::Size { digits: 1 }
            }
            State::Size { digits } => match b {
                b'\r' => State::SizeLf,
                b'\n' => return Err(ChunkError::LineEnd),
                b';' => State::Extension,
                b' ' | b'\t' => State::SizeWs,
                _ => {
                    let digit = hex(b).ok_or(ChunkError::Size)?;
                    if digits >= 16 {
                        return Err(ChunkError::Size);
                    }
                    self.size = (self.size << 4) | digit;
                    State::Size { digits: digits + 1 }
                }
            },
            State::SizeWs => match b {
                b' ' | b'\t' => self.extension_byte(State::SizeWs)?,
                b';' => State::Extension,
                _ => return Err(ChunkError::Size),
            },
            State::Extension => match b {
                b'\r' => State::SizeLf,
                _ if is_text(b) => self.extension_byte(State::Extension)?,
                b'\n' => return Err(ChunkError::LineEnd),
                _ => return Err(ChunkError::Extension),
            },
            State::SizeLf => match b {
                b'\n' if self.size == 0 => {
                    self.extra = 0;
                    State::TrailerStart
                }
                b'\n' => State::Data(self.size),
                _ => return Err(ChunkError::LineEnd),
            },
            State::DataCr => match b {
                b'\r' => State::DataLf,
                _ => return Err(ChunkError::LineEnd),
            },
            State::DataLf => match b {
                b'\n' => State::SizeStart,
                _ => return Err(ChunkError::LineEnd),
            },
            State::TrailerStart => match b {
                b'\r' => State::EndLf,
                _ if is_tchar(b) => self.trailer_byte(State::TrailerName)?,
                b'\n' => return Err(ChunkError::LineEnd),
                _ => return Err(ChunkError::Trailer),
            },
            State::TrailerName => match b {
                b':' => self.trailer_byte(State::TrailerValue)?,
                _ if is_tchar(b) => self.trailer_byte(State::TrailerName)?,
                _ => return Err(ChunkError::Trailer),
            },
            State::TrailerValue => match b {
                b'\r' => State::TrailerLf,
                _ if is_text(b) => self.trailer_byte(State::TrailerValue)?,
                b'\n' => return Err(ChunkError::LineEnd),
                _ => return Err(ChunkError::Trailer),
            },
            State::TrailerLf => match b {
                b'\n' => State::TrailerStart,
                _ => return Err(ChunkError::LineEnd),
            },
            State::EndLf => match b {
                b'\n' => State::Done,
                _ => return Err(ChunkError::LineEnd),
            },
            State::Data(_) | State::Done => self.state,
        })
    }

    /// Counts one byte of a size line's extensions against
    /// [`MAX_EXTENSION`].
    fn extension_byte(&mut self, next: State) -> Result<State, ChunkError> {
        self.extra += 1;
        if self.extra > MAX_EXTENSION {
            return Err(ChunkError::Extension);
        }
        Ok(next)
    }

    /// Counts one byte of trailers against [`MAX_TRAILERS`].
    fn trailer_byte(&mut self, next: State) -> Result<State, ChunkError> {
        self.extra += 1;
        if self.extra > MAX_TRAILERS {
            return Err(ChunkError::Trailer);
        }
        Ok(next)
    }
}

fn hex(b: u8) -> Option<u64> {
    (b as char).to_digit(16).map(u64::from)
}
