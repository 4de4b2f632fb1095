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

/// The same without copying what the agent sent: a view of `batch.columns()`
/// when it has them, else of `*encoded`, which it fills from the arrays. The
/// view lives as long as the batch and `*encoded`, unmoved.
std::string_view SampleColumnsView(const v1::SampleBatch& batch, std::string* encoded);

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

namespace sample_codec_detail {
/// The header: the step count (each step takes at least 3 bytes, so a count
/// past a third of the bytes left is refused) and where the steps start.
absl::Status Header(std::string_view blob, uint64_t* n, const unsigned char** steps);
/// "`what` at step i of n", or (what == nullptr) "bytes after the last step".
absl::Status StepError(const char* what, uint64_t i, uint64_t n);

inline int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// A varint of at most 10 bytes; false when it runs past `end` or is longer.
inline bool GetVarint(const unsigned char*& p, const unsigned char* end, uint64_t* v) {
  // The common case, one byte, first; then the loop.
  if (p < end && *p < 0x80) {
    *v = *p++;
    return true;
  }
  uint64_t out = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const unsigned char b = *p++;
    out |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) {
      *v = out;
      return true;
    }
  }
  return false;
}

// A varint where at least 10 bytes remain: no bound check per byte. False
// when it runs past 10 bytes.
inline bool GetVarintUnchecked(const unsigned char*& p, uint64_t* v) {
  // A step's values mostly take one to three bytes: those unrolled.
  uint64_t b = p[0];
  if (b < 0x80) {
    *v = b;
    p += 1;
    return true;
  }
  uint64_t out = b & 0x7F;
  b = p[1];
  out |= (b & 0x7F) << 7;
  if (b < 0x80) {
    *v = out;
    p += 2;
    return true;
  }
  b = p[2];
  out |= (b & 0x7F) << 14;
  if (b < 0x80) {
    *v = out;
    p += 3;
    return true;
  }
  for (int i = 3; i < 10; ++i) {
    b = p[i];
    out |= (b & 0x7F) << (7 * i);
    if (b < 0x80) {
      *v = out;
      p += i + 1;
      return true;
    }
  }
  return false;
}
}  // namespace sample_codec_detail

/// Calls `step(start_ns, duration_ns, items)` for each step of a blob in the
/// compact form, in order, in one pass: a reader that keeps only some of the
/// values (the coordinator's edge keeps the durations, and sums the rest as
/// it goes) need not fill arrays first. The steps before an error have been
/// visited; errors name the step ("truncated at step 7 of 1000").
template <typename Step>
absl::Status ForEachSampleStep(std::string_view blob, Step&& step) {
  using namespace sample_codec_detail;  // NOLINT: the decoder's own helpers
  uint64_t n = 0;
  const unsigned char* p = nullptr;
  if (absl::Status s = Header(blob, &n, &p); !s.ok()) return s;
  const auto* end = reinterpret_cast<const unsigned char*>(blob.data()) + blob.size();
  int64_t previous_end = 0;
  int64_t items = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t gap = 0, d = 0, di = 0;
    // A step takes at most 30 bytes: while that many remain, no bound checks.
    const bool ok = end - p >= 30
                        ? GetVarintUnchecked(p, &gap) && GetVarintUnchecked(p, &d) && GetVarintUnchecked(p, &di)
                        : GetVarint(p, end, &gap) && GetVarint(p, end, &d) && GetVarint(p, end, &di);
    if (!ok) return StepError("truncated", i, n);
    const auto start = static_cast<int64_t>(static_cast<uint64_t>(previous_end) + static_cast<uint64_t>(UnZigZag(gap)));
    const int64_t duration = UnZigZag(d);
    items += UnZigZag(di);
    if (items != static_cast<int32_t>(items)) return StepError("items out of range", i, n);
    step(start, duration, static_cast<int32_t>(items));
    previous_end = static_cast<int64_t>(static_cast<uint64_t>(start) + static_cast<uint64_t>(duration));
  }
  if (p != end) return StepError(nullptr, n, n);
  return absl::OkStatus();
}

}  // namespace hetbench
