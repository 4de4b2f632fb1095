#pragma once
/// The stored form of a SampleBatch's columns, shared by every JobStore.
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

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "hetbench/v1/agent.pb.h"

namespace hetbench::server {

/// The columns of `batch` in the compact form.
std::string EncodeSampleColumns(const v1::SampleBatch& batch);

/// Fills the start_ns, duration_ns and items columns of `out` from a blob in
/// the compact form, or (older stores) from a whole serialized SampleBatch.
absl::Status DecodeSampleColumns(std::string_view blob, v1::SampleBatch* out);

}  // namespace hetbench::server
