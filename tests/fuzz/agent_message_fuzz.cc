// Fuzz target: what an agent may send the coordinator. The input is a
// series of AgentMessages, each preceded by a 2-byte big-endian length, fed
// to one agent session of a coordinator that has a job with a task assigned
// to that agent (so samples, progress, power and results reach real state).
// The coordinator must neither crash nor store anything it cannot explain.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "common/log.h"
#include "server/metrics/metrics.h"
#include "server/service/coordinator.h"
#include "server/store/sqlite_job_store.h"

namespace {

using hetbench::server::Coordinator;

class NullSink final : public hetbench::server::MessageSink<hetbench::v1::CoordinatorMessage> {
 public:
  void Send(hetbench::v1::CoordinatorMessage) override {}
  void Close(const grpc::Status&) override {}
};

struct World {
  World() {
    hetbench::SetMinLogLevel(hetbench::LogLevel::kError);  // a line per fuzz input would drown the run
    const std::string dir = std::filesystem::temp_directory_path() / ("hetbench-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    store = *hetbench::server::SqliteJobStore::Open(dir + "/jobs.db");
    hetbench::server::CoordinatorOptions options;
    coordinator = std::make_unique<Coordinator>(store.get(), &metrics, &clock, options);
    if (!coordinator->Start().ok()) std::abort();
    hetbench::v1::JobSpec spec;
    spec.add_batch_sizes(32);
    spec.add_batch_sizes(64);
    absl::Notification done;
    coordinator->api().SubmitJob(spec, [&](absl::StatusOr<hetbench::v1::Job> j) {
      if (!j.ok()) std::abort();
      done.Notify();
    });
    done.WaitForNotification();
  }
  hetbench::RealClock clock;
  hetbench::server::Metrics metrics;
  std::unique_ptr<hetbench::server::SqliteJobStore> store;
  std::unique_ptr<Coordinator> coordinator;
};

hetbench::v1::AgentMessage DefaultHello() {
  hetbench::v1::AgentMessage m;
  auto* h = m.mutable_hello();
  h->set_agent_id("fuzz-agent");
  auto* d = h->add_devices();
  d->set_id("cpu0");
  d->set_kind(hetbench::v1::DEVICE_KIND_CPU);
  d->set_cores(1);
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();  // one coordinator for the whole run, as in production
  Coordinator& c = *world->coordinator;
  const uint64_t session = c.NewSessionId();
  auto sink = std::make_shared<NullSink>();
  size_t pos = 0;
  bool first = true;
  while (pos + 2 <= size) {
    const size_t n = (static_cast<size_t>(data[pos]) << 8) | data[pos + 1];
    pos += 2;
    if (n > size - pos) break;
    hetbench::v1::AgentMessage msg;
    const bool parsed = msg.ParseFromArray(data + pos, static_cast<int>(n));
    pos += n;
    if (!parsed) continue;
    // Most inputs should get past the Hello, as a real agent does.
    if (first && !msg.has_hello()) c.OnAgentMessage(session, sink, DefaultHello());
    first = false;
    c.OnAgentMessage(session, sink, std::move(msg));
  }
  c.OnAgentGone(session, "fuzz input done");
  c.RunSync([] {});
  return 0;
}
