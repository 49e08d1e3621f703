//! How a fuzz input's bytes arrive: in pieces, as reads from a socket
//! would give them.

/// Where each piece of `len` bytes ends, from a seed: 1 to 64 bytes each.
pub fn pieces(seed: u8, len: usize) -> Vec<usize> {
    let mut state = u32::from(seed) | 1;
    let mut ends = Vec::new();
    let mut at = 0;
    while at < len {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        at = (at + 1 + (state % 64) as usize).min(len);
        ends.push(at);
    }
    ends
}
