//! Just enough of the AV1 bitstream (the specification's sections 5.3,
//! 5.5 and 5.9) to tell which temporal units of a segment no later frame
//! refers to: the OBU headers, the sequence header's fields the frame
//! header depends on, and each frame header up to `refresh_frame_flags`.
//! A temporal unit whose frames refresh no reference slot can be left out
//! of decoding without changing any other frame (as an H.264 picture with
//! `nal_ref_idc` 0).
//!
//! Anything this reader does not follow (a header it cannot parse, a
//! sequence header after the first) makes the unit count as referenced:
//! a wrong "referenced" only costs a decode, a wrong "unreferenced" would
//! change frames.

const OBU_SEQUENCE_HEADER: u8 = 1;
const OBU_FRAME_HEADER: u8 = 3;
const OBU_FRAME: u8 = 6;

const KEY_FRAME: u32 = 0;
const INTRA_ONLY_FRAME: u32 = 2;
const SWITCH_FRAME: u32 = 3;

/// Bits of a byte slice, most significant first.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8]) -> Self {
        Bits { data, pos: 0 }
    }

    /// `f(n)`: an unsigned number of `n` bits (`n` <= 32).
    fn f(&mut self, n: u32) -> Option<u32> {
        let mut v = 0u64;
        for _ in 0..n {
            let byte = *self.data.get(self.pos / 8)?;
            v = (v << 1) | u64::from((byte >> (7 - self.pos % 8)) & 1);
            self.pos += 1;
        }
        u32::try_from(v).ok()
    }

    fn flag(&mut self) -> Option<bool> {
        self.f(1).map(|b| b == 1)
    }

    /// `uvlc()`: an Exp-Golomb-like variable length number.
    fn uvlc(&mut self) -> Option<u32> {
        let mut zeros = 0u32;
        while !self.flag()? {
            zeros += 1;
            if zeros >= 32 {
                return Some(u32::MAX);
            }
        }
        Some(self.f(zeros)?.saturating_add((1u32 << zeros) - 1))
    }
}

/// `leb128()` at the start of `data`: the value and the bytes it took.
fn leb128(data: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in data.iter().take(8).enumerate() {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// One OBU of a temporal unit: its type, its extension's temporal and
/// spatial ids, and its payload.
struct Obu<'a> {
    kind: u8,
    temporal_id: u32,
    spatial_id: u32,
    payload: &'a [u8],
}

/// The OBUs of a temporal unit in low-overhead format (as stored: every
/// OBU but perhaps the last carries its size).
fn obus(mut data: &[u8]) -> Option<Vec<Obu<'_>>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let h = data[0];
        if h & 0x80 != 0 {
            return None;
        }
        let kind = (h >> 3) & 0xf;
        let ext = h & 0x04 != 0;
        let has_size = h & 0x02 != 0;
        let mut at = 1usize;
        let (mut temporal_id, mut spatial_id) = (0, 0);
        if ext {
            let e = *data.get(1)?;
            temporal_id = u32::from(e >> 5);
            spatial_id = u32::from((e >> 3) & 3);
            at = 2;
        }
        let size = if has_size {
            let (v, n) = leb128(data.get(at..)?)?;
            at += n;
            usize::try_from(v).ok()?
        } else {
            data.len() - at
        };
        let payload = data.get(at..at.checked_add(size)?)?;
        out.push(Obu {
            kind,
            temporal_id,
            spatial_id,
            payload,
        });
        data = &data[at + size..];
    }
    Some(out)
}

/// The sequence header's fields a frame header's start depends on.
#[derive(Debug, Clone, Default)]
struct Sequence {
    reduced_still_picture_header: bool,
    decoder_model_info_present: bool,
    equal_picture_interval: bool,
    buffer_removal_time_length: u32,
    frame_presentation_time_length: u32,
    /// (operating_point_idc, decoder_model_present_for_this_op).
    operating_points: Vec<(u32, bool)>,
    frame_id_numbers_present: bool,
    frame_id_length: u32,
    force_screen_content_tools: u32,
    force_integer_mv: u32,
    order_hint_bits: u32,
}

/// `sequence_header_obu()`, as far as [`Sequence`] needs.
fn sequence_header(payload: &[u8]) -> Option<Sequence> {
    let mut b = Bits::new(payload);
    let mut s = Sequence::default();
    let _seq_profile = b.f(3)?;
    let _still_picture = b.flag()?;
    s.reduced_still_picture_header = b.flag()?;
    if s.reduced_still_picture_header {
        let _seq_level_idx = b.f(5)?;
        s.operating_points.push((0, false));
    } else {
        let timing_info_present = b.flag()?;
        if timing_info_present {
            let _num_units_in_display_tick = b.f(32)?;
            let _time_scale = b.f(32)?;
            s.equal_picture_interval = b.flag()?;
            if s.equal_picture_interval {
                let _num_ticks_per_picture_minus_1 = b.uvlc()?;
            }
            s.decoder_model_info_present = b.flag()?;
        }
        let mut buffer_delay_length = 0;
        if s.decoder_model_info_present {
            buffer_delay_length = b.f(5)? + 1;
            let _num_units_in_decoding_tick = b.f(32)?;
            s.buffer_removal_time_length = b.f(5)? + 1;
            s.frame_presentation_time_length = b.f(5)? + 1;
        }
        let initial_display_delay_present = b.flag()?;
        let count = b.f(5)? + 1;
        for _ in 0..count {
            let idc = b.f(12)?;
            let seq_level_idx = b.f(5)?;
            if seq_level_idx > 7 {
                let _seq_tier = b.flag()?;
            }
            let mut model_present = false;
            if s.decoder_model_info_present {
                model_present = b.flag()?;
                if model_present {
                    let _decoder_buffer_delay = b.f(buffer_delay_length)?;
                    let _encoder_buffer_delay = b.f(buffer_delay_length)?;
                    let _low_delay_mode_flag = b.flag()?;
                }
            }
            if initial_display_delay_present && b.flag()? {
                let _initial_display_delay_minus_1 = b.f(4)?;
            }
            s.operating_points.push((idc, model_present));
        }
    }
    let width_bits = b.f(4)? + 1;
    let height_bits = b.f(4)? + 1;
    let _max_frame_width_minus_1 = b.f(width_bits)?;
    let _max_frame_height_minus_1 = b.f(height_bits)?;
    if !s.reduced_still_picture_header {
        s.frame_id_numbers_present = b.flag()?;
    }
    if s.frame_id_numbers_present {
        let delta_frame_id_length_minus_2 = b.f(4)?;
        let additional_frame_id_length_minus_1 = b.f(3)?;
        s.frame_id_length = additional_frame_id_length_minus_1 + delta_frame_id_length_minus_2 + 3;
    }
    let _use_128x128_superblock = b.flag()?;
    let _enable_filter_intra = b.flag()?;
    let _enable_intra_edge_filter = b.flag()?;
    // SELECT_SCREEN_CONTENT_TOOLS and SELECT_INTEGER_MV.
    s.force_screen_content_tools = 2;
    s.force_integer_mv = 2;
    if !s.reduced_still_picture_header {
        let _enable_interintra_compound = b.flag()?;
        let _enable_masked_compound = b.flag()?;
        let _enable_warped_motion = b.flag()?;
        let _enable_dual_filter = b.flag()?;
        let enable_order_hint = b.flag()?;
        if enable_order_hint {
            let _enable_jnt_comp = b.flag()?;
            let _enable_ref_frame_mvs = b.flag()?;
        }
        if !b.flag()? {
            // seq_choose_screen_content_tools is 0.
            s.force_screen_content_tools = b.f(1)?;
        }
        if s.force_screen_content_tools > 0 {
            if !b.flag()? {
                // seq_choose_integer_mv is 0.
                s.force_integer_mv = b.f(1)?;
            }
        } else {
            s.force_integer_mv = 2;
        }
        if enable_order_hint {
            s.order_hint_bits = b.f(3)? + 1;
        }
    }
    Some(s)
}

/// What a frame header (or a shown existing frame) does to the reference
/// slots: the slots it refreshes and its frame type.
struct FrameRefresh {
    refresh: u32,
    frame_type: u32,
}

/// `uncompressed_header()` up to `refresh_frame_flags`. `slots` holds the
/// frame type in each reference slot (a shown existing key frame
/// refreshes every slot).
fn frame_refresh(s: &Sequence, obu: &Obu<'_>, slots: &[u32; 8]) -> Option<FrameRefresh> {
    const ALL: u32 = 0xff;
    let mut b = Bits::new(obu.payload);
    if s.reduced_still_picture_header {
        return Some(FrameRefresh {
            refresh: ALL,
            frame_type: KEY_FRAME,
        });
    }
    let temporal_point_info = |b: &mut Bits<'_>| -> Option<()> {
        if s.decoder_model_info_present && !s.equal_picture_interval {
            b.f(s.frame_presentation_time_length)?;
        }
        Some(())
    };
    if b.flag()? {
        // show_existing_frame
        let idx = b.f(3)? as usize;
        temporal_point_info(&mut b)?;
        let frame_type = slots[idx];
        return Some(FrameRefresh {
            refresh: if frame_type == KEY_FRAME { ALL } else { 0 },
            frame_type,
        });
    }
    let frame_type = b.f(2)?;
    let intra = frame_type == INTRA_ONLY_FRAME || frame_type == KEY_FRAME;
    let show_frame = b.flag()?;
    if show_frame {
        temporal_point_info(&mut b)?;
    } else {
        let _showable_frame = b.flag()?;
    }
    // A switch frame and a shown key frame refresh every slot (and are
    // error resilient without saying so).
    if frame_type == SWITCH_FRAME || (frame_type == KEY_FRAME && show_frame) {
        return Some(FrameRefresh {
            refresh: ALL,
            frame_type,
        });
    }
    let error_resilient = b.flag()?;
    let _disable_cdf_update = b.flag()?;
    let screen_content = if s.force_screen_content_tools == 2 {
        b.f(1)?
    } else {
        s.force_screen_content_tools
    };
    if screen_content > 0 && s.force_integer_mv == 2 {
        let _force_integer_mv = b.flag()?;
    }
    if s.frame_id_numbers_present {
        let _current_frame_id = b.f(s.frame_id_length)?;
    }
    // frame_type is not SWITCH_FRAME here, nor the header reduced.
    let _frame_size_override_flag = b.flag()?;
    let _order_hint = b.f(s.order_hint_bits)?;
    if !(intra || error_resilient) {
        let _primary_ref_frame = b.f(3)?;
    }
    if s.decoder_model_info_present && b.flag()? {
        // buffer_removal_time_present_flag
        for &(idc, present) in &s.operating_points {
            if present {
                let in_temporal = (idc >> obu.temporal_id) & 1 == 1;
                let in_spatial = (idc >> (obu.spatial_id + 8)) & 1 == 1;
                if idc == 0 || (in_temporal && in_spatial) {
                    b.f(s.buffer_removal_time_length)?;
                }
            }
        }
    }
    Some(FrameRefresh {
        refresh: b.f(8)?,
        frame_type,
    })
}

/// For each packet (temporal unit) of an AV1 segment, whether no later
/// frame refers to anything it decodes: its frames refresh no reference
/// slot. The segment's sequence header is in its first packet; without
/// one, or past anything this reader does not follow, every packet from
/// there on counts as referenced.
pub(crate) fn unreferenced_packets(data: &[u8], packet_offsets: &[u64]) -> Vec<bool> {
    let n = packet_offsets.len().saturating_sub(1);
    let mut out = vec![false; n];
    let mut seq: Option<Sequence> = None;
    let mut slots = [KEY_FRAME; 8];
    for (j, w) in packet_offsets.windows(2).enumerate() {
        let packet = usize::try_from(w[0])
            .ok()
            .zip(usize::try_from(w[1]).ok())
            .and_then(|(a, b)| data.get(a..b));
        let Some(units) = packet.and_then(obus) else {
            break;
        };
        let mut frames = 0usize;
        let mut refreshes = false;
        let mut followed = true;
        for obu in &units {
            match obu.kind {
                OBU_SEQUENCE_HEADER => {
                    if j != 0 || seq.is_some() {
                        followed = false;
                        break;
                    }
                    seq = sequence_header(obu.payload);
                }
                OBU_FRAME | OBU_FRAME_HEADER => {
                    let Some(r) = seq.as_ref().and_then(|s| frame_refresh(s, obu, &slots)) else {
                        followed = false;
                        break;
                    };
                    for (k, slot) in slots.iter_mut().enumerate() {
                        if (r.refresh >> k) & 1 == 1 {
                            *slot = r.frame_type;
                        }
                    }
                    refreshes |= r.refresh != 0;
                    frames += 1;
                }
                _ => {}
            }
        }
        if !followed {
            break;
        }
        out[j] = frames > 0 && !refreshes;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_read_numbers_most_significant_first() {
        let mut b = Bits::new(&[0b1011_0001, 0b0100_0000]);
        assert_eq!(b.f(1), Some(1));
        assert_eq!(b.f(3), Some(0b011));
        assert_eq!(b.f(6), Some(0b00_0101));
        // uvlc: "010" is 1.
        let mut u = Bits::new(&[0b0100_0000]);
        assert_eq!(u.uvlc(), Some(1));
        let mut short = Bits::new(&[0xff]);
        assert_eq!(short.f(9), None);
        assert_eq!(leb128(&[0x80, 0x01]), Some((128, 2)));
        assert_eq!(leb128(&[0x80]), None);
    }

    #[test]
    fn damaged_units_count_as_referenced() {
        // A frame OBU before any sequence header, a truncated OBU, and an
        // OBU with the forbidden bit.
        let frame_obu = [0x32, 0x01, 0x00];
        let data: Vec<u8> = [&frame_obu[..], &[0x32, 0x05, 0x00], &[0x80]].concat();
        assert_eq!(
            unreferenced_packets(&data, &[0, 3, 6, 7]),
            vec![false, false, false]
        );
        assert_eq!(unreferenced_packets(&[], &[0]), Vec::<bool>::new());
    }
}
