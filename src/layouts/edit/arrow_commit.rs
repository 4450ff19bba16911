//! The `arrow-shards` side of a commit: touched shards written anew as
//! `shard-NNNNN.v<version>.arrow`, appended rows rotated into new shards,
//! the untouched ones kept as the very same files, then the new version's
//! metadata and the commit point.

use std::path::Path;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::cache::metadata::{
    write_json_checksummed, ArrowShardsMetadata, CacheMetadata, WriterInfo, METADATA_FILE,
};
use crate::cache::pipeline::DEFAULT_BATCH_SIZE;
use crate::cache::rowsum;
use crate::cache::versions::{version_path, ChangeSummary};
use crate::error::{Error, Result};
use crate::layouts::arrow_shards::format::ShardRecord;
use crate::layouts::arrow_shards::shard_writer::ShardWriter;
use crate::util::fault_point;

use super::gc::remove_version_files;
use super::{edited_shard_filename, EditPlan, Staging};

impl Staging {
    fn writer(
        &self,
        meta: &ArrowShardsMetadata,
        budget: Option<u64>,
        version: u64,
        first: usize,
    ) -> Result<ShardWriter> {
        let build_id = meta
            .build_id
            .clone()
            .unwrap_or_else(crate::layouts::arrow_shards::write::random_build_id);
        Ok(ShardWriter::new(
            self.storage.clone(),
            &self.dir,
            self.schema.clone(),
            batch_size(meta),
            budget,
            meta.compression,
            build_id,
        )?
        .with_record_checksums(meta.row_checksums == Some(true))
        .with_naming(move |k| edited_shard_filename(first + k, version)))
    }

    pub(super) fn commit_arrow(
        &self,
        m: &ArrowShardsMetadata,
        plan: &EditPlan,
        mut change: ChangeSummary,
    ) -> Result<(CacheMetadata, ChangeSummary)> {
        let storage = self.storage.as_ref();
        let dir = &self.dir;
        let version = plan.version;
        // 1. Left-overs of a commit of this version that never reached its
        //    commit point: named by no kept version, so never read.
        remove_version_files(storage, dir, version)?;
        // 2. The parent stays openable by its id.
        self.keep_parent(&storage.read(&dir.join(METADATA_FILE))?)?;
        fault_point("edit:after-base-version");
        // 3. Touched shards anew, untouched ones as they are, appended rows last.
        let mut records: Vec<ShardRecord> = Vec::new();
        let kept = |s: usize| ShardRecord {
            filename: m.shard_filenames[s].clone(),
            num_rows: m.shard_row_counts[s],
            num_bytes: m.shard_num_bytes.as_ref().map_or(0, |v| v[s]),
            xxh64: m
                .shard_xxh64
                .as_ref()
                .map_or_else(String::new, |v| v[s].clone()),
            refs: 0,
        };
        for s in 0..m.shard_filenames.len() {
            if plan.reused.contains(&s) {
                records.push(kept(s));
            } else if plan.rewritten.contains(&s) {
                let mut w = self.writer(m, None, version, records.len())?;
                let mut chunks = Rechunk::new(batch_size(m), self.schema.clone(), dir);
                self.edited_rows(s, |piece| chunks.push(piece, &mut w))?;
                chunks.finish(&mut w)?;
                let written = w.finish()?;
                change.bytes_written += written.iter().map(|r| r.num_bytes).sum::<u64>();
                records.extend(written);
                fault_point("edit:after-rewritten-shard");
            }
        }
        if !self.appended.is_empty() {
            let mut w = self.writer(m, m.shard_size_target_bytes, version, records.len())?;
            let mut chunks = Rechunk::new(batch_size(m), self.schema.clone(), dir);
            for b in &self.appended {
                chunks.push(b.clone(), &mut w)?;
            }
            chunks.finish(&mut w)?;
            let written = w.finish()?;
            change.shards_new = written.len() as u64;
            change.bytes_written += written.iter().map(|r| r.num_bytes).sum::<u64>();
            records.extend(written);
        }
        storage.sync_dir(dir)?;
        if m.row_checksums == Some(true) {
            storage.sync_dir(&dir.join(rowsum::ROW_SUMS_DIR))?;
        }
        fault_point("edit:after-shards");
        // 4. The new version's metadata, kept by id.
        let mut meta = m.clone();
        meta.num_rows = records.iter().map(|r| r.num_rows).sum();
        meta.num_shards = records.len() as u64;
        meta.shard_row_counts = records.iter().map(|r| r.num_rows).collect();
        meta.shard_filenames = records.iter().map(|r| r.filename.clone()).collect();
        if meta.shard_num_bytes.is_some() {
            meta.shard_num_bytes = Some(records.iter().map(|r| r.num_bytes).collect());
        }
        if meta.shard_xxh64.is_some() {
            meta.shard_xxh64 = Some(records.iter().map(|r| r.xxh64.clone()).collect());
        }
        meta.writer = Some(WriterInfo::current());
        meta.version = Some(self.version_info(&change));
        meta.metadata_xxh64 = None;
        write_json_checksummed(storage, &version_path(dir, version), &meta)?;
        fault_point("edit:after-version-file");
        // 5. The commit point.
        write_json_checksummed(storage, &dir.join(METADATA_FILE), &meta)?;
        fault_point("edit:after-commit");
        Ok((CacheMetadata::ArrowShards(meta), change))
    }
}

fn batch_size(meta: &ArrowShardsMetadata) -> usize {
    meta.batch_size
        .and_then(|b| usize::try_from(b).ok())
        .filter(|&b| b > 0)
        .unwrap_or(DEFAULT_BATCH_SIZE.get())
}

/// Gathers row pieces into record batches of exactly `size` rows (the last
/// one shorter), as the writer's rotation rule expects.
struct Rechunk<'a> {
    size: usize,
    schema: SchemaRef,
    dir: &'a Path,
    pending: Vec<RecordBatch>,
    rows: usize,
}

impl<'a> Rechunk<'a> {
    fn new(size: usize, schema: SchemaRef, dir: &'a Path) -> Self {
        Rechunk {
            size,
            schema,
            dir,
            pending: Vec::new(),
            rows: 0,
        }
    }

    fn push(&mut self, mut b: RecordBatch, out: &mut ShardWriter) -> Result<()> {
        while self.rows + b.num_rows() >= self.size {
            let take = self.size - self.rows;
            self.pending.push(b.slice(0, take));
            b = b.slice(take, b.num_rows() - take);
            self.rows = self.size;
            self.flush(out)?;
        }
        if b.num_rows() > 0 {
            self.rows += b.num_rows();
            self.pending.push(b);
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut ShardWriter) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let pieces: Vec<RecordBatch> = self
            .pending
            .drain(..)
            .map(|p| RecordBatch::try_new(self.schema.clone(), p.columns().to_vec()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::arrow(Some(self.dir), e))?;
        let batch = arrow_select::concat::concat_batches(&self.schema, &pieces)
            .map_err(|e| Error::arrow(Some(self.dir), e))?;
        self.rows = 0;
        out.write(&batch)
    }

    fn finish(mut self, out: &mut ShardWriter) -> Result<()> {
        self.flush(out)
    }
}
