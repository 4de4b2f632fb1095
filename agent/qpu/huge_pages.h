#pragma once
/// An allocator that asks the kernel for transparent huge pages (2 MiB) for
/// large blocks: a state vector is swept whole by every pass, and on 4 KiB
/// pages each sweep walks the page tables every 4 KiB of each stream it
/// reads. Debian's kernels hand out huge pages only where a program asks
/// (/sys/kernel/mm/transparent_hugepage/enabled = madvise); with "never"
/// the advice is ignored and the block is ordinary memory. Measured in
/// docs/devices.md ("Huge pages").

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

namespace hetbench::agent::qpu {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: converting, as std::allocator's

  static constexpr std::align_val_t kSmallAlignment{alignof(T) < 64 ? 64 : alignof(T)};  // a cache line

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePageBytes) return static_cast<T*>(::operator new(bytes, kSmallAlignment));
    // Whole huge pages, aligned to one, then the advice (a hint: no error if refused).
    const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    void* p = std::aligned_alloc(kHugePageBytes, rounded);
    if (p == nullptr) throw std::bad_alloc();
    (void)madvise(p, rounded, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugePageBytes) {
      ::operator delete(p, kSmallAlignment);
    } else {
      std::free(p);
    }
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const {
    return false;
  }
};

/// What the kernel does with the advice: the bracketed word of
/// /sys/kernel/mm/transparent_hugepage/enabled ("always", "madvise",
/// "never"), or "unknown".
inline std::string TransparentHugePagesMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('['), close = line.find(']');
  return open != std::string::npos && close > open ? line.substr(open + 1, close - open - 1) : "unknown";
}

}  // namespace hetbench::agent::qpu
