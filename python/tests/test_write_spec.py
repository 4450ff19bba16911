"""The write spec from Python: each write option of the library's one table,
on each layout, is applied where the table says and refused by name
elsewhere, before any example is read (the same check as the CLI's and
Rust's)."""

import pytest

import shardset
from shardset import _shardset

LAYOUTS = ("arrow", "lance", "video-frames")

# A valid value of each option (the table's names; a new option fails here
# until it has one).
SAMPLES = {
    "shard_size": "64MB", "compression": "zstd", "compression_level": 3, "threads": 2,
    "batch_size": 2, "png_level": 6, "build_id": "b1", "record_checksums": True,
    "dedup": 4096, "max_rows_per_file": 2, "webp_quality": 80.0, "webp_method": 6,
    "webp_input": "yuv", "resize": 2, "resize_mode": "shorter_side", "skip_corrupt": True,
    "buffer": 4096, "checkpoint_frames": 100, "segments": {"codec": "h264", "crf": 30},
    "scalar_index": ["x"],
}


def _examples_never_read():
    raise AssertionError("an example was read before the options were checked")
    yield  # pragma: no cover


@pytest.mark.parametrize("name,layouts", [(n, ls) for n, ls, _ in _shardset.write_options()])
def test_each_option_on_each_layout_is_applied_or_refused_by_name(tmp_path, name, layouts):
    value = SAMPLES[name]
    for layout in LAYOUTS:
        given = {name: value}
        if name == "compression_level":
            given["compression"] = "zstd"
        if layout in layouts:
            _shardset._check_write_options(layout, __import__("json").dumps(given))
        else:
            with pytest.raises(shardset.BadInputError, match=f"'{name}' applies to layout"):
                shardset.write_cache(_examples_never_read(), {"x": shardset.Value("int64")},
                                     tmp_path / layout, format=layout, **given)
            assert not (tmp_path / layout).exists()
