#include "bench/fleet/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/names.h"
#include "common/sample_codec.h"
#include "server/ingest/batch_writer.h"
#include "server/service/reactor_sink.h"
#include "server/service/sinks.h"
#include "server/store/sqlite_job_store.h"

namespace hetbench::fleet {

ProcStats ReadProc(pid_t pid) {
  ProcStats s;
  if (pid <= 0) return s;  // not ours (--server): not read
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      // utime (14) and stime (15), in clock ticks.
      if (i == 14 || i == 15) s.cpu_seconds += std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mb = std::stod(line.substr(6)) / 1024.0;
  }
  return s;
}

std::string MakeScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/hetbench-fleet-XXXXXX");
  return mkdtemp(tmpl.data());
}

Server Spawn(const std::string& binary, const Options& opt, std::string dir) {
  Server s;
  s.dir = dir.empty() ? MakeScratchDir() : std::move(dir);
  const std::string port_file = s.dir + "/ports";
  std::filesystem::remove(port_file);
  const double t0 = Now();
  s.pid = fork();
  if (s.pid == 0) {
    const std::string log = s.dir + "/server.log";
    freopen(log.c_str(), "w", stderr);
    std::vector<std::string> args = {binary,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics-listen",
                                     "127.0.0.1:0",
                                     "--port-file",
                                     port_file,
                                     "--heartbeat-seconds",
                                     absl::StrCat(opt.heartbeat_seconds),
                                     "--lease-seconds",
                                     "15"};
    // The SQLite file, unless the extra arguments name a store (--db postgresql://...).
    if (std::find(opt.server_args.begin(), opt.server_args.end(), "--db") == opt.server_args.end()) {
      args.insert(args.end(), {"--db", s.dir + "/fleet.db"});
    }
    args.insert(args.end(), opt.server_args.begin(), opt.server_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  // Until it listens; a server that exits first (a --db it cannot open, say)
  // ends the bench with its log's last lines rather than a run with no server.
  int status = 0;
  bool exited = false;
  auto listening_or_exited = [&] {
    exited = exited || waitpid(s.pid, &status, WNOHANG) == s.pid;
    return exited || access(port_file.c_str(), R_OK) == 0;
  };
  if (!WaitFor(listening_or_exited, 120) || exited) {
    std::cerr << "bench_fleet: the server (" << binary << ") "
              << (exited ? absl::StrCat("exited with status ", WIFEXITED(status) ? WEXITSTATUS(status) : -1)
                         : std::string("did not listen within 120 s"))
              << " before writing its port file; the last lines of its log, " << s.dir << "/server.log:\n";
    std::ifstream log(s.dir + "/server.log");
    std::deque<std::string> tail;
    for (std::string line; std::getline(log, line);) {
      tail.push_back(line.substr(0, 300));
      if (tail.size() > 5) tail.pop_front();
    }
    for (const std::string& line : tail) std::cerr << "  " << line << "\n";
    if (!exited) kill(s.pid, SIGKILL);
    std::exit(1);
  }
  s.start_seconds = Now() - t0;
  std::ifstream in(port_file);
  std::string grpc_part, metrics_part;
  in >> grpc_part >> metrics_part;
  if (grpc_part.size() > 5 && metrics_part.size() > 8) {
    s.address = "127.0.0.1:" + grpc_part.substr(5);
    s.metrics_port = std::atoi(metrics_part.substr(8).c_str());
  }
  return s;
}

void StopServer(const Server& s, bool keep) {
  if (s.pid > 0) {
    kill(s.pid, SIGTERM);
    int status = 0;
    waitpid(s.pid, &status, 0);
  }
  if (keep) {
    std::cerr << "bench_fleet: kept " << s.dir << " (store, server.log)\n";
  } else if (!s.dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(s.dir, ec);
  }
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

std::unique_ptr<v1::Coordinator::Stub> ClientStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return v1::Coordinator::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

absl::StatusOr<v1::Job> GetJob(v1::Coordinator::Stub& stub, const std::string& id, v1::JobView view,
                               size_t* largest_answer) {
  v1::GetJobRequest req;
  req.set_job_id(id);
  req.set_view(view);
  v1::Job job;
  do {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::Job page;
    grpc::Status s = stub.GetJob(&ctx, req, &page);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    if (largest_answer != nullptr) *largest_answer = std::max(*largest_answer, page.ByteSizeLong());
    req.set_task_page_token(page.next_task_page_token());
    if (job.id().empty()) {
      job = std::move(page);
    } else {
      for (v1::Task& t : *page.mutable_tasks()) *job.add_tasks() = std::move(t);
    }
  } while (!req.task_page_token().empty());
  return job;
}

std::string CheckExactlyOnce(v1::Coordinator::Stub& stub, const std::vector<std::string>& jobs, FleetStats& stats,
                             int64_t* ended, int64_t* tasks_checked) {
  int64_t bad = 0, unended = 0;
  for (const std::string& id : jobs) {
    auto job = GetJob(stub, id);
    if (!job.ok() || !IsTerminal(job->state())) {
      ++unended;
      continue;
    }
    ++*ended;
    for (const v1::Task& t : job->tasks()) {
      if (t.state() != v1::TASK_STATE_SUCCEEDED) continue;
      ++*tasks_checked;
      std::lock_guard<std::mutex> l(stats.mu);
      auto it = stats.samples_sent.find(absl::StrCat(t.id(), "/", t.attempt()));
      if (it == stats.samples_sent.end() || it->second != t.result().samples_stored()) ++bad;
      if (!t.result().environment().simulated()) ++bad;
    }
  }
  return absl::StrCat("unended=", unended, " exactly_once_violations=", bad);
}

absl::StatusOr<Buckets> ScrapeHistogram(int port, const std::string& name) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("/metrics on port ", port, ": connect failed"));
  }
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("/metrics: write failed");
  }
  std::string body;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) body.append(buf, static_cast<size_t>(n));
  close(fd);
  Buckets out;
  const std::string prefix = name + "_bucket{le=\"";
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t end = line.find('"', prefix.size());
    const std::string le = line.substr(prefix.size(), end - prefix.size());
    const double bound = le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le);
    out[bound] = std::stod(line.substr(line.rfind(' ') + 1));
  }
  if (out.empty()) return absl::NotFoundError(absl::StrCat("/metrics has no ", name));
  return out;
}

double QuantileBetween(const Buckets& before, const Buckets& after, double q) {
  if (after.empty()) return NAN;
  const double total = after.rbegin()->second - (before.empty() ? 0 : before.rbegin()->second);
  if (total <= 0) return 0;
  for (const auto& [bound, count] : after) {
    auto b = before.find(bound);
    const double c = count - (b == before.end() ? 0 : b->second);
    if (c >= q * total) return bound;
  }
  return std::numeric_limits<double>::infinity();
}

namespace {

/// What ingest and idle cost with nothing behind them: a callback
/// AgentGateway that welcomes, reads each batch's samples into values (the
/// columns step by step, as the protobuf parse reads arrays), acks every batch,
/// echoes each heartbeat that carries the agent's clock (as the coordinator
/// must, for the agent's clock offset), and stores nothing. With a `writer`
/// (the storing sink) each sample batch is acked only once that writer (the
/// coordinator's own BatchWriter, on a SQLite store of its own) has
/// committed it: what any coordinator must do for exactly once, with no
/// event loop, aggregate, gate or metrics behind it. Its acks of one commit
/// go to an agent that reads ack lists as one list, as the coordinator's do
/// (`held` lists the streams to release after each commit's answers).
class BareSink final : public v1::AgentGateway::CallbackService {
 public:
  using HeldAcks = server::HeldSends<v1::CoordinatorMessage>;
  BareSink(server::BatchWriter* writer, HeldAcks* held) : writer_(writer), held_(held) {}

  grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>* Connect(grpc::CallbackServerContext*) override {
    return new Stream(writer_, held_);
  }

 private:
  class Stream final : public grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage> {
    // One write in flight, the rest queued: the coordinator's own send queue.
    using Outbox = server::ReactorSink<Stream, v1::CoordinatorMessage>;

   public:
    Stream(server::BatchWriter* writer, HeldAcks* held)
        : writer_(writer),
          held_(held),
          out_(std::make_shared<Outbox>(this, server::RpcTimer(nullptr, "Connect"), nullptr, "agent",
                                        /*coalesce=*/false, size_t{1} << 20)) {
      StartRead(&in_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        out_->Close(grpc::Status::OK);
        return;
      }
      // The samples read as values, as any receiver of them must: for
      // arrays the protobuf parse did it; compact columns are read step by
      // step (ForEachSampleStep, as the coordinator's edge reads them) and
      // their durations summed, the least a reader of them can do.
      if (in_.has_samples() && !in_.samples().columns().empty()) {
        int64_t sum = 0;
        (void)ForEachSampleStep(in_.samples().columns(), [&sum](int64_t, int64_t d, int32_t) { sum += d; });
        checksum_ += sum;
      }
      v1::CoordinatorMessage out;
      if (in_.has_hello()) {
        ack_lists_ = in_.hello().ack_lists();
        out.mutable_welcome()->set_lease_seconds(60);
        out.mutable_welcome()->set_sample_columns(true);  // it takes what the coordinator takes
      } else if (in_.has_samples()) {
        out.mutable_ack()->set_task_id(in_.samples().task_id());
        out.mutable_ack()->set_attempt(in_.samples().attempt());
        out.mutable_ack()->set_seq(in_.samples().seq());
        if (writer_ != nullptr) {
          auto m = std::make_shared<v1::AgentMessage>(std::move(in_));
          in_.Clear();
          writer_->Write(std::shared_ptr<const v1::SampleBatch>(m, &m->samples()),
                         [outbox = out_, lists = ack_lists_, held = held_,
                          ack = std::move(out)](const absl::StatusOr<bool>& stored) {
                           if (!stored.ok()) return;  // not acked: sent again
                           if (!lists) {
                             outbox->Send(ack);
                             return;
                           }
                           held->Hold(outbox, ack);  // released after the commit's answers (writer's thread)
                         });
          StartRead(&in_);
          return;
        }
      } else if (in_.has_done()) {
        out.mutable_ack()->set_task_id(in_.done().task_id());
        out.mutable_ack()->set_done(true);
      } else if (in_.has_heartbeat() && in_.heartbeat().agent_ns() != 0) {
        out.mutable_heartbeat()->set_unix_seconds(in_.heartbeat().unix_seconds());
        out.mutable_heartbeat()->set_agent_ns(in_.heartbeat().agent_ns());
        out.mutable_heartbeat()->set_coordinator_ns(SteadyNowNs());
      } else {
        StartRead(&in_);
        return;
      }
      out_->Send(std::move(out));
      StartRead(&in_);
    }
    void OnWriteDone(bool ok) override { out_->WriteDone(ok); }
    void OnDone() override {
      out_->Detach();
      delete this;
    }

   private:
    server::BatchWriter* const writer_;
    HeldAcks* const held_;
    const std::shared_ptr<Outbox> out_;
    bool ack_lists_ = false;  // the agent's Hello
    v1::AgentMessage in_;
    int64_t checksum_ = 0;  // what the reading yields, kept so that the reading is not optimized away
  };

  server::BatchWriter* const writer_;
  HeldAcks* const held_;
};

}  // namespace

double MeasureBareSink(const Options& opt, const Profiles& profiles, bool storing) {
  // The storing sink's store: a fresh SQLite file, opened as hetbench-server
  // opens its own (WAL, synchronous=FULL, its checkpointer, batches' bytes in
  // segment files beside it), and written by
  // the coordinator's BatchWriter over a second connection, as Ingest does.
  std::string dir;
  std::unique_ptr<server::SqliteJobStore> store;
  BareSink::HeldAcks held;  // before the writer, whose thread uses it until it stops
  std::unique_ptr<server::BatchWriter> writer;
  if (storing) {
    dir = MakeScratchDir();
    auto opened = server::SqliteJobStore::Open(dir + "/hetbench.db");
    auto connection =
        opened.ok() ? (*opened)->Connect() : absl::StatusOr<std::unique_ptr<server::JobStore>>(opened.status());
    if (!connection.ok()) {
      std::cerr << "bench_fleet: the storing sink's store: " << connection.status() << "\n";
      std::filesystem::remove_all(dir);
      return 0;
    }
    store = std::move(*opened);
    // The acks go out from the writer's thread (there is no event loop); a
    // commit's held acks leave once its answers are done, as the coordinator's.
    writer = std::make_unique<server::BatchWriter>(std::move(*connection), [&held](std::function<void()> then) {
      then();
      held.ReleaseAll();
      return true;
    });
  }
  BareSink sink(writer.get(), &held);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&sink);
  b.SetMaxReceiveMessageSize(64 << 20);
  auto server = b.BuildAndStart();
  FleetStats st;
  double rate = 0;
  {
    Options ingest = opt;
    ingest.mode = "ingest";
    Fleet fleet(absl::StrCat("127.0.0.1:", port), ingest, profiles, &st);
    const std::string prefix = storing ? "stored-" : "bare-";
    fleet.Connect(0, opt.agents, prefix);
    WaitFor([&] { return st.connected.load() >= opt.agents; }, 60);
    // No coordinator assigns here: each agent is handed the task it would get.
    const double start = Now();
    fleet.AssignEach(prefix + "job");
    WaitFor([&] { return st.tasks_done_acked.load() >= opt.agents; }, opt.seconds + 60);
    rate = static_cast<double>(st.samples_acked.load()) / (Now() - start);
    fleet.Stop();
  }
  if (writer) writer->Stop();
  server->Shutdown();
  server.reset();
  writer.reset();
  store.reset();
  if (!dir.empty()) std::filesystem::remove_all(dir);
  return rate;
}

namespace {
std::atomic<bool> bare_stop{false};
void StopBare(int) { bare_stop = true; }
}  // namespace

int ServeBare(int argc, char** argv) {
  std::string listen = "127.0.0.1:0", port_file;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--listen") listen = argv[i + 1];
    if (std::string(argv[i]) == "--port-file") port_file = argv[i + 1];
  }
  signal(SIGTERM, StopBare);
  // As hetbench-server runs: without Abseil's per-lock deadlock graph (server/main.cc).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  BareSink sink(/*writer=*/nullptr, /*held=*/nullptr);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&sink);
  b.SetMaxReceiveMessageSize(64 << 20);
  auto server = b.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "bench_fleet --serve-bare: cannot listen on " << listen << "\n";
    return 1;
  }
  if (!port_file.empty()) {  // as hetbench-server writes it, for Spawn
    std::ofstream(port_file + ".tmp") << "grpc=" << port << " metrics=0\n";
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  }
  while (!bare_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace hetbench::fleet
