#pragma once
/// The write side of a server stream, as the coordinator's parts see it: an
/// agent's stream (AgentSink) or a job watch (WatchSink). The gRPC reactors
/// implement it (server/service/reactor_sink.h); tests use fakes.

#include <grpcpp/support/status.h>

#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::server {

/// Thread-safe; no method blocks.
template <typename T>
class MessageSink {
 public:
  virtual ~MessageSink() = default;
  /// Queues a message; dropped once the stream is closed or gone.
  virtual void Send(T msg) = 0;
  /// Queues a message that may wait: it goes out, in order, with the next
  /// Send, Close or Release, and merges with the held message before it
  /// where the two merge (acks into one ack list). Default: Send at once.
  virtual void SendHeld(T msg) { Send(std::move(msg)); }
  /// Sends what SendHeld holds. Default: nothing is held.
  virtual void Release() {}
  /// Ends the stream with `status` once queued messages are written. Idempotent.
  virtual void Close(const grpc::Status& status) = 0;
  /// The coordinator finished handling one message read from this stream:
  /// the stream may read another (its in-flight window). Default: nothing.
  virtual void Handled() {}
  /// Whether the coordinator itself is holding this stream's reads back (its
  /// in-flight window is full, or the ingest gate is over budget): then the
  /// agent's silence is the coordinator's doing, and its lease must not
  /// expire for it. Default: never.
  virtual bool ReadsHeldBack() const { return false; }
};

using AgentSink = MessageSink<v1::CoordinatorMessage>;
using WatchSink = MessageSink<v1::JobEvent>;

/// The streams that hold messages back (SendHeld) until the next ReleaseAll:
/// a commit's acks leave as one list per stream. One thread uses it.
template <typename T>
class HeldSends {
 public:
  /// `sink`->SendHeld(msg); the next ReleaseAll releases `sink`.
  void Hold(const std::shared_ptr<MessageSink<T>>& sink, T msg) {
    sink->SendHeld(std::move(msg));
    held_.try_emplace(sink.get(), sink);
  }
  /// Releases every stream held since the last call.
  void ReleaseAll() {
    for (auto& [raw, sink] : held_) sink->Release();
    held_.clear();
  }

 private:
  absl::flat_hash_map<MessageSink<T>*, std::shared_ptr<MessageSink<T>>> held_;
};

}  // namespace hetbench::server
