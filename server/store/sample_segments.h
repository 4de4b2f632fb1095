#pragma once
/// The bytes of the SQLite store's sample batches, outside the database
/// (internal to server/store): append-only segment files in a directory
/// beside it (`<db>.samples/000001.seg`, ...). A batch's row in
/// `sample_batches` names its segment, offset and length; the bytes are
/// written once, here, instead of into the WAL and again into the database
/// file by the checkpoint.
///
/// Order that keeps a commit whole: a write transaction stages the bytes of
/// the rows it inserted, Flush writes them at the segment's committed length
/// and makes them durable (fdatasync), and only then does the transaction
/// that references them, and raises that length, commit. A crash before the
/// commit leaves bytes past the committed length, which the next transaction
/// overwrites. One object per connection (not thread-safe); SQLite's write
/// lock orders the connections' appends.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hetbench::server {

class SampleSegments {
 public:
  /// A segment takes appends until it holds this much; then the next one starts.
  static constexpr int64_t kSegmentBytes = int64_t{1} << 30;

  /// `dir` is created by the primary connection (CreateDirectory).
  explicit SampleSegments(std::string dir) : dir_(std::move(dir)) {}
  ~SampleSegments();
  SampleSegments(const SampleSegments&) = delete;
  SampleSegments& operator=(const SampleSegments&) = delete;

  /// The directory, made if missing (and its parent's entry made durable).
  absl::Status CreateDirectory() const;

  /// A write transaction's bytes will go to `offset` of segment `id`.
  void StartAt(int64_t id, int64_t offset);
  /// Whether StartAt was called since the last Flush or Discard.
  bool started() const { return segment_ != 0; }
  int64_t segment() const { return segment_; }
  /// Where the next staged byte goes in the segment (the segment's length once flushed).
  int64_t end() const { return offset_ + staged_bytes(); }
  /// Appends `bytes` to what the open transaction will write.
  void Stage(std::string_view bytes);
  int64_t staged_bytes() const { return static_cast<int64_t>(staged_end_ - lead_); }
  /// Writes the staged bytes where StartAt said (the segment created if new)
  /// and makes them durable; the staged bytes are dropped either way.
  /// A write of at least kDirectBytes goes past the page cache (O_DIRECT) from
  /// its first block boundary on, where the file system allows it.
  absl::Status Flush();
  /// Drops the staged bytes (a transaction rolled back, or they were written).
  void Discard() {
    staged_end_ = lead_ = 0;
    segment_ = 0;
  }

  /// `bytes` bytes at `offset` of segment `id`.
  absl::StatusOr<std::string> Read(int64_t id, int64_t offset, int64_t bytes);
  /// Frees the disk blocks of a deleted batch (best effort: a file system
  /// without hole punching keeps them).
  void Release(int64_t id, int64_t offset, int64_t bytes);
  /// DATA_LOSS unless segment `id` holds at least `bytes` bytes.
  absl::Status CheckLength(int64_t id, int64_t bytes);

 private:
  std::string PathOf(int64_t id) const;
  // Direct writes: their file offset, buffer address and length are
  // multiples of this (the largest logical block size in use).
  static constexpr size_t kBlock = 4096;
  static constexpr size_t kDirectBytes = size_t{64} << 10;

  absl::StatusOr<int> Fd(int64_t id, bool create);
  /// Segment `id` opened with O_DIRECT, or -1 where the file system refuses it.
  int DirectFd(int64_t id);
  absl::Status WriteStaged();
  /// pwrite until all of it is written; `err`, when given, gets the errno of a failure.
  absl::Status WriteAll(int fd, const char* data, size_t n, int64_t offset, int64_t id, int* err = nullptr);
  void Reserve(size_t bytes);

  std::string dir_;
  std::map<int64_t, int> fds_;
  std::map<int64_t, int> direct_fds_;
  bool direct_refused_ = false;
  // The staged bytes, at the file's alignment: file offset `offset_` is
  // buffer byte `lead_` (offset_ % kBlock), so from the first block boundary
  // on, buffer and file are aligned alike.
  struct FreeDeleter {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, FreeDeleter> buffer_;
  size_t capacity_ = 0;
  size_t lead_ = 0;
  size_t staged_end_ = 0;
  int64_t segment_ = 0;  // 0: not started
  int64_t offset_ = 0;
};

}  // namespace hetbench::server
