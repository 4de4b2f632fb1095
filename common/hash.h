#pragma once
/// FNV-1a, the one content hash of fingerprints (data files, initial weights,
/// TorchScript files, circuit descriptions). Not cryptographic: it tells
/// results apart, it does not authenticate them.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hetbench {

inline constexpr uint64_t kFnv1aOffset = 14695981039346656037ULL;

/// Continues hash `h` over n bytes at p.
inline uint64_t Fnv1a(uint64_t h, const void* p, size_t n) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= bytes[i];
    h *= 1099511628211ULL;
  }
  return h;
}

inline uint64_t Fnv1a(std::string_view s) { return Fnv1a(kFnv1aOffset, s.data(), s.size()); }

}  // namespace hetbench
