//! The checks made before a compressed section is inflated: its header's size is
//! believed only within what real compressors can reach.

/// Why a compressed section is not inflated.
#[derive(Debug, thiserror::Error)]
pub enum InflateError {
    /// The section's compression header could not be read.
    #[error("{0}")]
    Header(#[from] object::read::Error),
    /// The header claims more than the compressed bytes can inflate to.
    #[error(
        "compressed section says it inflates to {uncompressed} bytes from {compressed} \
         (at most {limit} accepted)"
    )]
    TooLarge {
        /// The section's bytes in the file.
        compressed: u64,
        /// What its header says they inflate to.
        uncompressed: u64,
        /// The most accepted for that many compressed bytes.
        limit: u64,
    },
}

/// The most bytes a compressed section of a target file may say it holds once
/// inflated: far above real debug info (a large Rust binary's `.debug_info` is a few
/// hundred MiB), far below what would exhaust the machine.
pub const MAX_INFLATED_SECTION: u64 = 2 << 30;

/// The most a compressed section may inflate relative to its compressed size: zlib and
/// zstd cannot exceed about 1,032:1 on real data, so more is a lie in the header.
const MAX_INFLATE_RATIO: u64 = 1100;

/// Checks a section's declared size before it is inflated, so that a crafted header
/// cannot make `profile` allocate terabytes (found by fuzzing the unwinder).
pub fn check_inflated_size<'d>(
    section: &impl object::ObjectSection<'d>,
) -> Result<(), InflateError> {
    let range = section.compressed_file_range()?;
    if range.format == object::CompressionFormat::None {
        return Ok(());
    }
    inflated_size_ok(range.compressed_size, range.uncompressed_size)
}

/// [`check_inflated_size`] for a section of `compressed` bytes whose header says it
/// inflates to `uncompressed`.
pub fn inflated_size_ok(compressed: u64, uncompressed: u64) -> Result<(), InflateError> {
    let limit = compressed
        .saturating_mul(MAX_INFLATE_RATIO)
        .clamp(64 << 10, MAX_INFLATED_SECTION);
    if uncompressed > limit {
        return Err(InflateError::TooLarge {
            compressed,
            uncompressed,
            limit,
        });
    }
    Ok(())
}
