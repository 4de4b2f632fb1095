#pragma once
/// The write side of a server stream, as the coordinator's parts see it: an
/// agent's stream (AgentSink) or a job watch (WatchSink). The gRPC reactors
/// implement it (server/service/reactor_sink.h); tests use fakes.

#include <grpcpp/support/status.h>

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
  /// Ends the stream with `status` once queued messages are written. Idempotent.
  virtual void Close(const grpc::Status& status) = 0;
  /// The coordinator finished handling one message read from this stream:
  /// the stream may read another (its in-flight window). Default: nothing.
  virtual void Handled() {}
};

using AgentSink = MessageSink<v1::CoordinatorMessage>;
using WatchSink = MessageSink<v1::JobEvent>;

}  // namespace hetbench::server
