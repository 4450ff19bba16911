//! Just enough of the AV1 bitstream (the specification's sections 5.3,
//! 5.5 and 5.9) to tell which frames of a segment a read of some of its
//! frames must decode: the OBU headers, the sequence header's fields the
//! frame header depends on, and each frame header up to `ref_frame_idx`.
//! A frame depends on the frames that last refreshed the reference slots
//! it names (its seven references, among them the one it takes its
//! probabilities from; a shown existing frame on the slot it shows). A
//! read decodes the frames it shows and, transitively, those they depend
//! on: whole temporal units, units with some frames left out (the OBUs of
//! the others dropped), or none of a unit. Every frame decoded then sees
//! the same reference slots it sees in a decode of every unit, so it
//! decodes to the same picture.
//!
//! Anything this reader does not follow (a header it cannot parse, an OBU
//! of a kind or layer it does not expect, a sequence header after the
//! first) makes that unit and every later one decode whole, together with
//! everything in the reference slots before it: a wrong "needed" only
//! costs a decode, a wrong "not needed" would change frames.

use std::ops::Range;

const OBU_SEQUENCE_HEADER: u8 = 1;
const OBU_TEMPORAL_DELIMITER: u8 = 2;
const OBU_FRAME_HEADER: u8 = 3;
const OBU_TILE_GROUP: u8 = 4;
const OBU_METADATA: u8 = 5;
const OBU_FRAME: u8 = 6;
const OBU_REDUNDANT_FRAME_HEADER: u8 = 7;
const OBU_PADDING: u8 = 15;

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

/// One OBU of a temporal unit: its type, whether it has an extension and
/// the extension's temporal and spatial ids, its payload, and where the
/// whole OBU (header to payload's end) lies in the unit.
struct Obu<'a> {
    kind: u8,
    extension: bool,
    temporal_id: u32,
    spatial_id: u32,
    payload: &'a [u8],
    span: Range<usize>,
}

/// The OBUs of a temporal unit in low-overhead format (as stored: every
/// OBU but perhaps the last carries its size).
fn obus(mut data: &[u8]) -> Option<Vec<Obu<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
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
            extension: ext,
            temporal_id,
            spatial_id,
            payload,
            span: pos..pos + at + size,
        });
        pos += at + size;
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
    delta_frame_id_length: u32,
    force_screen_content_tools: u32,
    force_integer_mv: u32,
    enable_order_hint: bool,
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
        s.delta_frame_id_length = delta_frame_id_length_minus_2 + 2;
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
        s.enable_order_hint = enable_order_hint;
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

/// What a frame header (or a shown existing frame) reads from and does to
/// the reference slots.
struct FrameHeader {
    /// The slots it refreshes.
    refresh: u32,
    frame_type: u32,
    /// Whether the frame is shown (a shown existing frame is).
    shown: bool,
    /// The slots it reads, a bit each: its references (every slot when
    /// they are signalled in short form, which this reader does not
    /// follow), or the slot a shown existing frame shows.
    reads: u32,
    /// A shown existing frame: no tile groups follow its header.
    existing: bool,
}

const ALL_SLOTS: u32 = 0xff;

/// `uncompressed_header()` up to `ref_frame_idx`. `slots` holds the frame
/// type in each reference slot (a shown existing key frame refreshes
/// every slot).
fn frame_header(s: &Sequence, obu: &Obu<'_>, slots: &[u32; 8]) -> Option<FrameHeader> {
    let mut b = Bits::new(obu.payload);
    if s.reduced_still_picture_header {
        return Some(FrameHeader {
            refresh: ALL_SLOTS,
            frame_type: KEY_FRAME,
            shown: true,
            reads: 0,
            existing: false,
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
        let idx = b.f(3)?;
        temporal_point_info(&mut b)?;
        let frame_type = slots[idx as usize];
        return Some(FrameHeader {
            refresh: if frame_type == KEY_FRAME {
                ALL_SLOTS
            } else {
                0
            },
            frame_type,
            shown: true,
            reads: 1 << idx,
            existing: true,
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
    let header = |refresh: u32, reads: u32| FrameHeader {
        refresh,
        frame_type,
        shown: show_frame,
        reads,
        existing: false,
    };
    // A shown key frame refreshes every slot and reads none. A switch
    // frame refreshes every slot too, and its references are read as
    // every slot (it is error resilient without saying so).
    if frame_type == KEY_FRAME && show_frame {
        return Some(header(ALL_SLOTS, 0));
    }
    if frame_type == SWITCH_FRAME {
        return Some(header(ALL_SLOTS, ALL_SLOTS));
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
    let refresh = b.f(8)?;
    if intra {
        // An intra-only frame or a hidden key frame: no references (what
        // follows does not change that).
        return Some(header(refresh, 0));
    }
    if error_resilient && s.enable_order_hint {
        for _ in 0..8 {
            let _ref_order_hint = b.f(s.order_hint_bits)?;
        }
    }
    if s.enable_order_hint && b.flag()? {
        // frame_refs_short_signaling: the references are derived from the
        // slots' order hints.
        return Some(header(refresh, ALL_SLOTS));
    }
    let mut reads = 0;
    for _ in 0..7 {
        reads |= 1 << b.f(3)?;
        if s.frame_id_numbers_present {
            let _delta_frame_id_minus_1 = b.f(s.delta_frame_id_length)?;
        }
    }
    Some(header(refresh, reads))
}

/// A frame of a segment: the bytes of its OBUs (its frame header and tile
/// groups) in the segment's data, whether it is shown, and the frames it
/// depends on (earlier in the segment).
#[derive(Debug)]
struct UnitFrame {
    span: Range<usize>,
    shown: bool,
    deps: Vec<usize>,
}

/// How a read sends a temporal unit to the decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UnitUse {
    /// Not at all.
    Skip,
    /// As stored.
    Whole,
    /// With the OBUs of some frames left out: the bytes to send.
    Part(Vec<u8>),
}

/// The frames of an AV1 segment's temporal units and what each depends
/// on, as far as this reader follows them.
#[derive(Debug)]
pub(crate) struct Units {
    frames: Vec<UnitFrame>,
    /// Per unit: its frames (a range of `frames`) and whether it holds a
    /// sequence header (sent even when none of its frames is).
    units: Vec<(Range<usize>, bool)>,
    /// The first unit this reader does not follow (the count of units
    /// when it follows all), and the frames in the reference slots then.
    opaque_from: usize,
    slots_then: [Option<usize>; 8],
}

impl Units {
    /// The units of a segment (`data` cut at `packet_offsets`). The
    /// sequence header must be in the first unit; without one, or past
    /// anything this reader does not follow, units are opaque.
    pub(crate) fn parse(data: &[u8], packet_offsets: &[u64]) -> Units {
        let mut out = Units {
            frames: Vec::new(),
            units: Vec::new(),
            opaque_from: packet_offsets.len().saturating_sub(1),
            slots_then: [None; 8],
        };
        let mut seq: Option<Sequence> = None;
        let mut types = [KEY_FRAME; 8];
        let mut writers: [Option<usize>; 8] = [None; 8];
        for (j, w) in packet_offsets.windows(2).enumerate() {
            let at = usize::try_from(w[0]).ok();
            let unit = at
                .zip(usize::try_from(w[1]).ok())
                .and_then(|(a, b)| data.get(a..b))
                .and_then(|u| Some((at?, obus(u)?)));
            let first = out.frames.len();
            let before = writers;
            let followed = unit.and_then(|(at, units)| {
                let mut seq_here = false;
                let mut open = false;
                for obu in &units {
                    if obu.extension {
                        return None;
                    }
                    let span = at + obu.span.start..at + obu.span.end;
                    match obu.kind {
                        OBU_SEQUENCE_HEADER => {
                            if j != 0 || seq.is_some() {
                                return None;
                            }
                            seq = Some(sequence_header(obu.payload)?);
                            seq_here = true;
                            open = false;
                        }
                        OBU_TEMPORAL_DELIMITER | OBU_METADATA | OBU_PADDING => open = false,
                        OBU_TILE_GROUP | OBU_REDUNDANT_FRAME_HEADER if open => {
                            let f = out.frames.last_mut().expect("open after a frame header");
                            f.span.end = span.end;
                        }
                        OBU_FRAME | OBU_FRAME_HEADER => {
                            let h = frame_header(seq.as_ref()?, obu, &types)?;
                            let mut deps: Vec<usize> = (0..8)
                                .filter(|k| (h.reads >> k) & 1 == 1)
                                .map(|k| writers[k])
                                .collect::<Option<Vec<_>>>()?;
                            deps.sort_unstable();
                            deps.dedup();
                            let i = out.frames.len();
                            for k in 0..8 {
                                if (h.refresh >> k) & 1 == 1 {
                                    types[k] = h.frame_type;
                                    writers[k] = Some(i);
                                }
                            }
                            out.frames.push(UnitFrame {
                                span,
                                shown: h.shown,
                                deps,
                            });
                            open = obu.kind == OBU_FRAME_HEADER && !h.existing;
                        }
                        _ => return None,
                    }
                }
                Some(seq_here)
            });
            let Some(seq_here) = followed else {
                out.frames.truncate(first);
                writers = before;
                out.opaque_from = j;
                break;
            };
            out.units.push((first..out.frames.len(), seq_here));
        }
        out.slots_then = writers;
        out
    }

    /// The frames a read of the frames the units in `wanted` show must
    /// decode: those they show and, transitively, those these depend on
    /// (the frames in the slots before the first opaque unit when the
    /// read reaches it); with the last wanted unit.
    fn needed(&self, wanted: &[bool]) -> Option<(usize, Vec<bool>)> {
        let last = wanted.iter().rposition(|&w| w)?;
        let mut need = vec![false; self.frames.len()];
        if last >= self.opaque_from {
            for &i in self.slots_then.iter().flatten() {
                need[i] = true;
            }
        }
        for (frames, _) in self
            .units
            .iter()
            .zip(wanted)
            .filter_map(|(u, &w)| w.then_some(u))
        {
            let mut shown = frames.clone().filter(|&i| self.frames[i].shown).peekable();
            if shown.peek().is_none() {
                frames.clone().for_each(|i| need[i] = true);
            } else {
                shown.for_each(|i| need[i] = true);
            }
        }
        for i in (0..self.frames.len()).rev() {
            if need[i] {
                for &d in &self.frames[i].deps {
                    need[d] = true;
                }
            }
        }
        Some((last, need))
    }

    /// How to send each unit of the segment (`data` cut at
    /// `packet_offsets`, as parsed) for a read of the frames the units in
    /// `wanted` show: the units up to the last wanted, each with the
    /// frames [`Units::needed`] names; opaque units whole.
    pub(crate) fn plan(
        &self,
        data: &[u8],
        packet_offsets: &[u64],
        wanted: &[bool],
    ) -> Vec<UnitUse> {
        let n = packet_offsets.len().saturating_sub(1);
        let mut uses = vec![UnitUse::Skip; n];
        let Some((last, need)) = self.needed(wanted) else {
            return uses;
        };
        for u in uses.iter_mut().take(last + 1).skip(self.opaque_from) {
            *u = UnitUse::Whole;
        }
        for (j, (frames, seq_here)) in self.units.iter().enumerate().take(last + 1) {
            let kept = frames.clone().filter(|&i| need[i]).count();
            uses[j] = if kept == frames.len() && (kept > 0 || wanted[j] || *seq_here) {
                UnitUse::Whole
            } else if kept == 0 && !*seq_here {
                UnitUse::Skip
            } else {
                // The unit's bytes less the OBUs of the frames not needed.
                let (a, b) = (packet_offsets[j] as usize, packet_offsets[j + 1] as usize);
                let mut bytes = Vec::with_capacity(b - a);
                let mut at = a;
                for i in frames.clone().filter(|&i| !need[i]) {
                    let span = &self.frames[i].span;
                    bytes.extend_from_slice(&data[at..span.start]);
                    at = span.end;
                }
                bytes.extend_from_slice(&data[at..b]);
                UnitUse::Part(bytes)
            };
        }
        uses
    }

    /// The frames a read of the frames the units in `wanted` show
    /// decodes, and the units it sends whole as they are opaque.
    #[cfg(test)]
    pub(crate) fn decoded(&self, wanted: &[bool]) -> (usize, usize) {
        let Some((last, need)) = self.needed(wanted) else {
            return (0, 0);
        };
        let frames = need.iter().filter(|&&n| n).count();
        (frames, (last + 1).saturating_sub(self.opaque_from))
    }

    /// The number of frames in the units this reader follows.
    #[cfg(test)]
    pub(crate) fn frame_count(&self) -> usize {
        self.frames.len()
    }
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
    fn damaged_units_are_sent_whole() {
        // A frame OBU before any sequence header, a truncated OBU, and an
        // OBU with the forbidden bit.
        let frame_obu = [0x32, 0x01, 0x00];
        let data: Vec<u8> = [&frame_obu[..], &[0x32, 0x05, 0x00], &[0x80]].concat();
        let offsets = [0, 3, 6, 7];
        let units = Units::parse(&data, &offsets);
        assert_eq!((units.opaque_from, units.frame_count()), (0, 0));
        assert_eq!(
            units.plan(&data, &offsets, &[false, true, false]),
            vec![UnitUse::Whole, UnitUse::Whole, UnitUse::Skip]
        );
        assert_eq!(units.decoded(&[false, false, true]), (0, 3));
        let none = Units::parse(&[], &[0]);
        assert_eq!(none.plan(&[], &[0], &[]), Vec::<UnitUse>::new());
        // Offsets past the data: opaque from there.
        let units = Units::parse(&data, &[0, 3, 99]);
        assert_eq!(units.opaque_from, 0);
    }
}
