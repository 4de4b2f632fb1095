#include "common/sample_codec.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hetbench {

namespace {
constexpr unsigned char kMagic = 0xFF;
constexpr unsigned char kVersion = 1;

uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

inline char* PutVarint(char* p, uint64_t v) {
  // Most values of a step fit one to three bytes: those without a loop.
  if (v < (uint64_t{1} << 7)) {
    *p++ = static_cast<char>(v);
    return p;
  }
  if (v < (uint64_t{1} << 21)) {
    *p++ = static_cast<char>(v | 0x80);
    if (v < (uint64_t{1} << 14)) {
      *p++ = static_cast<char>(v >> 7);
      return p;
    }
    *p++ = static_cast<char>((v >> 7) | 0x80);
    *p++ = static_cast<char>(v >> 14);
    return p;
  }
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

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

// Encodes n steps at `p` (room for 30 bytes a step); returns the end.
char* PutSteps(char* p, const int64_t* start, const int64_t* duration, const int32_t* items, int n) {
  int64_t previous_end = 0;
  int64_t previous_items = 0;
  for (int i = 0; i < n; ++i) {
    p = PutVarint(p, ZigZag(static_cast<int64_t>(static_cast<uint64_t>(start[i]) - static_cast<uint64_t>(previous_end))));
    p = PutVarint(p, ZigZag(duration[i]));
    p = PutVarint(p, ZigZag(static_cast<int64_t>(items[i]) - previous_items));
    previous_end = static_cast<int64_t>(static_cast<uint64_t>(start[i]) + static_cast<uint64_t>(duration[i]));
    previous_items = items[i];
  }
  return p;
}

// The compact form of n steps, written into this thread's scratch (kept at
// its largest: 3 MB for a batch at the coordinator's default limit of
// 100,000 steps) and copied out at its length: a fresh string of the most
// it may take would be zeroed first.
std::string Encode(const int64_t* start, const int64_t* duration, const int32_t* items, int n) {
  thread_local std::string scratch;
  const size_t most = 2 + 10 + static_cast<size_t>(n) * 30;
  if (scratch.size() < most) scratch.resize(most);
  char* const begin = scratch.data();
  char* p = begin;
  *p++ = static_cast<char>(kMagic);
  *p++ = static_cast<char>(kVersion);
  p = PutVarint(p, static_cast<uint64_t>(n));
  p = PutSteps(p, start, duration, items, n);
  return std::string(begin, static_cast<size_t>(p - begin));
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

// After the header: n steps into the three arrays (room for n each).
absl::Status GetSteps(const unsigned char* p, const unsigned char* end, uint64_t n, int64_t* start, int64_t* duration,
                      int32_t* items) {
  int64_t previous_end = 0;
  int64_t previous_items = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t gap = 0, d = 0, di = 0;
    // A step takes at most 30 bytes: while that many remain, no bound checks.
    const bool ok = end - p >= 30 ? GetVarintUnchecked(p, &gap) && GetVarintUnchecked(p, &d) &&
                                        GetVarintUnchecked(p, &di)
                                  : GetVarint(p, end, &gap) && GetVarint(p, end, &d) && GetVarint(p, end, &di);
    if (!ok) return absl::DataLossError(absl::StrCat("truncated at step ", i, " of ", n));
    start[i] = static_cast<int64_t>(static_cast<uint64_t>(previous_end) + static_cast<uint64_t>(UnZigZag(gap)));
    duration[i] = UnZigZag(d);
    previous_items += UnZigZag(di);
    if (previous_items != static_cast<int32_t>(previous_items)) {
      return absl::DataLossError(absl::StrCat("items at step ", i, " out of range"));
    }
    items[i] = static_cast<int32_t>(previous_items);
    previous_end = static_cast<int64_t>(static_cast<uint64_t>(start[i]) + static_cast<uint64_t>(duration[i]));
  }
  if (p != end) return absl::DataLossError("bytes after the last step");
  return absl::OkStatus();
}

// The header: the step count, checked against the bytes left (each step
// takes at least 3), and where the steps start.
absl::Status GetHeader(std::string_view blob, uint64_t* n, const unsigned char** steps) {
  const auto* p = reinterpret_cast<const unsigned char*>(blob.data());
  const unsigned char* end = p + blob.size();
  if (blob.size() < 2 || p[1] != kVersion) {
    return absl::DataLossError(absl::StrCat("compact form version ", blob.size() < 2 ? -1 : p[1],
                                            " is not known (this build reads ", kVersion, ")"));
  }
  p += 2;
  if (!GetVarint(p, end, n) || *n > static_cast<uint64_t>(end - p) / 3) return absl::DataLossError("bad step count");
  *steps = p;
  return absl::OkStatus();
}

// The three arrays of `out` set to n steps decoded from the compact form.
absl::Status DecodeCompact(std::string_view blob, v1::SampleBatch* out) {
  uint64_t n = 0;
  const unsigned char* steps = nullptr;
  if (absl::Status s = GetHeader(blob, &n, &steps); !s.ok()) return s;
  const int count = static_cast<int>(n);  // at most a third of the blob's bytes
  out->clear_start_ns();
  out->clear_duration_ns();
  out->clear_items();
  out->mutable_start_ns()->Reserve(count);
  out->mutable_duration_ns()->Reserve(count);
  out->mutable_items()->Reserve(count);
  int64_t* start = out->mutable_start_ns()->AddNAlreadyReserved(count);
  int64_t* duration = out->mutable_duration_ns()->AddNAlreadyReserved(count);
  int32_t* items = out->mutable_items()->AddNAlreadyReserved(count);
  const auto* end = reinterpret_cast<const unsigned char*>(blob.data()) + blob.size();
  absl::Status s = GetSteps(steps, end, n, start, duration, items);
  if (!s.ok()) {
    out->clear_start_ns();
    out->clear_duration_ns();
    out->clear_items();
  }
  return s;
}
}  // namespace

std::string EncodeSampleColumns(const v1::SampleBatch& batch) {
  if (!batch.columns().empty()) return batch.columns();
  const int n = batch.duration_ns_size();
  if (batch.start_ns_size() == n && batch.items_size() == n) {
    // The checked form (every stored batch): plain arrays.
    return Encode(batch.start_ns().data(), batch.duration_ns().data(), batch.items().data(), n);
  }
  // Short columns (never stored: the edge refuses them) padded as the steps imply.
  std::vector<int64_t> start(n), duration(batch.duration_ns().begin(), batch.duration_ns().end());
  std::vector<int32_t> items(n);
  int64_t previous_end = 0;
  int32_t previous_items = 0;
  for (int i = 0; i < n; ++i) {
    start[i] = i < batch.start_ns_size() ? batch.start_ns(i) : previous_end;
    items[i] = i < batch.items_size() ? batch.items(i) : previous_items;
    previous_end = start[i] + duration[i];
    previous_items = items[i];
  }
  return Encode(start.data(), duration.data(), items.data(), n);
}

void PackSampleColumns(v1::SampleBatch* batch) {
  batch->set_columns(EncodeSampleColumns(*batch));
  batch->clear_start_ns();
  batch->clear_duration_ns();
  batch->clear_items();
}

int64_t SampleColumnsCount(std::string_view blob) {
  if (blob.empty() || static_cast<unsigned char>(blob[0]) != kMagic) return -1;
  uint64_t n = 0;
  const unsigned char* steps = nullptr;
  if (!GetHeader(blob, &n, &steps).ok()) return -1;
  return static_cast<int64_t>(n);
}

int64_t SampleCount(const v1::SampleBatch& batch) {
  if (batch.columns().empty()) return batch.duration_ns_size();
  return std::max<int64_t>(0, SampleColumnsCount(batch.columns()));
}

absl::Status DecodeSampleColumns(std::string_view blob, v1::SampleBatch* out) {
  if (blob.empty() || static_cast<unsigned char>(blob[0]) != kMagic) {
    v1::SampleBatch whole;
    if (!whole.ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
      return absl::DataLossError("sample batch: neither the compact form nor a SampleBatch");
    }
    out->mutable_start_ns()->Swap(whole.mutable_start_ns());
    out->mutable_duration_ns()->Swap(whole.mutable_duration_ns());
    out->mutable_items()->Swap(whole.mutable_items());
    return absl::OkStatus();
  }
  absl::Status s = DecodeCompact(blob, out);
  if (!s.ok()) return absl::DataLossError(absl::StrCat("sample batch: ", s.message()));
  return s;
}

absl::Status UnpackSampleColumns(v1::SampleBatch* batch) {
  if (batch->columns().empty()) return absl::OkStatus();
  if (static_cast<unsigned char>(batch->columns()[0]) != kMagic) {
    return absl::InvalidArgumentError("not the compact form (it starts with 0xFF 0x01)");
  }
  absl::Status s = DecodeCompact(batch->columns(), batch);
  if (!s.ok()) return absl::InvalidArgumentError(s.message());
  return s;
}

}  // namespace hetbench
