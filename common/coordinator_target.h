#pragma once
/// The gRPC target for "the coordinator", given as one address or several
/// (`--server a:50051,b:50051`: a leader and its standbys sharing one
/// PostgreSQL store). With several, the channel balances over the addresses
/// whose grpc.health.v1 status is SERVING, which only the leader's is: RPCs
/// and agent streams go to the leader and follow it when another takes over.

#include <grpcpp/support/channel_arguments.h>

#include <string>

#include "absl/status/statusor.h"

namespace hetbench {

struct CoordinatorTarget {
  std::string target;  // for grpc::CreateCustomChannel
  bool several = false;
};

/// "host:port" is returned as it is. "h1:p1,h2:p2" becomes one target over
/// every resolved address ("ipv4:..." or "ipv6:..."); an empty entry, a
/// missing port or a name that does not resolve is an error naming it.
absl::StatusOr<CoordinatorTarget> ResolveCoordinatorTarget(const std::string& servers);

/// With several addresses: client-side health checking over round_robin, a
/// short reconnect backoff (a standby rebinds its port when it takes over),
/// and the first host as the authority TLS verifies. Nothing otherwise.
void AddCoordinatorTargetArguments(const std::string& servers, const CoordinatorTarget& target,
                                   grpc::ChannelArguments* args);

}  // namespace hetbench
