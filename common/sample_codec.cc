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

// The three arrays of `out` set to n steps decoded from the compact form.
absl::Status DecodeCompact(std::string_view blob, v1::SampleBatch* out) {
  out->clear_start_ns();
  out->clear_duration_ns();
  out->clear_items();
  uint64_t n = 0;
  const unsigned char* steps = nullptr;
  if (absl::Status s = sample_codec_detail::Header(blob, &n, &steps); !s.ok()) return s;
  const int count = static_cast<int>(n);  // at most a third of the blob's bytes
  out->mutable_start_ns()->Reserve(count);
  out->mutable_duration_ns()->Reserve(count);
  out->mutable_items()->Reserve(count);
  int64_t* start = out->mutable_start_ns()->AddNAlreadyReserved(count);
  int64_t* duration = out->mutable_duration_ns()->AddNAlreadyReserved(count);
  int32_t* items = out->mutable_items()->AddNAlreadyReserved(count);
  absl::Status s = ForEachSampleStep(blob, [&](int64_t st, int64_t d, int32_t it) {
    *start++ = st;
    *duration++ = d;
    *items++ = it;
  });
  if (!s.ok()) {
    out->clear_start_ns();
    out->clear_duration_ns();
    out->clear_items();
  }
  return s;
}
}  // namespace

namespace sample_codec_detail {

absl::Status Header(std::string_view blob, uint64_t* n, const unsigned char** steps) {
  const auto* p = reinterpret_cast<const unsigned char*>(blob.data());
  const unsigned char* end = p + blob.size();
  if (blob.empty() || p[0] != kMagic) return absl::DataLossError("not the compact form (it starts with 0xFF 0x01)");
  if (blob.size() < 2 || p[1] != kVersion) {
    return absl::DataLossError(absl::StrCat("compact form version ", blob.size() < 2 ? -1 : p[1],
                                            " is not known (this build reads ", kVersion, ")"));
  }
  p += 2;
  // Each step takes at least 3 bytes: a count past that is not this form.
  if (!GetVarint(p, end, n) || *n > static_cast<uint64_t>(end - p) / 3) return absl::DataLossError("bad step count");
  *steps = p;
  return absl::OkStatus();
}

absl::Status StepError(const char* what, uint64_t i, uint64_t n) {
  if (what == nullptr) return absl::DataLossError("bytes after the last step");
  return absl::DataLossError(absl::StrCat(what, " at step ", i, " of ", n));
}

}  // namespace sample_codec_detail

namespace {

// The arrays of `batch` in the compact form.
std::string EncodeArrays(const v1::SampleBatch& batch) {
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

}  // namespace

std::string_view SampleColumnsView(const v1::SampleBatch& batch, std::string* encoded) {
  if (!batch.columns().empty()) return batch.columns();
  *encoded = EncodeArrays(batch);
  return *encoded;
}

std::string EncodeSampleColumns(const v1::SampleBatch& batch) {
  std::string encoded;
  const std::string_view view = SampleColumnsView(batch, &encoded);
  if (encoded.empty()) return std::string(view);  // the agent's columns: a copy
  return encoded;
}

void PackSampleColumns(v1::SampleBatch* batch) {
  batch->set_columns(EncodeSampleColumns(*batch));
  batch->clear_start_ns();
  batch->clear_duration_ns();
  batch->clear_items();
}

int64_t SampleColumnsCount(std::string_view blob) {
  uint64_t n = 0;
  const unsigned char* steps = nullptr;
  if (!sample_codec_detail::Header(blob, &n, &steps).ok()) return -1;
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

}  // namespace hetbench
