#pragma once
/// The compact form of a SampleBatch's columns: what the store keeps, and
/// what an agent sends in `SampleBatch.columns` to a coordinator whose
/// Welcome says `sample_columns`.
///
/// Steps follow one another, so a column-wise protobuf spends most of its
/// bytes on start times that the previous step already implies. The compact
/// form keeps, per step, the gap since the previous step's end, the duration
/// and the change in items, each as a zigzag varint: about 5 bytes a step
/// against about 13 for the protobuf (measured by bench/fleet ingest).
///
///   0xFF 0x01 varint(n) { zz(start - previous end) zz(duration) zz(items - previous items) } x n
///
/// 0xFF can never start a serialized SampleBatch (wire type 7 does not
/// exist), so blobs written before this form (whole protobufs) still decode.
/// The task id, attempt, seq and phase are the row's own columns.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "hetbench/v1/agent.pb.h"

namespace hetbench {

/// The columns of `batch` in the compact form: `batch.columns()` itself when
/// the agent sent them so (the coordinator's edge has decoded and checked
/// them), else encoded from the arrays.
std::string EncodeSampleColumns(const v1::SampleBatch& batch);

/// The agent's side: the batch's arrays encoded into `columns` and cleared.
void PackSampleColumns(v1::SampleBatch* batch);

/// The steps a compact blob says it holds (before decoding it), or -1 when
/// its header is not the compact form's.
int64_t SampleColumnsCount(std::string_view blob);

/// The steps `batch` carries: its arrays', or what its columns' header says
/// (0 when that is not the compact form's: the edge refuses the batch).
int64_t SampleCount(const v1::SampleBatch& batch);

/// Fills the start_ns, duration_ns and items columns of `out` from a blob in
/// the compact form, or (older stores) from a whole serialized SampleBatch.
/// Errors name what is wrong with the blob ("truncated at step 7 of 1000").
absl::Status DecodeSampleColumns(std::string_view blob, v1::SampleBatch* out);

/// The coordinator's edge: `batch.columns()` decoded into its (empty) arrays;
/// the columns stay, for the store. The arrays of a batch without columns
/// are left as they are.
absl::Status UnpackSampleColumns(v1::SampleBatch* batch);

}  // namespace hetbench
