#include "server/store/sample_codec.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace hetbench::server {

namespace {
constexpr unsigned char kMagic = 0xFF;
constexpr unsigned char kVersion = 1;

uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

char* PutVarint(char* p, uint64_t v) {
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

bool GetVarint(const unsigned char*& p, const unsigned char* end, uint64_t* v) {
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
}  // namespace

std::string EncodeSampleColumns(const v1::SampleBatch& batch) {
  const int n = batch.duration_ns_size();
  // At most 10 bytes per varint: the header's and three per step. Written
  // into this thread's scratch (kept at its largest: 3 MB for a batch at the
  // coordinator's default limit of 100,000 steps), then copied out at its length: a
  // fresh string that size would be zeroed first.
  thread_local std::string scratch;
  const size_t most = 2 + 10 + static_cast<size_t>(n) * 30;
  if (scratch.size() < most) scratch.resize(most);
  char* const begin = scratch.data();
  char* p = begin;
  *p++ = static_cast<char>(kMagic);
  *p++ = static_cast<char>(kVersion);
  p = PutVarint(p, static_cast<uint64_t>(n));
  int64_t previous_end = 0;
  int64_t previous_items = 0;
  auto put_step = [&p, &previous_end, &previous_items](int64_t start, int64_t duration, int64_t items) {
    p = PutVarint(p, ZigZag(static_cast<int64_t>(static_cast<uint64_t>(start) - static_cast<uint64_t>(previous_end))));
    p = PutVarint(p, ZigZag(duration));
    p = PutVarint(p, ZigZag(items - previous_items));
    previous_end = static_cast<int64_t>(static_cast<uint64_t>(start) + static_cast<uint64_t>(duration));
    previous_items = items;
  };
  if (batch.start_ns_size() == n && batch.items_size() == n) {
    // The checked form (every stored batch): plain arrays.
    const int64_t* start = batch.start_ns().data();
    const int64_t* duration = batch.duration_ns().data();
    const int32_t* items = batch.items().data();
    for (int i = 0; i < n; ++i) put_step(start[i], duration[i], items[i]);
  } else {
    for (int i = 0; i < n; ++i) {
      put_step(i < batch.start_ns_size() ? batch.start_ns(i) : previous_end, batch.duration_ns(i),
               i < batch.items_size() ? batch.items(i) : previous_items);
    }
  }
  return std::string(begin, static_cast<size_t>(p - begin));
}

absl::Status DecodeSampleColumns(std::string_view blob, v1::SampleBatch* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(blob.data());
  const unsigned char* end = p + blob.size();
  if (blob.empty() || *p != kMagic) {
    v1::SampleBatch whole;
    if (!whole.ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
      return absl::DataLossError("sample batch: neither the compact form nor a SampleBatch");
    }
    out->mutable_start_ns()->Swap(whole.mutable_start_ns());
    out->mutable_duration_ns()->Swap(whole.mutable_duration_ns());
    out->mutable_items()->Swap(whole.mutable_items());
    return absl::OkStatus();
  }
  if (blob.size() < 2 || p[1] != kVersion) {
    return absl::DataLossError(absl::StrCat("sample batch: compact form version ", blob.size() < 2 ? -1 : p[1],
                                            " is not known (this build reads ", kVersion, ")"));
  }
  p += 2;
  uint64_t n = 0;
  // Each step takes at least 3 bytes: a count past that is corrupt.
  if (!GetVarint(p, end, &n) || n > static_cast<uint64_t>(end - p) / 3) {
    return absl::DataLossError("sample batch: bad step count");
  }
  out->clear_start_ns();
  out->clear_duration_ns();
  out->clear_items();
  out->mutable_start_ns()->Reserve(static_cast<int>(n));
  out->mutable_duration_ns()->Reserve(static_cast<int>(n));
  out->mutable_items()->Reserve(static_cast<int>(n));
  int64_t previous_end = 0;
  int64_t previous_items = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t gap = 0, duration = 0, items = 0;
    if (!GetVarint(p, end, &gap) || !GetVarint(p, end, &duration) || !GetVarint(p, end, &items)) {
      return absl::DataLossError(absl::StrCat("sample batch: truncated at step ", i, " of ", n));
    }
    const int64_t start =
        static_cast<int64_t>(static_cast<uint64_t>(previous_end) + static_cast<uint64_t>(UnZigZag(gap)));
    const int64_t d = UnZigZag(duration);
    previous_items += UnZigZag(items);
    out->add_start_ns(start);
    out->add_duration_ns(d);
    out->add_items(static_cast<int32_t>(previous_items));
    previous_end = static_cast<int64_t>(static_cast<uint64_t>(start) + static_cast<uint64_t>(d));
  }
  if (p != end) return absl::DataLossError("sample batch: bytes after the last step");
  return absl::OkStatus();
}

}  // namespace hetbench::server
