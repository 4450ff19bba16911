//! What the layout reads and rewrites in the encoders' packets without a
//! decoder: x264's self-description taken out, AV1 temporal delimiters
//! dropped, and H.264 pictures that no other picture refers to told apart.

/// The UUID of the unregistered user-data SEI in which x264 writes its
/// version and options.
pub(super) const X264_SEI_UUID: [u8; 16] = [
    0xdc, 0x45, 0xe9, 0xbd, 0xe6, 0xd9, 0x48, 0xb7, 0x96, 0x2c, 0xd8, 0x20, 0xd9, 0x23, 0xee, 0xef,
];

/// Positions of the Annex B start codes (`00 00 01`) in `data`.
fn start_codes(data: &[u8]) -> Vec<usize> {
    let mut at = Vec::new();
    let mut i = 0usize;
    while let Some(k) = data
        .get(i..)
        .and_then(|d| d.windows(3).position(|w| w == [0, 0, 1]))
    {
        at.push(i + k);
        i += k + 3;
    }
    at
}

/// Takes x264's description of itself (an unregistered user-data SEI with
/// its version and every option, about 700 bytes) out of the Annex B
/// packet `data`, and returns its text. Each segment is a stream of its
/// own, so each would carry it; decoders do not need it (the cache's
/// metadata names the encoder, its version and settings). A NAL unit that
/// is anything else, another SEI included, is left as it is.
pub(super) fn take_x264_sei(data: &mut Vec<u8>) -> Option<String> {
    let codes = start_codes(data);
    for (k, &at) in codes.iter().enumerate() {
        let end = codes.get(k + 1).copied().unwrap_or(data.len());
        let body = &data[at + 3..end];
        if body.first().map(|h| h & 0x1f) != Some(6) {
            continue;
        }
        // The SEI's bytes without emulation prevention.
        let mut rbsp = Vec::with_capacity(body.len());
        let mut zeros = 0;
        for &b in &body[1..] {
            if zeros >= 2 && b == 3 {
                zeros = 0;
                continue;
            }
            zeros = if b == 0 { zeros + 1 } else { 0 };
            rbsp.push(b);
        }
        let mut i = 0usize;
        let mut number = || {
            let mut v = 0usize;
            while let Some(&b) = rbsp.get(i) {
                i += 1;
                v += usize::from(b);
                if b != 0xff {
                    return Some(v);
                }
            }
            None
        };
        let (Some(kind), Some(size)) = (number(), number()) else {
            continue;
        };
        // One message only: user data with x264's UUID, then the trailing
        // bits (and the zero byte of a next 4-byte start code).
        let Some(payload) = rbsp.get(i..i + size) else {
            continue;
        };
        let rest = &rbsp[i + size..];
        if kind != 5
            || size < 16
            || payload[..16] != X264_SEI_UUID
            || rest.first() != Some(&0x80)
            || rest[1..].iter().any(|&b| b != 0)
        {
            continue;
        }
        let text = String::from_utf8_lossy(&payload[16..])
            .trim_end_matches('\0')
            .to_string();
        data.drain(at..end);
        return Some(text);
    }
    None
}

/// Drops the temporal delimiter (an empty OBU of type 2, `12 00`) that
/// starts the AV1 packet at `start` of `data`: each packet is one temporal
/// unit already, and AV1 stored per sample (ISOBMFF, Matroska) leaves the
/// delimiters out likewise.
pub(super) fn drop_temporal_delimiter(data: &mut Vec<u8>, start: usize) {
    if data.get(start..start + 2) == Some(&[0x12, 0x00]) {
        data.drain(start..start + 2);
    }
}

/// Whether an H.264 packet (Annex B) is a picture no other picture refers
/// to: every coded slice in it has `nal_ref_idc` 0 (such a picture can be
/// left out of decoding without changing any other picture).
pub(super) fn h264_disposable(packet: &[u8]) -> bool {
    let mut slices = 0usize;
    let mut i = 0usize;
    while let Some(at) = packet[i..].windows(3).position(|w| w == [0, 0, 1]) {
        let h = i + at + 3;
        let Some(&header) = packet.get(h) else {
            break;
        };
        if matches!(header & 0x1f, 1 | 5) {
            if header & 0x60 != 0 {
                return false;
            }
            slices += 1;
        }
        i = h;
    }
    slices > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only an SEI that is x264's user data and nothing more is taken out:
    /// another user-data SEI, and one with a second message, stay.
    #[test]
    fn only_x264s_own_sei_is_taken_out() {
        let mut x264 = vec![0, 0, 0, 1, 0x06, 5];
        let text = b"x264 - core 164 - options: cabac=1\0";
        x264.push((16 + text.len()) as u8);
        x264.extend_from_slice(&X264_SEI_UUID);
        x264.extend_from_slice(text);
        x264.push(0x80);
        let other = |extra: &[u8]| {
            let mut v = vec![0, 0, 1, 0x06, 5, 16];
            v.extend_from_slice(&[7u8; 16]);
            v.extend_from_slice(extra);
            v.push(0x80);
            v
        };
        let sps = [0, 0, 0, 1, 0x67, 0x42, 0, 0x0a];
        let idr = [0, 0, 1, 0x65, 0x88, 0x84];
        let mut packet = sps.to_vec();
        packet.extend_from_slice(&x264);
        packet.extend(other(&[]));
        packet.extend_from_slice(&idr);
        let info = take_x264_sei(&mut packet).unwrap();
        assert_eq!(info, "x264 - core 164 - options: cabac=1");
        let mut want = sps.to_vec();
        // The SEI's leading zero stays: the next NAL unit keeps a start code.
        want.push(0);
        want.extend(other(&[]));
        want.extend_from_slice(&idr);
        assert_eq!(packet, want);
        assert_eq!(take_x264_sei(&mut packet), None);
        // x264's UUID with a second message after it: kept.
        let mut two = x264[..x264.len() - 1].to_vec();
        two.extend_from_slice(&[1, 1, 0, 0x80]);
        let mut p2 = sps.to_vec();
        p2.extend_from_slice(&two);
        let before = p2.clone();
        assert_eq!(take_x264_sei(&mut p2), None);
        assert_eq!(p2, before);
    }
}
