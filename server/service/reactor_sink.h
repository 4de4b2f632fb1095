#pragma once
/// The outbound half of the coordinator's server streams (ReactorSink) and
/// the RPC timer every call records itself with; a header of their own so the
/// send queue's bounds are unit-tested with a fake reactor.

#include <grpcpp/support/status.h>

#include <chrono>
#include <deque>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/metrics.h"
#include "server/service/coordinator.h"

namespace hetbench::server {

/// "RESOURCE_EXHAUSTED" for the code (gRPC's codes are Abseil's, number for
/// number); "UNKNOWN" for a number neither knows.
inline std::string CodeName(grpc::StatusCode code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN" : name;
}

/// Times one RPC from construction to Done(status) and records it.
class RpcTimer {
 public:
  RpcTimer(Metrics* metrics, const char* method)
      : metrics_(metrics), method_(method), start_(std::chrono::steady_clock::now()) {}
  void Done(const grpc::Status& status) const {
    if (metrics_ == nullptr) return;
    metrics_->ObserveRpc(method_, CodeName(status.error_code()),
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }

 private:
  Metrics* metrics_;
  const char* method_;
  std::chrono::steady_clock::time_point start_;
};

/// SendHeld's merge on agent streams: an ack (or ack list) followed by an
/// ack becomes one ack list, in their order. Anything else stays apart.
inline bool MergeHeld(v1::CoordinatorMessage* held, v1::CoordinatorMessage* msg) {
  if (msg->kind_case() != v1::CoordinatorMessage::kAck) return false;
  if (held->kind_case() == v1::CoordinatorMessage::kAck) {
    v1::SampleAck first = std::move(*held->mutable_ack());
    *held->mutable_acks()->add_acks() = std::move(first);
  } else if (held->kind_case() != v1::CoordinatorMessage::kAcks) {
    return false;
  }
  *held->mutable_acks()->add_acks() = std::move(*msg->mutable_ack());
  return true;
}
/// Nothing else merges (job watches hold nothing back).
template <typename W>
bool MergeHeld(W*, W*) {
  return false;
}

/// The outbound half of a server stream: a queue with one write in flight.
/// Owned jointly by the reactor and the coordinator (shared_ptr); once the
/// reactor is done, Send and Close do nothing. Thread-safe.
///
/// Bounded: with `coalesce` (watch streams) at most one message waits behind
/// the one being written and a newer one replaces it (the latest state is
/// all a watcher needs); otherwise (agent streams, whose acks and assignments
/// cannot be dropped) a queue reaching `max_queue` ends the stream with
/// RESOURCE_EXHAUSTED, and the agent reconnects and resumes.
///
/// SendHeld keeps one message back, outside the queue, merging the next held
/// ones into it (MergeHeld): the acks of one commit leave as one ack list
/// once the coordinator Releases them, and any other Send (or Close) sends
/// what is held first, so the stream's order is the order of the calls.
template <typename Reactor, typename W>
class ReactorSink : public MessageSink<W> {
 public:
  ReactorSink(Reactor* reactor, RpcTimer timer, Metrics* metrics, const char* stream, bool coalesce, size_t max_queue)
      : reactor_(reactor),
        timer_(timer),
        metrics_(metrics),
        stream_(stream),
        coalesce_(coalesce),
        max_queue_(max_queue) {}

  void Send(W msg) override {
    absl::MutexLock l(&mu_);
    if (reactor_ == nullptr || closing_) return;
    ReleaseLocked();
    EnqueueLocked(std::move(msg));
  }

  void SendHeld(W msg) override {
    absl::MutexLock l(&mu_);
    if (reactor_ == nullptr || closing_) return;
    if (held_.has_value() && MergeHeld(&*held_, &msg)) return;
    ReleaseLocked();
    held_ = std::move(msg);
  }

  void Release() override {
    absl::MutexLock l(&mu_);
    if (reactor_ == nullptr || closing_) return;
    ReleaseLocked();
  }

  void Close(const grpc::Status& status) override {
    absl::MutexLock l(&mu_);
    if (reactor_ == nullptr || closing_) return;
    ReleaseLocked();
    if (closing_) return;  // the held message overflowed the queue
    closing_ = true;
    status_ = status;
    if (!writing_) FinishLocked();
  }

  /// Called by the reactor's OnWriteDone.
  void WriteDone(bool ok) {
    absl::MutexLock l(&mu_);
    writing_ = false;
    if (reactor_ == nullptr) return;
    if (!queue_.empty()) queue_.pop_front();
    if (!ok) {  // the peer is gone: nothing more can be written
      queue_.clear();
      closing_ = true;
      if (status_.ok()) status_ = grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
    }
    if (!queue_.empty()) {
      writing_ = true;
      reactor_->StartWrite(&queue_.front());
    } else if (closing_) {
      FinishLocked();
    }
  }

  /// Called by the reactor's OnDone: the reactor is about to be deleted.
  void Detach() {
    absl::MutexLock l(&mu_);
    reactor_ = nullptr;
    queue_.clear();
    held_.reset();
  }

 protected:
  void ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!held_.has_value()) return;
    W msg = std::move(*held_);
    held_.reset();
    EnqueueLocked(std::move(msg));
  }

  void EnqueueLocked(W msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closing_) return;
    if (coalesce_ && queue_.size() == 2) {
      queue_.back() = std::move(msg);  // the front is being written
      return;
    }
    if (queue_.size() >= max_queue_) {
      if (metrics_ != nullptr) metrics_->AddSendQueueOverflow(stream_);
      // The write in flight still uses the front; nothing after it goes out.
      if (writing_) {
        queue_.erase(queue_.begin() + 1, queue_.end());
      } else {
        queue_.clear();
      }
      closing_ = true;
      status_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             "the coordinator's send queue to this stream is full (the peer reads too slowly); "
                             "reconnect");
      if (!writing_) FinishLocked();
      return;
    }
    queue_.push_back(std::move(msg));
    if (!writing_) {
      writing_ = true;
      reactor_->StartWrite(&queue_.front());
    }
  }

  void FinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    timer_.Done(status_);
    reactor_->Finish(status_);
  }

  mutable absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
  const RpcTimer timer_;
  Metrics* const metrics_;
  const char* const stream_;
  const bool coalesce_;
  const size_t max_queue_;
  std::deque<W> queue_ ABSL_GUARDED_BY(mu_);
  std::optional<W> held_ ABSL_GUARDED_BY(mu_);  // SendHeld's, not yet queued
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetbench::server
