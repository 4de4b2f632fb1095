#pragma once
/// The outbound half of the coordinator's server streams (ReactorSink) and
/// the RPC timer every call records itself with; a header of their own so the
/// send queue's bounds are unit-tested with a fake reactor.

#include <grpcpp/support/status.h>

#include <chrono>
#include <deque>

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

/// The outbound half of a server stream: a queue with one write in flight.
/// Owned jointly by the reactor and the coordinator (shared_ptr); once the
/// reactor is done, Send and Close do nothing. Thread-safe.
///
/// Bounded: with `coalesce` (watch streams) at most one message waits behind
/// the one being written and a newer one replaces it (the latest state is
/// all a watcher needs); otherwise (agent streams, whose acks and assignments
/// cannot be dropped) a queue reaching `max_queue` ends the stream with
/// RESOURCE_EXHAUSTED, and the agent reconnects and resumes.
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

  void Close(const grpc::Status& status) override {
    absl::MutexLock l(&mu_);
    if (reactor_ == nullptr || closing_) return;
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
  }

 protected:
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
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetbench::server
