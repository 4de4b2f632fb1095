// An in-process coordinator and a real agent (LibTorch, real Fashion-MNIST)
// on 127.0.0.1:0, driven through the real CLI code (fixture: loopback_fixture.h).
#include "tests/integration/loopback_fixture.h"

namespace hetbench::loopback_testing {
namespace {

TEST_F(LoopbackTest, CppAndPythonRunTheSameModelSideBySide) {
  ASSERT_TRUE(WaitForConnections(1));
  std::vector<std::string> args = ShortJob();
  args.insert(args.end(), {"-t", "cpu,cpu:python", "-m", "mlp"});
  CliResult r = Cli(args);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  v1::Job job = GetJob("job-000001");
  ASSERT_EQ(job.tasks_size(), 2);
  for (const v1::Task& t : job.tasks()) {
    ASSERT_EQ(t.state(), v1::TASK_STATE_SUCCEEDED) << t.id() << " " << t.error();
    EXPECT_EQ(t.result().samples_stored(), 45) << t.id();  // 40 steps + 5 inference batches, streamed and acked
    EXPECT_EQ(t.result().phases_size(), 2) << t.id();
    EXPECT_GT(t.result().test_accuracy(), 0.5) << t.id();
  }
  EXPECT_EQ(job.tasks(0).executor(), "torch");
  EXPECT_EQ(job.tasks(1).executor(), "python");
  const v1::RunEnvironment& cpp = job.tasks(0).result().environment();
  const v1::RunEnvironment& py = job.tasks(1).result().environment();
  EXPECT_EQ(cpp.architecture_fingerprint(), py.architecture_fingerprint());
  EXPECT_NE(cpp.model_fingerprint(), py.model_fingerprint());  // weights and data hashed differently
  EXPECT_EQ(py.executor(), "python");

  CliResult report = Cli({"--server", address_, "report", "job-000001"});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_THAT(report.out, HasSubstr("loopback-agent/cpu0 (cpu via python)"));
  EXPECT_THAT(report.out, ::testing::Not(HasSubstr("n/a: model fingerprints differ")));
  // Both rows have a speedup against the C++ baseline (1.00x for itself).
  EXPECT_THAT(report.out, ::testing::ContainsRegex("cpu via python\\)  64 +train .* [0-9]+\\.[0-9]+x "));
}

// `hetbench cancel` reaches the executor and the running task ends CANCELLED
// long before its 100,000 steps, its measured samples kept and marked
// partial. How fast is printed, not asserted (a timed assertion flakes on a
// loaded machine); the 30 s deadline only tells a stop from a hang.
TEST_F(LoopbackTest, CancelStopsRunningTasksKeepingPartialResults) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult submit = Cli({"--server", address_, "submit", "-t", "cpu,cpu:python", "-b", "32", "--min-steps", "100000",
                          "--min-duration", "0"});
  ASSERT_EQ(submit.code, 0) << submit.err;
  // One CPU: the first task runs, the second waits; wait until the first has measured steps.
  ASSERT_TRUE(WaitUntilMeasuring(20));
  const absl::Time cancel_at = absl::Now();
  CliResult cancel = Cli({"--server", address_, "cancel", "job-000001"});
  ASSERT_EQ(cancel.code, 0) << cancel.err;
  v1::Job job;
  hetbench::testing::WaitFor(
      [&] {
        job = GetJob("job-000001");
        return job.tasks(0).state() == v1::TASK_STATE_CANCELLED;
      },
      absl::Seconds(30));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - cancel_at);
  ASSERT_EQ(job.tasks(0).state(), v1::TASK_STATE_CANCELLED);
  std::printf("cancel -> CANCELLED with results in %.3f s\n", seconds);
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job.tasks(1).state(), v1::TASK_STATE_CANCELLED);  // never started
  const v1::TaskResult& r = job.tasks(0).result();
  EXPECT_TRUE(r.partial());
  EXPECT_GE(r.samples_stored(), 20);
  EXPECT_LT(r.samples_stored(), 100000);  // stopped, not finished
  ASSERT_GE(r.phases_size(), 1);
  EXPECT_EQ(r.phases(0).stats().count(), r.samples_stored());
  CliResult report = Cli({"--server", address_, "report", "job-000001"});
  EXPECT_THAT(report.out, HasSubstr("job-000001-t0: cancelled PARTIAL: stopped before its end"));
}

// A job for a kind no agent has stays queued, saying why; `get agents`
// explains the absent kinds.
TEST_F(LoopbackTest, AJobForAnAbsentKindStaysPendingWithTheReason) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult submit = Cli({"--server", address_, "submit", "-t", "tpu", "-b", "32"});
  ASSERT_EQ(submit.code, 0) << submit.err;
  CliResult job = Cli({"--server", address_, "get", "job", "job-000001"});
  ASSERT_EQ(job.code, 0) << job.err;
  EXPECT_THAT(job.out, HasSubstr("queued"));
  EXPECT_THAT(
      job.out,
      HasSubstr("no connected agent offers a tpu device (loopback-agent: no /dev/accel* device, no Google (1ae0) PCI function"));
  CliResult agents = Cli({"--server", address_, "get", "agents"});
  ASSERT_EQ(agents.code, 0) << agents.err;
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("cpu0 +cpu .* torch,python"));
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("qpu0 +qpu-sim .* statevector"));
  EXPECT_THAT(agents.out, HasSubstr("not offered:"));
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("loopback-agent +tpu +no /dev/accel"));
  CliResult wide = Cli({"--server", address_, "get", "agents", "-o", "wide"});
  EXPECT_THAT(wide.out, HasSubstr("POWER_SENSORS"));
  EXPECT_THAT(wide.out, HasSubstr("DRIVER"));
  Cli({"--server", address_, "cancel", "job-000001"});
}

TEST_F(LoopbackTest, ShortJobRunsAndTheStoredSamplesAreExactlyTheSentOnes) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult r = Cli(ShortJob());
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"state\": \"JOB_STATE_SUCCEEDED\""));

  auto stored = server_->store().LoadSampleBatches("job-000001-t0", 1);
  ASSERT_TRUE(stored.ok());
  std::vector<v1::SampleBatch> sent;
  {
    absl::MutexLock l(&mu_);
    sent = sent_;
  }
  ASSERT_EQ(stored->size(), sent.size());
  int64_t train = 0, infer = 0;
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ((*stored)[i].SerializeAsString(), sent[i].SerializeAsString()) << "batch " << i;
    (sent[i].phase() == v1::PHASE_TRAIN ? train : infer) += sent[i].duration_ns_size();
  }
  EXPECT_EQ(train, 40);  // --min-steps 40 with --min-duration 0
  EXPECT_EQ(infer, 5);   // --infer-max-batches 5
  EXPECT_GT(sent.size(), 3u);

  CliResult report = Cli({"--server", address_, "report", "job-000001"});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_THAT(report.out, HasSubstr("train  40"));
  EXPECT_THAT(report.out, HasSubstr("infer  5"));
  EXPECT_THAT(report.out, HasSubstr("45 samples stored"));
  EXPECT_THAT(report.out, HasSubstr("phases: data load"));

  // The studies' timers are all there, and the measured ones match the windows.
  v1::Job job = GetJob("job-000001");
  const v1::TaskResult& result = job.tasks(0).result();
  EXPECT_GT(result.preprocess_seconds(), 0);
  EXPECT_GT(result.warmup_seconds(), 0);  // 2 warm-up steps and 2 warm-up inference batches
  EXPECT_GT(result.train_seconds(), 0);
  EXPECT_GT(result.evaluate_seconds(), 0);
  for (const v1::PhaseResult& p : result.phases()) {
    const double wall = p.phase() == v1::PHASE_TRAIN ? result.train_seconds() : result.evaluate_seconds();
    EXPECT_LE(p.stats().total_ns() * 1e-9, wall);  // busy step time fits in the phase's wall time
  }
}

// One submission over several models: a task per model, the studies' table
// per model, per-layer timings, FLOPs and the device's calibration.
TEST_F(LoopbackTest, OneSubmissionRunsSeveralModelsWithTheStudyTableAndLayers) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult r =
      Cli({"--server", address_, "submit", "--wait", "-m", "mlp,autoencoder,cnn", "-b", "32", "--warmup-steps", "1",
           "--min-steps", "4", "--min-duration", "0", "--infer-max-batches", "3", "--layers", "--layer-steps", "2"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  v1::Job job = GetJob("job-000001");
  ASSERT_EQ(job.tasks_size(), 3);
  EXPECT_EQ(job.tasks(0).model(), "mlp");
  EXPECT_EQ(job.tasks(1).model(), "autoencoder");
  EXPECT_EQ(job.tasks(2).model(), "cnn");
  EXPECT_EQ(job.spec().name(), "mlp+autoencoder+cnn");
  for (const v1::Task& t : job.tasks()) {
    EXPECT_EQ(t.state(), v1::TASK_STATE_SUCCEEDED) << t.id() << " " << t.error();
    EXPECT_THAT(t.result().environment().model_fingerprint(), HasSubstr(t.model() + "/params="));
    EXPECT_GT(t.result().forward_flops_per_sample(), 0) << t.model();
    EXPECT_EQ(t.result().calibration().gemm_size(), 256);
    EXPECT_GT(t.result().layers_size(), 0) << t.model();
  }
  EXPECT_EQ(job.tasks(2).result().layers_size(), 12);  // cnn's top-level layers
  EXPECT_THAT(r.out, HasSubstr("PEAK_GEMM_GFLOPS"));
  EXPECT_THAT(r.out, HasSubstr("kernel check: checked by the test fixture"));

  CliResult study = Cli({"--server", address_, "report", "job-000001", "--study"});
  ASSERT_EQ(study.code, 0) << study.err;
  EXPECT_THAT(study.out, HasSubstr("models mlp, autoencoder, cnn"));
  EXPECT_THAT(study.out, HasSubstr("TRAIN_VS_BASE"));
  EXPECT_THAT(study.out,
              ::testing::ContainsRegex("autoencoder +loopback-agent/cpu0 \\(cpu\\) +32 .* 100% +100% +mse 0\\."));

  CliResult layers = Cli({"--server", address_, "report", "job-000001", "--layers", "-o", "csv"});
  ASSERT_EQ(layers.code, 0) << layers.err;
  EXPECT_THAT(layers.out, HasSubstr("job-000001,job-000001-t2,cnn,loopback-agent,cpu0,cpu,32,3,\"Conv2d(32, 64"));

  CliResult bad = Cli({"--server", address_, "report", "job-000001", "--baseline", "abacus"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--baseline abacus: unknown device kind"));
}

// The qpu-sim device: the quantum variant trains through a normal job, the
// simulator benchmark times circuits, and classical models are refused there.
TEST_F(LoopbackTest, QpuSimRunsTheQuantumVariantAndTheSimulatorBenchmark) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult agents = Cli({"--server", address_, "get", "agents"});
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("loopback-agent +qpu0 +qpu-sim +hetbench state-vector simulator"));

  CliResult qnn = Cli({"--server", address_, "submit", "--wait", "-m", "qnn", "-t", "qpu-sim", "-b", "32",
                       "--warmup-steps", "1", "--min-steps", "20", "--min-duration", "0", "--infer-max-batches", "4"});
  ASSERT_EQ(qnn.code, 0) << qnn.err << qnn.out;
  EXPECT_THAT(qnn.out, HasSubstr("loopback-agent/qpu0 (qpu-sim)"));
  EXPECT_THAT(qnn.out, HasSubstr("[simulated: 8 qubits, complex128, 56 gates in 56 passes per circuit"));
  EXPECT_THAT(qnn.out, HasSubstr("gradients: adjoint"));
  v1::Job job = GetJob("job-000001");
  EXPECT_EQ(job.tasks(0).device_kind(), v1::DEVICE_KIND_QPU_SIM);
  EXPECT_GT(job.tasks(0).result().test_accuracy(), 0.2) << "20 steps already beat chance (0.1)";

  CliResult qsim = Cli({"--server", address_, "submit", "--wait", "-m", "qsim", "-t", "qpu-sim", "-b", "1", "-f",
                        std::string(HETBENCH_FIXTURES) + "/specs/qsim.yaml"});
  ASSERT_EQ(qsim.code, 0) << qsim.err << qsim.out;
  EXPECT_THAT(qsim.out, HasSubstr("layered circuit, 12 qubits, depth 4, complex64: 70 gates in"));
  EXPECT_THAT(qsim.out,
              ::testing::ContainsRegex("job-000002-t0 +qsim +loopback-agent/qpu0 \\(qpu-sim\\) +1 +infer +5 "));
  EXPECT_THAT(qsim.out, ::testing::ContainsRegex("\\[native backend, [A-Z0-9_]+ kernels\\]"));
  // The same circuit, fused, on the tensor backend (what a GPU-hosted qpu-sim runs), here on the CPU.
  CliResult tensor = Cli({"--server", address_, "submit", "--wait", "-b", "1", "-f",
                          std::string(HETBENCH_FIXTURES) + "/specs/qsim_tensor.yaml"});
  ASSERT_EQ(tensor.code, 0) << tensor.err << tensor.out;
  EXPECT_THAT(tensor.err, HasSubstr("notice: targets[0].executor: \"qsim\" is now spelled \"statevector\" (accepted)"));
  EXPECT_EQ(GetJob("job-000003").spec().targets(0).executor(), "statevector");
  // Fusion asked for; whether it pays is the cost model's measured call (close on some CPUs): the
  // label says which it made.
  EXPECT_THAT(tensor.out, ::testing::ContainsRegex("70 gates in [0-9]+ passes \\((un)?fused, tensor backend\\)"));
  EXPECT_THAT(tensor.out, ::testing::ContainsRegex("\\[tensor backend, blocks of <= [2-6] qubits\\]"));

  CliResult wrong = Cli({"--server", address_, "submit", "--wait", "-m", "mlp", "-t", "qpu-sim"});
  EXPECT_EQ(wrong.code, 1);
  EXPECT_THAT(wrong.out + wrong.err, HasSubstr("model \"mlp\" cannot run on the qpu-sim device qpu0; use qnn"));
}

TEST_F(LoopbackTest, EnergyIsModeledAndLabelledWithAnIdleBaselineAndCost) {
  ASSERT_TRUE(WaitForConnections(1));
  std::vector<std::string> args = ShortJob();
  for (const char* extra : {"--idle-baseline", "0.5", "--cost", "cpu=0.34", "--electricity-usd-per-kwh", "0.2"}) {
    args.push_back(extra);
  }
  CliResult r = Cli(args);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  v1::Job job = GetJob("job-000001");
  const v1::TaskResult& result = job.tasks(0).result();
  EXPECT_GT(result.power_readings_stored(), 5);
  std::set<v1::Phase> phases;
  for (const v1::EnergyResult& e : result.energy()) {
    EXPECT_EQ(e.source(), v1::POWER_SOURCE_MODELED);
    EXPECT_THAT(e.assumptions(), HasSubstr("MODELED, not measured"));
    EXPECT_GT(e.energy_joules(), 0);
    EXPECT_GT(e.coverage(), 0.5);
    phases.insert(e.phase());
  }
  EXPECT_EQ(phases, (std::set<v1::Phase>{v1::PHASE_UNSPECIFIED, v1::PHASE_TRAIN, v1::PHASE_INFER, v1::PHASE_IDLE}));
  ASSERT_GE(result.cost_size(), 1);
  EXPECT_EQ(result.cost(0).rate_source(), "job cost.usd_per_hour[cpu]");
  EXPECT_GT(result.cost(0).usd_per_1000_samples(), 0);
  EXPECT_GT(result.cost(0).electricity_usd(), 0);

  CliResult report = Cli({"--server", address_, "report", "job-000001"});
  EXPECT_THAT(report.out, HasSubstr("modeled*"));
  EXPECT_THAT(report.out, HasSubstr("* MODELED, not measured"));
  CliResult study = Cli({"--server", address_, "report", "job-000001", "--study"});
  EXPECT_THAT(study.out, HasSubstr("E=PxT_J is the study's method"));
}

TEST_F(LoopbackTest, BadSpecsAreRefusedWithTheFieldNamedAndNothingStored) {
  CliResult zero = Cli({"--server", address_, "submit", "-b", "0"});
  EXPECT_EQ(zero.code, 1);
  EXPECT_THAT(zero.err, HasSubstr("batch_sizes[0] = 0: must be >= 1"));
  CliResult model = Cli({"--server", address_, "submit", "--model", "resnet999"});
  EXPECT_EQ(model.code, 1);
  EXPECT_THAT(model.err, HasSubstr("model = \"resnet999\": unknown model"));
  CliResult file =
      Cli({"--server", address_, "submit", "-f", std::string(HETBENCH_FIXTURES) + "/specs/bad-batch.yaml"});
  EXPECT_EQ(file.code, 1);
  EXPECT_THAT(file.err, HasSubstr("batch_sizes[1] = 0"));
  CliResult usage = Cli({"--server", address_, "submit", "--no-such-flag"});
  EXPECT_EQ(usage.code, 2);
  CliResult list = Cli({"--server", address_, "get", "jobs", "-o", "csv"});
  EXPECT_EQ(list.code, 0);
  EXPECT_EQ(list.out, "id,name,model,state,tasks,created\n");  // nothing stored
  CliResult missing = Cli({"--server", address_, "report", "job-424242"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("not found"));
}

TEST_F(LoopbackTest, AgentReconnectsAfterTheCoordinatorRestartsAndTheNextJobRuns) {
  ASSERT_TRUE(WaitForConnections(1));
  const std::string listen = address_;
  server_->Shutdown(1.0);
  server_.reset();
  StartServer(listen);  // same port, same store
  ASSERT_TRUE(WaitForConnections(2));
  CliResult agents = Cli({"--server", address_, "get", "agents"});
  EXPECT_THAT(agents.out, HasSubstr("loopback-agent"));
  CliResult r = Cli(ShortJob());
  EXPECT_EQ(r.code, 0) << r.err;
}

// A coordinator restart in the middle of a task: the agent keeps training,
// reconnects to the new coordinator and resumes; nothing is re-run or lost.
TEST_F(LoopbackTest, ATaskRunningAcrossACoordinatorRestartIsResumedNotReRun) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult submit = SubmitExactJob(400, 10);
  ASSERT_EQ(submit.code, 0) << submit.err;
  ASSERT_TRUE(WaitUntilMeasuring(50));
  const std::string listen = address_;
  server_->Shutdown(1.0);
  server_.reset();
  StartServer(listen);  // same port, same store
  const v1::Job job = WaitUntilEnded(absl::Minutes(3));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << Describe(job.tasks(0));
  EXPECT_EQ(job.tasks(0).attempt(), 1);
  EXPECT_EQ(job.tasks(0).restarts(), 0);
  EXPECT_EQ(job.tasks(0).resumes(), 1);
  auto stored = server_->store().LoadSampleBatches("job-000001-t0", 1);
  ASSERT_TRUE(stored.ok());
  absl::MutexLock l(&mu_);
  ASSERT_EQ(stored->size(), sent_.size());
  for (size_t i = 0; i < sent_.size(); ++i) {
    EXPECT_EQ((*stored)[i].SerializeAsString(), sent_[i].SerializeAsString()) << "batch " << i;
  }
  EXPECT_EQ(job.tasks(0).result().samples_stored(), 410);
}

// GetJob answers a page of tasks at a time (default 256) with a token for
// the next; the CLI reads every page. Tasks wait for a gpu this host lacks.
TEST_F(LoopbackTest, GetJobPagesTasksAndTheCliReadsEveryPage) {
  auto stub = v1::Coordinator::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->add_models("mlp");
  for (int b = 1; b <= 64; ++b) submit.mutable_spec()->add_batch_sizes(b);
  for (int t = 0; t < 5; ++t) submit.mutable_spec()->add_targets()->set_device_kind(v1::DEVICE_KIND_GPU);
  v1::SubmitJobResponse submitted;
  grpc::ClientContext sctx;
  ASSERT_TRUE(stub->SubmitJob(&sctx, submit, &submitted).ok());

  v1::GetJobRequest req;
  req.set_job_id(submitted.job_id());
  req.set_task_page_size(100);
  req.set_view(v1::JOB_VIEW_SUMMARY);
  std::vector<int> indexes, page_sizes;
  do {
    grpc::ClientContext ctx;
    v1::Job page;
    grpc::Status s = stub->GetJob(&ctx, req, &page);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(page.id(), submitted.job_id());
    page_sizes.push_back(page.tasks_size());
    for (const v1::Task& t : page.tasks()) {
      indexes.push_back(t.index());
      EXPECT_FALSE(t.has_result());
      EXPECT_FALSE(t.pending_reason().empty());
    }
    req.set_task_page_token(page.next_task_page_token());
  } while (!req.task_page_token().empty());
  EXPECT_EQ(page_sizes, (std::vector<int>{100, 100, 100, 20}));
  ASSERT_EQ(indexes.size(), 320u);
  for (int i = 0; i < 320; ++i) EXPECT_EQ(indexes[i], i);

  req.set_task_page_token("not-a-token");
  grpc::ClientContext bad;
  v1::Job ignored;
  grpc::Status refused = stub->GetJob(&bad, req, &ignored);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("task_page_token"));

  CliResult r = Cli({"--server", address_, "get", "job", submitted.job_id(), "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  size_t tasks = 0;
  for (size_t at = r.out.find(submitted.job_id() + "-t"); at != std::string::npos;
       at = r.out.find(submitted.job_id() + "-t", at + 1)) {
    ++tasks;
  }
  EXPECT_GE(tasks, 320u) << "every page of tasks is in the CLI's job";
}

TEST_F(LoopbackTest, HealthServiceAnswersServing) {
  CliResult r = Cli({"--server", address_, "health"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = Cli({"--server", address_, "health", "-o", "json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"status\": \"SERVING\"}\n");
}

TEST_F(LoopbackTest, EveryCommandAnswersAnOutputFormatItLacksByNameNeverWithAParserError) {
  for (std::vector<std::string> args : {std::vector<std::string>{"cancel", "job-000001", "-o", "csv"},
                                        {"watch", "job-000001", "-o", "yaml"}, {"health", "-o", "csv"}}) {
    std::vector<std::string> full = {"--server", address_};
    full.insert(full.end(), args.begin(), args.end());
    const CliResult r = Cli(full);
    EXPECT_EQ(r.code, 2) << args[0];
    EXPECT_THAT(r.err, HasSubstr(": not a format of this view; use table, json")) << r.err;
  }
  // submit prints its report's format only when it waits for the report.
  const CliResult r = Cli({"--server", address_, "submit", "-o", "csv"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("submit -o csv: the report's format, printed only with --wait or --follow"));
}

// An oversized request is refused by gRPC's size limit, a malformed one by
// the parser, and the coordinator keeps serving.
TEST_F(LoopbackTest, OversizedAndMalformedMessagesAreRefusedAndTheServerGoesOn) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Coordinator::NewStub(channel);
  v1::SubmitJobRequest big;
  big.mutable_spec()->set_name(std::string(20 << 20, 'x'));  // 20 MiB, over the 16 MiB limit
  v1::SubmitJobResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->SubmitJob(&ctx, big, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();

  // Bytes that are no SubmitJobRequest, sent through the generic stub.
  grpc::GenericStub generic(channel);
  grpc::ClientContext gctx;
  const char garbage[] = "\xff\xff\xff\xff\x0f not a protobuf";
  grpc::Slice slice(garbage, sizeof(garbage) - 1);
  grpc::ByteBuffer request(&slice, 1), reply;
  absl::Notification done;
  grpc::Status gs;
  generic.UnaryCall(&gctx, "/hetbench.v1.Coordinator/SubmitJob", grpc::StubOptions(), &request, &reply,
                    [&](grpc::Status st) {
                      gs = st;
                      done.Notify();
                    });
  done.WaitForNotification();
  EXPECT_FALSE(gs.ok());
  EXPECT_THAT(Cli({"--server", address_, "get", "job", "job-000001"}).err, HasSubstr("not found"));  // nothing stored
  CliResult health = Cli({"--server", address_, "health"});
  EXPECT_EQ(health.out, "SERVING\n");
  CliResult jobs = Cli({"--server", address_, "get", "jobs"});
  EXPECT_EQ(jobs.code, 0) << jobs.err;
}

}  // namespace
}  // namespace hetbench::loopback_testing
