#include "report/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace hetbench::report {
namespace {

using ::testing::HasSubstr;

v1::Job TwoTaskJob() {
  v1::Job job;
  job.set_id("job-000007");
  job.mutable_spec()->set_name("sweep");
  job.mutable_spec()->set_model("mlp");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  for (int i = 0; i < 2; ++i) {
    v1::Task* t = job.add_tasks();
    t->set_id("job-000007-t" + std::to_string(i));
    t->set_state(v1::TASK_STATE_SUCCEEDED);
    t->set_agent_id("n1");
    t->set_device_id(i == 0 ? "cpu0" : "gpu0");
    t->set_device_kind(i == 0 ? v1::DEVICE_KIND_CPU : v1::DEVICE_KIND_GPU);
    t->set_batch_size(64);
    v1::PhaseResult* p = t->mutable_result()->add_phases();
    p->set_phase(v1::PHASE_TRAIN);
    p->mutable_stats()->set_count(100);
    p->mutable_stats()->set_p50_ns(2e6 * (i + 1));
    p->mutable_stats()->set_samples_per_second(1000.0 * (i + 1) * 1.5);
    t->mutable_result()->set_test_accuracy(0.84);
  }
  return job;
}

TEST(RenderTest, TableShowsPercentilesInMsAndSpeedupAgainstTheBaseline) {
  const std::string table = RenderReport(TwoTaskJob(), OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("P50_MS"));
  EXPECT_THAT(table, HasSubstr("4.000"));  // 4e6 ns
  EXPECT_THAT(table, HasSubstr("2.00x"));  // 3000 / 1500 samples/s
  EXPECT_THAT(table, HasSubstr("relative to the same model and batch size on the baseline (cpu"));
  // It ends with the command that reruns it.
  EXPECT_THAT(table,
              HasSubstr("Rerun: hetbench get job job-000007 -o yaml > spec.yaml && hetbench submit -f spec.yaml"));
}

TEST(RenderTest, SpeedupIsRefusedAcrossDifferentFingerprintsUnlessAsked) {
  v1::Job job = TwoTaskJob();
  job.mutable_tasks(0)->mutable_result()->mutable_environment()->set_model_fingerprint("mlp/init=aa");
  job.mutable_tasks(1)->mutable_result()->mutable_environment()->set_model_fingerprint("mlp/init=bb");
  const std::string refused = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(refused, HasSubstr("n/a"));
  EXPECT_THAT(refused, HasSubstr("model fingerprints differ"));
  EXPECT_THAT(refused, ::testing::Not(HasSubstr("2.00x")));
  EXPECT_THAT(RenderReport(job, OutputFormat::kTable, /*compare_mismatched=*/true), HasSubstr("2.00x"));
}

// Two executors (C++ and the Python runner) hash weights and data
// differently: they are compared by architecture, and only by that.
TEST(RenderTest, ExecutorsAreComparedByArchitectureAndNamed) {
  v1::Job job = TwoTaskJob();
  job.mutable_tasks(1)->set_device_id("cpu0");
  job.mutable_tasks(1)->set_device_kind(v1::DEVICE_KIND_CPU);
  job.mutable_tasks(1)->set_executor("python");
  auto* cpp = job.mutable_tasks(0)->mutable_result()->mutable_environment();
  auto* py = job.mutable_tasks(1)->mutable_result()->mutable_environment();
  cpp->set_model_fingerprint("mlp/init=aa");
  py->set_model_fingerprint("mlp/init=sha256:bb");
  cpp->set_executor("torch");
  py->set_executor("python");
  cpp->set_architecture_fingerprint("mlp/params=669706/shapes=a9fae6dd0d5073cd");
  py->set_architecture_fingerprint("mlp/params=669706/shapes=a9fae6dd0d5073cd");
  std::string table = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("n1/cpu0 (cpu via python)"));
  EXPECT_THAT(table, HasSubstr("2.00x"));
  EXPECT_THAT(table, HasSubstr("executor python on cpu, architecture mlp/params=669706"));
  py->set_architecture_fingerprint("mlp/params=669706/shapes=0000000000000000");
  table = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("model fingerprints differ"));
  // A GPU task shows its device memory peak.
  job.mutable_tasks(1)->mutable_result()->set_device_memory_peak_bytes(int64_t{512} << 20);
  EXPECT_THAT(RenderReport(job, OutputFormat::kTable), HasSubstr("device memory peak 512.0 MiB"));
}

TEST(RenderTest, AgentsListExecutorsAndTheKindsNotOfferedWithWhy) {
  v1::AgentInfo a;
  a.set_agent_id("vm1");
  v1::Device* cpu = a.add_devices();
  cpu->set_id("cpu0");
  cpu->set_kind(v1::DEVICE_KIND_CPU);
  cpu->set_model("Xeon");
  cpu->add_executors("torch");
  cpu->add_executors("python");
  cpu->add_power_sensors("rapl:package-0");
  v1::Device* gpu = a.add_devices();
  gpu->set_id("gpu0");
  gpu->set_kind(v1::DEVICE_KIND_GPU);
  gpu->set_model("A100");
  gpu->set_driver("NVIDIA 535.104.05");
  (*gpu->mutable_attributes())["uuid"] = "GPU-1234";
  v1::AbsentDevice* tpu = a.add_absent();
  tpu->set_kind(v1::DEVICE_KIND_TPU);
  tpu->set_reason("no /dev/accel* device");
  (*a.mutable_labels())["zone"] = "b";
  (*a.mutable_labels())["pool"] = "spot";
  const std::string table = RenderAgents({a}, OutputFormat::kTable);
  EXPECT_THAT(table, ::testing::ContainsRegex("cpu0 +cpu +Xeon .* torch,python +pool=spot,zone=b "));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("DRIVER")));
  EXPECT_THAT(table, ::testing::ContainsRegex("not offered:\nAGENT +KIND +WHY\nvm1 +tpu +no /dev/accel\\* device"));
  const std::string wide = RenderAgents({a}, OutputFormat::kWide);
  EXPECT_THAT(wide, ::testing::ContainsRegex("DRIVER +POWER_SENSORS"));
  EXPECT_THAT(wide, ::testing::ContainsRegex("gpu0 +gpu +A100 .* NVIDIA 535.104.05 "));
  EXPECT_THAT(wide, HasSubstr("rapl:package-0"));
  EXPECT_THAT(wide, HasSubstr("uuid=GPU-1234"));
  EXPECT_THAT(RenderAgents({a}, OutputFormat::kCsv),
              HasSubstr("vm1,cpu0,cpu,Xeon,0,0.0,\"torch,python\",\"pool=spot,zone=b\""));
}

TEST(RenderTest, AnAgentWaitingToResumeIsShownDisconnectedWithItsDeadline) {
  v1::AgentInfo a;
  a.set_agent_id("vm1");
  v1::Device* cpu = a.add_devices();
  cpu->set_id("cpu0");
  cpu->set_kind(v1::DEVICE_KIND_CPU);
  a.add_busy_device_ids("cpu0");
  a.set_resume_deadline_unix_seconds(1.7e9);
  a.set_disconnect_reason("stream closed by ipv4:10.0.0.7:4711");
  v1::AgentInfo restarted;  // after a coordinator restart: no Hello yet
  restarted.set_agent_id("vm2");
  restarted.add_busy_device_ids("gpu0");
  restarted.set_resume_deadline_unix_seconds(1.7e9);
  restarted.set_disconnect_reason("was cut off by a coordinator restart");
  const std::string table = RenderAgents({a, restarted}, OutputFormat::kTable);
  EXPECT_THAT(table, ::testing::ContainsRegex("vm1 +cpu0 .* busy, disconnected"));
  EXPECT_THAT(table, ::testing::ContainsRegex("unless they resume by the deadline:\nAGENT +DEVICES +DEADLINE +WHY\n"
                                              "vm1 +cpu0 +[0-9-]+ [0-9:]+.* stream closed by ipv4:10.0.0.7:4711\n"
                                              "vm2 +gpu0 +.* was cut off by a coordinator restart"));
  EXPECT_THAT(RenderAgents({a}, OutputFormat::kJson), HasSubstr("\"disconnect_reason\""));
}

TEST(RenderTest, InvalidPhasesAreMarkedWithTheirReasons) {
  v1::Job job = TwoTaskJob();
  v1::PhaseResult* p = job.mutable_tasks(1)->mutable_result()->mutable_phases(0);
  p->set_valid(false);
  p->add_invalid_reasons("only 3 of 459 steps measured");
  job.mutable_tasks(0)->mutable_result()->mutable_phases(0)->set_valid(true);
  const std::string table = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("INVALID job-000007-t1 train: only 3 of 459 steps measured"));
  // Every row carries its verdict in the VALID column.
  EXPECT_THAT(table, ::testing::ContainsRegex("job-000007-t0 .* yes\n"));
  EXPECT_THAT(table, ::testing::ContainsRegex("job-000007-t1 .* NO\n"));
  EXPECT_THAT(RenderReport(job, OutputFormat::kCsv), HasSubstr(",false,only 3 of 459 steps measured,"));
}

TEST(RenderTest, CsvHasOneRowPerTaskAndPhaseWithAHeader) {
  v1::Job job = TwoTaskJob();
  job.mutable_tasks(0)->mutable_result()->mutable_phases(0)->mutable_stats()->set_p50_ns(23850512.25);
  const std::string csv = RenderReport(job, OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr(",23850512.25,")) << "plain decimal notation, every digit (not 2.38505e+07)";
  EXPECT_EQ(csv.find("e+0"), std::string::npos);
  EXPECT_EQ(csv.find("x,"), std::string::npos) << "the speedup is a plain ratio";
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_EQ(csv.rfind("job_id,task_id,model,agent_id", 0), 0u);
  EXPECT_THAT(csv, HasSubstr("job-000007,job-000007-t1,mlp,n1,gpu0,gpu,64,succeeded,train,100,"));
}

TEST(RenderTest, TheEnergyTableSaysHowMuchProbeTimeItLeftOut) {
  v1::Job job = TwoTaskJob();
  v1::EnergyResult* e = job.mutable_tasks(0)->mutable_result()->add_energy();
  e->set_phase(v1::PHASE_TRAIN);
  e->set_sensor("rapl:package-0");
  e->set_source(v1::POWER_SOURCE_RAPL);
  e->set_energy_joules(185);
  e->set_joules_per_sample(0.925);
  e->set_coverage(1);
  std::string table = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("925.0000"));  // J per 1k samples
  EXPECT_EQ(table.find("machine probe's readings"), std::string::npos) << "no readings, no line";
  e->set_probe_seconds(0.15);
  table = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("Left out of energy and cost: the machine probe's readings between steps (0.15 s"));
  EXPECT_THAT(RenderReport(job, OutputFormat::kCsv), HasSubstr(",false,0.15,")) << "energy_short_window, then probe";
}

// Two models on two devices: each model's GPU task is compared with the same
// model on the CPU, as a percentage, with its quality beside it.
v1::Job StudyJob() {
  v1::Job job;
  job.set_id("job-000009");
  job.mutable_spec()->add_models("mlp");
  job.mutable_spec()->add_models("autoencoder");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  int i = 0;
  for (const char* model : {"mlp", "autoencoder"}) {
    for (v1::DeviceKind kind : {v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_GPU}) {
      v1::Task* t = job.add_tasks();
      t->set_id("job-000009-t" + std::to_string(i++));
      t->set_model(model);
      t->set_state(v1::TASK_STATE_SUCCEEDED);
      t->set_agent_id("n1");
      t->set_device_id(kind == v1::DEVICE_KIND_CPU ? "cpu0" : "gpu0");
      t->set_device_kind(kind);
      t->set_batch_size(128);
      const double speed = kind == v1::DEVICE_KIND_CPU ? 1.0 : (std::string(model) == "mlp" ? 12.5 : 3.0);
      for (v1::Phase phase : {v1::PHASE_TRAIN, v1::PHASE_INFER}) {
        v1::PhaseResult* p = t->mutable_result()->add_phases();
        p->set_phase(phase);
        p->set_valid(true);
        p->mutable_stats()->set_samples_per_second(1000 * speed * (phase == v1::PHASE_INFER ? 4 : 1));
        p->mutable_stats()->set_window_seconds(60 / speed);
      }
      if (std::string(model) == "mlp") {
        t->mutable_result()->set_test_accuracy(kind == v1::DEVICE_KIND_CPU ? 0.8441 : 0.8439);
      } else {
        t->mutable_result()->set_test_mse(0.017);
      }
      t->mutable_result()->set_forward_flops_per_sample(1.34e6);
      t->mutable_result()->set_train_flops_per_sample(4.02e6);
      t->mutable_result()->mutable_calibration()->set_gemm_gflops(kind == v1::DEVICE_KIND_CPU ? 100 : 10000);
    }
  }
  return job;
}

TEST(RenderTest, StudyTableGivesSpeedupAsAPercentageOfTheSameModelOnTheBaseline) {
  const std::string t = RenderStudyTable(StudyJob());
  EXPECT_THAT(t, HasSubstr("models mlp, autoencoder"));
  EXPECT_THAT(t, ::testing::ContainsRegex("mlp +n1/gpu0 \\(gpu\\) +128 +4.800 +4.800 +1250% +1250% +0.8439"));
  EXPECT_THAT(t,
              ::testing::ContainsRegex("autoencoder +n1/gpu0 \\(gpu\\) +128 +20.000 +20.000 +300% +300% +mse 0.0170"));
  EXPECT_THAT(t, ::testing::ContainsRegex("autoencoder +n1/cpu0 \\(cpu\\) +128 +60.000 +60.000 +100% +100%"));
  // With the GPU as the baseline, the CPU is the slow one.
  EXPECT_THAT(RenderStudyTable(StudyJob(), v1::DEVICE_KIND_GPU),
              ::testing::ContainsRegex("mlp +n1/cpu0 \\(cpu\\) +128 +60.000 +60.000 +8% +8%"));
}

TEST(RenderTest, RooflineRelatesAchievedFlopsToTheCalibratedPeak) {
  const std::string t = RenderRoofline(StudyJob());
  // mlp on the CPU trains 1000 samples/s x 4.02 MFLOP = 4.02 GFLOP/s = 4.0% of 100.
  EXPECT_THAT(t, ::testing::ContainsRegex("job-000009-t0 +mlp +train +4.02 +4.02 +100.0 +4.0%"));
  EXPECT_THAT(t, ::testing::ContainsRegex("job-000009-t1 +mlp +infer +1.34 +67.00 +10000.0 +0.7%"));
}

TEST(RenderTest, LayersShowPercentilesAndTheSpeedupOfTheSameLayer) {
  v1::Job job = StudyJob();
  for (int i : {0, 1}) {
    v1::LayerTiming* l = job.mutable_tasks(i)->mutable_result()->add_layers();
    l->set_name("Linear(in_features=784, out_features=512, bias=true)");
    l->mutable_forward()->set_count(20);
    l->mutable_forward()->set_p25_ns(1.0e6);
    l->mutable_forward()->set_p50_ns(1.5e6);
    l->mutable_forward()->set_p75_ns(2.0e6);
    l->mutable_inference()->set_count(20);
    l->mutable_inference()->set_p50_ns(i == 0 ? 1.2e6 : 0.3e6);
    l->set_forward_flops_per_sample(802816);
  }
  // The second task's profile timed the layer's optimizer share; the first's did not (an older agent).
  job.mutable_tasks(1)->mutable_result()->mutable_layers(0)->mutable_optimizer()->set_count(5);
  job.mutable_tasks(1)->mutable_result()->mutable_layers(0)->mutable_optimizer()->set_p50_ns(0.25e6);
  const std::string t = RenderLayers(job, OutputFormat::kTable);
  EXPECT_THAT(t, HasSubstr("1.500 [1.000-2.000]"));
  EXPECT_THAT(t, ::testing::ContainsRegex("job-000009-t1 .* 1\\.500 \\[1\\.000-2\\.000\\] +- +0\\.250 +0\\.300"));
  EXPECT_THAT(t, ::testing::ContainsRegex("job-000009-t0 .* 1\\.500 \\[1\\.000-2\\.000\\] +- +- +1\\.200"));
  const std::string csv = RenderLayers(job, OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr(",infer_joules_per_sample,optimizer_p50_ns\n"));
  EXPECT_THAT(csv, ::testing::ContainsRegex("job-000009-t1,.*,250000\n"));
  EXPECT_THAT(t, ::testing::ContainsRegex("job-000009-t1 .* 0.803 +4.00x"));  // 1.2 ms on the CPU vs 0.3 ms
  EXPECT_THAT(RenderLayers(StudyJob(), OutputFormat::kTable), HasSubstr("No per-layer timings"));
}

TEST(RenderTest, SweepsShowTimePerSampleSoBatchSizesCompare) {
  v1::Job job = TwoTaskJob();
  for (int i = 0; i < 2; ++i) {  // 100 steps of 64 and 128 samples
    v1::TimingStats* s = job.mutable_tasks(i)->mutable_result()->mutable_phases(0)->mutable_stats();
    s->set_items(100 * (64 << i));
    s->set_p25_ns(1e6 * (i + 1));
  }
  const std::string table = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("P50_US_PER_SAMPLE"));
  EXPECT_THAT(table, HasSubstr("31.25"));  // 2 ms / 64 samples
  const std::string csv = RenderReport(job, OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr("p25_ns_per_sample,p50_ns_per_sample,p75_ns_per_sample"));
  EXPECT_THAT(csv, HasSubstr(",15625,31250,0,"));  // task 0: 1 ms and 2 ms per 64-sample step
}

TEST(RenderTest, JsonIsTheFullJob) {
  const std::string json = RenderReport(TwoTaskJob(), OutputFormat::kJson);
  EXPECT_THAT(json, HasSubstr("\"samples_per_second\": 3000"));
  EXPECT_THAT(json, HasSubstr("\"state\": \"JOB_STATE_SUCCEEDED\""));
}

TEST(RenderTest, ProgressBarFillsWithSteps) {
  v1::Job job;
  v1::Task* t = job.add_tasks();
  t->set_id("j-t0");
  t->set_state(v1::TASK_STATE_RUNNING);
  t->set_phase(v1::PHASE_TRAIN);
  t->set_step(50);
  t->set_total_steps(100);
  auto lines = ProgressLines(job, 10);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("[#####.....]  50% train 50/100"));
}

TEST(RenderTest, UnknownFormatIsAUsageError) {
  EXPECT_FALSE(ParseOutputFormat("xml").ok());
  EXPECT_TRUE(ParseOutputFormat("csv").ok());
}

}  // namespace
}  // namespace hetbench::report

namespace hetbench::report {
namespace {

// Every table view has its CSV: the study table's cells, and a job's tasks.
TEST(RenderTest, StudyTableAndJobHaveCsv) {
  const v1::Job job = TwoTaskJob();
  const std::string study = RenderStudyTable(job, v1::DEVICE_KIND_CPU, false, OutputFormat::kCsv);
  EXPECT_EQ(study.substr(0, study.find('\n')),
            "model,device,batch,train_s,test_s,train_vs_base,test_vs_base,test_accuracy,test_mse,nominal_w,"
            "nominal_w_from,e_pxt_j,avg_w,energy_j,energy_source,energy_sensors,valid");
  EXPECT_EQ(std::count(study.begin(), study.end(), '\n'), 3);  // header + 2 tasks, no notes
  EXPECT_THAT(study, HasSubstr("n1/gpu0 (gpu),64,"));
  // A spreadsheet reads every cell as one value: no "%", "x", "+", "*" or ranges beside numbers.
  for (const std::string& cell :
       std::vector<std::string>(absl::StrSplit(study.substr(study.find('\n') + 1), absl::ByAnyChar(",\n")))) {
    if (cell.empty() || !std::isdigit(static_cast<unsigned char>(cell[0]))) continue;
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(cell, &value)) << "not a plain number: " << cell;
    EXPECT_EQ(cell.find_first_of("%x+*e"), std::string::npos) << cell;
  }
  const std::string tasks = RenderJob(job, OutputFormat::kCsv);
  EXPECT_EQ(tasks.substr(0, tasks.find('\n')), "task,model,device,batch,state,attempt,note");
  EXPECT_THAT(tasks, HasSubstr("job-000007-t1,mlp,n1/gpu0 (gpu),64,succeeded,"));
  EXPECT_THAT(RenderJob(job, OutputFormat::kYaml), HasSubstr("model: mlp"));
}

}  // namespace
}  // namespace hetbench::report
