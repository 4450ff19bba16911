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

mod header;
mod obu;

use std::ops::Range;

use header::{frame_header, sequence_header, Sequence, KEY_FRAME};
use obu::{
    obus, OBU_FRAME, OBU_FRAME_HEADER, OBU_METADATA, OBU_PADDING, OBU_REDUNDANT_FRAME_HEADER,
    OBU_SEQUENCE_HEADER, OBU_TEMPORAL_DELIMITER, OBU_TILE_GROUP,
};

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
