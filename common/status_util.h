#pragma once
/// The one adapter between absl::Status (inside) and grpc::Status (the edge).

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace hetbench {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace hetbench
