// Writes the agent-message seed corpus: the messages a real agent sends
// (Hello, Heartbeat, Progress, samples, power, results) for the task the fuzz
// coordinator assigns, plus stale, duplicate and inconsistent ones.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "hetbench/v1/agent.pb.h"
#include "tests/testing/sample_batches.h"

using hetbench::v1::AgentMessage;

namespace {

std::string Frame(const std::vector<AgentMessage>& msgs) {
  std::string out;
  for (const auto& m : msgs) {
    const std::string b = m.SerializeAsString();
    out.push_back(static_cast<char>(b.size() >> 8));
    out.push_back(static_cast<char>(b.size() & 0xff));
    out += b;
  }
  return out;
}

AgentMessage Hello() {
  AgentMessage m;
  m.mutable_hello()->set_agent_id("fuzz-agent");
  auto* d = m.mutable_hello()->add_devices();
  d->set_id("cpu0");
  d->set_kind(hetbench::v1::DEVICE_KIND_CPU);
  return m;
}

AgentMessage Samples(uint64_t seq, int n, int attempt = 1) {
  AgentMessage m;
  hetbench::testing::BatchShape shape;
  shape.first_start_ns = 1000;
  shape.seq_stride_ns = 100000;
  shape.step_ns = 1000;
  shape.duration_ns = 900;
  shape.duration_cycle = 1;
  shape.items = 32;
  *m.mutable_samples() = hetbench::testing::SampleBatchOf("job-000001-t0", attempt, seq, n, shape);
  return m;
}

AgentMessage Done(hetbench::v1::TaskState state, uint64_t batches, int64_t samples) {
  AgentMessage m;
  auto* d = m.mutable_done();
  d->set_task_id("job-000001-t0");
  d->set_attempt(1);
  d->set_state(state);
  d->set_batches_sent(batches);
  d->set_samples_sent(samples);
  d->mutable_result()->set_test_accuracy(0.8);
  d->mutable_result()->set_dataset_train_size(60000);
  d->mutable_result()->set_min_train_steps(10);
  return m;
}

AgentMessage ResumingHello(bool finished) {
  AgentMessage m = Hello();
  auto* r = m.mutable_hello()->add_resume();
  r->set_task_id("job-000001-t0");
  r->set_attempt(1);
  r->set_finished(finished);
  auto* stale = m.mutable_hello()->add_resume();  // an attempt the coordinator never gave
  stale->set_task_id("job-000001-t1");
  stale->set_attempt(9);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  AgentMessage hb;
  hb.mutable_heartbeat()->set_unix_seconds(1.7e9);
  AgentMessage progress;
  progress.mutable_progress()->set_task_id("job-000001-t0");
  progress.mutable_progress()->set_attempt(1);
  progress.mutable_progress()->set_phase(hetbench::v1::PHASE_TRAIN);
  progress.mutable_progress()->set_step(10);
  progress.mutable_progress()->set_total_steps(100);
  AgentMessage power;
  auto* p = power.mutable_power();
  p->set_task_id("job-000001-t0");
  p->set_attempt(1);
  p->mutable_sensor()->set_name("rapl:package-0");
  p->mutable_sensor()->set_source(hetbench::v1::POWER_SOURCE_RAPL);
  p->mutable_sensor()->set_has_energy_counter(true);
  for (int i = 0; i < 5; ++i) {
    p->add_t_ns(i * 100000000LL);
    p->add_watts(std::nan(""));
    p->add_joules(i * 10.0);
  }
  const std::vector<std::pair<std::string, std::vector<AgentMessage>>> seeds = {
      {"hello", {Hello()}},
      {"hello-heartbeat", {Hello(), hb}},
      {"hello-twice", {Hello(), Hello()}},
      {"no-hello", {hb, progress}},
      {"run-to-success", {Hello(), progress, Samples(0, 10), Samples(1, 10), power, Done(hetbench::v1::TASK_STATE_SUCCEEDED, 2, 20)}},
      {"duplicate-seq", {Hello(), Samples(0, 5), Samples(0, 5), Done(hetbench::v1::TASK_STATE_SUCCEEDED, 1, 5)}},
      {"missing-batches", {Hello(), Samples(0, 5), Done(hetbench::v1::TASK_STATE_SUCCEEDED, 3, 15)}},
      {"stale-attempt", {Hello(), Samples(0, 5, 7), Done(hetbench::v1::TASK_STATE_FAILED, 0, 0)}},
      {"cancelled", {Hello(), Samples(0, 5), Done(hetbench::v1::TASK_STATE_CANCELLED, 1, 5)}},
      // A stream resumed: batches sent again, then the rest and the result.
      {"resume", {ResumingHello(false), Samples(0, 5), Samples(0, 5), Samples(1, 5),
                  Done(hetbench::v1::TASK_STATE_SUCCEEDED, 2, 10)}},
      {"resume-finished", {ResumingHello(true), Samples(0, 5), Done(hetbench::v1::TASK_STATE_SUCCEEDED, 1, 5),
                           Done(hetbench::v1::TASK_STATE_SUCCEEDED, 1, 5)}},
  };
  for (const auto& [name, msgs] : seeds) {
    std::ofstream(dir + "/" + name, std::ios::binary) << Frame(msgs);
  }
  std::printf("wrote %zu seeds to %s\n", seeds.size(), dir.c_str());
  return 0;
}
