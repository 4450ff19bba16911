//! Row iteration of a [`Dataset`]: decoded rows in view order, the stored
//! batches of an identity view decoded one after another, other views read
//! 1,024 positions at a time.

use super::Dataset;
use crate::error::Result;
use crate::layouts::backend::IterOptions;
use crate::value::Row;

/// Iterator of decoded rows (see [`Dataset::iter`]).
pub struct RowIter<'a> {
    ds: &'a Dataset,
    pos: u64,
    buf: std::collections::VecDeque<Row>,
    batches: Option<crate::layouts::backend::BatchIter<'a>>,
    failed: bool,
}

impl<'a> RowIter<'a> {
    pub(super) fn new(ds: &'a Dataset) -> Self {
        RowIter {
            ds,
            pos: 0,
            buf: std::collections::VecDeque::new(),
            batches: None,
            failed: false,
        }
    }
}

impl Iterator for RowIter<'_> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        if let Some(r) = self.buf.pop_front() {
            return Some(Ok(r));
        }
        if self.failed {
            return None;
        }
        let fill: Result<Vec<Row>> = if self.ds.is_identity() {
            if self.batches.is_none() {
                match self.ds.backend.iter_batches(&IterOptions::default()) {
                    Ok(it) => self.batches = Some(it),
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                }
            }
            match self.batches.as_mut().and_then(Iterator::next) {
                None => return None,
                Some(b) => b.and_then(|b| self.ds.decoder.decode_batch(&b)),
            }
        } else {
            let n = self.ds.len();
            if self.pos >= n {
                return None;
            }
            let e = (self.pos + 1024).min(n);
            let pos: Vec<u64> = (self.pos..e).collect();
            self.pos = e;
            self.ds.take_positions(&pos)
        };
        match fill {
            Ok(rows) => {
                self.buf.extend(rows);
                self.next()
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
