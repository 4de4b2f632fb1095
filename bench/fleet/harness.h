#pragma once
/// What bench_fleet measures with: the spawned coordinator process (its CPU,
/// RSS and /metrics), a client stub, the exactly-once check, and the bare
/// callback sink that ingest is compared with.

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/fleet/sim_fleet.h"
#include "hetbench/v1/coordinator.grpc.pb.h"

namespace hetbench::fleet {

struct ProcStats {
  double cpu_seconds = 0;
  double rss_mb = 0;
};
ProcStats ReadProc(pid_t pid);

struct Server {
  pid_t pid = 0;
  std::string address;
  std::string dir;  // store, port file and log
  int metrics_port = 0;
  double start_seconds = 0;  // from exec to the port file written (serving)
};
/// A fresh scratch directory under $TMPDIR (or /tmp).
std::string MakeScratchDir();
/// Starts `binary` on loopback with its store in `dir` (made when empty).
Server Spawn(const std::string& binary, const Options& opt, std::string dir = "");
/// SIGTERM, wait; removes the directory unless `keep`.
void StopServer(const Server& s, bool keep);

double Percentile(std::vector<double> v, double q);
std::unique_ptr<v1::Coordinator::Stub> ClientStub(const std::string& address);
/// The whole job, page after page of tasks; `largest_answer`: the largest
/// GetJob answer seen, in bytes.
absl::StatusOr<v1::Job> GetJob(v1::Coordinator::Stub& stub, const std::string& id, v1::JobView view = v1::JOB_VIEW_FULL,
                               size_t* largest_answer = nullptr);

/// Checks every job ended and every succeeded task stored what its last
/// attempt sent; "unended=N exactly_once_violations=M".
std::string CheckExactlyOnce(v1::Coordinator::Stub& stub, const std::vector<std::string>& jobs, FleetStats& stats,
                             int64_t* ended, int64_t* tasks_checked);

/// A Prometheus histogram's cumulative buckets (upper bound -> count), from
/// the coordinator's /metrics over loopback HTTP.
using Buckets = std::map<double, double>;
absl::StatusOr<Buckets> ScrapeHistogram(int port, const std::string& name);
/// The q-quantile of the observations between two scrapes, as the upper
/// bound of the bucket holding it (+Inf when past the last bound).
double QuantileBetween(const Buckets& before, const Buckets& after, double q);

/// Samples/s the agents of `opt` reach against a callback sink in this
/// process that acks every batch at once and stores nothing; or, `storing`,
/// acks each batch once the coordinator's BatchWriter has committed it to a
/// SQLite store of its own (the floor of durable exactly-once ingest).
double MeasureBareSink(const Options& opt, const Profiles& profiles, bool storing = false);

/// `bench_fleet --serve-bare --listen ADDR --port-file F`: the same bare
/// gateway as a process of its own, spawned in place of hetbench-server
/// (idle --bare-floor), so its CPU is measured apart from the simulated
/// agents'. Runs until SIGTERM.
int ServeBare(int argc, char** argv);

}  // namespace hetbench::fleet
