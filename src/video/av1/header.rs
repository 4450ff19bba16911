//! The AV1 sequence header and frame headers (the specification's sections
//! 5.5 and 5.9), read as far as telling which reference slots a frame reads
//! and refreshes.

use super::obu::{Bits, Obu};

pub(super) const KEY_FRAME: u32 = 0;
const INTRA_ONLY_FRAME: u32 = 2;
const SWITCH_FRAME: u32 = 3;

/// The sequence header's fields a frame header's start depends on.
#[derive(Debug, Clone, Default)]
pub(super) struct Sequence {
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
pub(super) fn sequence_header(payload: &[u8]) -> Option<Sequence> {
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
pub(super) struct FrameHeader {
    /// The slots it refreshes.
    pub(super) refresh: u32,
    pub(super) frame_type: u32,
    /// Whether the frame is shown (a shown existing frame is).
    pub(super) shown: bool,
    /// The slots it reads, a bit each: its references (every slot when
    /// they are signalled in short form, which this reader does not
    /// follow), or the slot a shown existing frame shows.
    pub(super) reads: u32,
    /// A shown existing frame: no tile groups follow its header.
    pub(super) existing: bool,
}

const ALL_SLOTS: u32 = 0xff;

/// `uncompressed_header()` up to `ref_frame_idx`. `slots` holds the frame
/// type in each reference slot (a shown existing key frame refreshes
/// every slot).
pub(super) fn frame_header(s: &Sequence, obu: &Obu<'_>, slots: &[u32; 8]) -> Option<FrameHeader> {
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
