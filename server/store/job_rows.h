#pragma once
/// What every job store derives from a job to write its rows (internal to
/// server/store): the header blob and the listing filter keys.

#include <string>

#include "hetbench/v1/coordinator.pb.h"
#include "server/store/job_store.h"

namespace hetbench::server {

/// The job without its tasks: what its header row holds.
std::string HeaderBlob(const v1::Job& job);
/// ",mlp,cnn,": the models of a spec, for LIKE '%,mlp,%' filters.
std::string ModelsKey(const v1::JobSpec& spec);
/// ",cpu,gpu,": the target kinds of a spec; "any" for a target of any kind.
std::string KindsKey(const v1::JobSpec& spec);

}  // namespace hetbench::server
