// Renders every Kubernetes overlay with `kubectl kustomize` (offline) and
// checks what operators rely on: node selectors, tolerations and extended
// resources per node kind, probes on grpc.health.v1, the store volume, the
// ServiceMonitor's release label, namespaces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

std::string Run(const std::string& command, int* status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

std::vector<YAML::Node> Render(const std::string& overlay) {
  int status = -1;
  const std::string out =
      Run("kubectl kustomize " + std::string(HETBENCH_DEPLOY) + "/kubernetes/overlays/" + overlay + " 2>/dev/null",
          &status);
  EXPECT_EQ(status, 0) << "kubectl kustomize " << overlay << " failed";
  return YAML::LoadAll(out);
}

std::map<std::string, YAML::Node> ByKindAndName(const std::vector<YAML::Node>& docs) {
  std::map<std::string, YAML::Node> out;
  for (const YAML::Node& d : docs) out[d["kind"].as<std::string>() + "/" + d["metadata"]["name"].as<std::string>()] = d;
  return out;
}

bool HasToleration(const YAML::Node& pod_spec, const std::string& key) {
  for (const YAML::Node& t : pod_spec["tolerations"]) {
    if (t["key"].as<std::string>() == key && t["operator"].as<std::string>() == "Exists") return true;
  }
  return false;
}

TEST(KustomizeTest, FleetOverlayPlacesEachAgentKindWithTheEcosystemsSelectors) {
  auto objects = ByKindAndName(Render("fleet"));
  for (const char* kind : {"cpu", "gpu", "tpu", "dpu", "qpu-sim"}) {
    ASSERT_TRUE(objects.count(std::string("DaemonSet/hetbench-agent-") + kind)) << kind;
  }
  const YAML::Node gpu = objects["DaemonSet/hetbench-agent-gpu"]["spec"]["template"]["spec"];
  EXPECT_EQ(gpu["nodeSelector"]["nvidia.com/gpu.present"].as<std::string>(), "true");
  EXPECT_TRUE(HasToleration(gpu, "nvidia.com/gpu"));
  EXPECT_EQ(gpu["containers"][0]["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 1);

  const YAML::Node tpu = objects["DaemonSet/hetbench-agent-tpu"]["spec"]["template"]["spec"];
  const YAML::Node term =
      tpu["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0];
  EXPECT_EQ(term["matchExpressions"][0]["key"].as<std::string>(), "cloud.google.com/gke-tpu-accelerator");
  EXPECT_EQ(term["matchExpressions"][0]["operator"].as<std::string>(), "Exists");
  EXPECT_TRUE(HasToleration(tpu, "google.com/tpu"));
  EXPECT_GE(tpu["containers"][0]["resources"]["limits"]["google.com/tpu"].as<int>(), 1);

  const YAML::Node dpu = objects["DaemonSet/hetbench-agent-dpu"]["spec"]["template"]["spec"];
  EXPECT_EQ(dpu["nodeSelector"]["kubernetes.io/arch"].as<std::string>(), "arm64");
  EXPECT_EQ(dpu["nodeSelector"]["hetbench.io/dpu"].as<std::string>(), "bluefield");

  const YAML::Node qpu = objects["DaemonSet/hetbench-agent-qpu-sim"]["spec"]["template"]["spec"];
  EXPECT_EQ(qpu["nodeSelector"]["hetbench.io/qpu-sim"].as<std::string>(), "true");

  EXPECT_EQ(objects["ServiceMonitor/hetbench-coordinator"]["metadata"]["labels"]["release"].as<std::string>(),
            "prometheus");
}

TEST(KustomizeTest, EveryWorkloadRequestsResourcesAndDialsTheCoordinator) {
  for (const char* overlay : {"cpu-only", "fleet", "ha"}) {
    for (const YAML::Node& d : Render(overlay)) {
      const std::string kind = d["kind"].as<std::string>();
      if (kind != "Namespace") {
        EXPECT_EQ(d["metadata"]["namespace"].as<std::string>(), "hetbench") << kind;
        EXPECT_EQ(d["metadata"]["labels"]["app.kubernetes.io/part-of"].as<std::string>(), "hetbench") << kind;
      }
      if (kind != "DaemonSet" && kind != "StatefulSet") continue;
      const YAML::Node pod = d["spec"]["template"]["spec"];
      for (const YAML::Node& c : pod["containers"]) {
        EXPECT_TRUE(c["resources"]["requests"]["cpu"]) << d["metadata"]["name"];
        EXPECT_TRUE(c["resources"]["requests"]["memory"]) << d["metadata"]["name"];
      }
      // The selector must match the template's labels, or the controller rejects it.
      for (const auto& kv : d["spec"]["selector"]["matchLabels"]) {
        EXPECT_EQ(d["spec"]["template"]["metadata"]["labels"][kv.first.as<std::string>()].as<std::string>(),
                  kv.second.as<std::string>());
      }
      if (kind == "DaemonSet") {
        EXPECT_EQ(pod["containers"][0]["env"][0]["name"].as<std::string>(), "HETBENCH_SERVER");
        EXPECT_EQ(pod["containers"][0]["env"][0]["value"].as<std::string>(), "hetbench-coordinator:50051");
      }
    }
  }
}

TEST(KustomizeTest, CoordinatorKeepsItsStoreAndIsProbedOverGrpcHealth) {
  auto objects = ByKindAndName(Render("cpu-only"));
  const YAML::Node sts = objects["StatefulSet/hetbench-coordinator"];
  ASSERT_TRUE(sts) << "no coordinator StatefulSet";
  EXPECT_EQ(sts["spec"]["replicas"].as<int>(), 1);
  EXPECT_EQ(sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"].as<std::string>(), "store");
  const YAML::Node c = sts["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["readinessProbe"]["grpc"]["port"].as<int>(), 50051);
  EXPECT_EQ(c["livenessProbe"]["grpc"]["port"].as<int>(), 50051);
  EXPECT_THAT(c["args"][2].as<std::string>(), ::testing::HasSubstr("/var/lib/hetbench/jobs.db"));
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"].as<std::string>(), "/var/lib/hetbench");
  const YAML::Node svc = objects["Service/hetbench-coordinator"];
  EXPECT_EQ(svc["spec"]["ports"][0]["port"].as<int>(), 50051);
  EXPECT_EQ(svc["spec"]["ports"][1]["name"].as<std::string>(), "metrics");
  EXPECT_EQ(objects["ServiceMonitor/hetbench-coordinator"]["metadata"]["labels"]["release"].as<std::string>(),
            "kube-prometheus-stack");
  EXPECT_EQ(objects["Secret/hetbench-tls"]["type"].as<std::string>(), "kubernetes.io/tls");
}

// Two coordinators on PostgreSQL: ready means leader (grpc.health.v1 is
// SERVING on the leader only), alive means the port answers (a standby is
// NOT_SERVING and must live), the URL comes from a Secret, no volume.
TEST(KustomizeTest, HaOverlayRunsALeaderAndAStandbyOnPostgres) {
  auto objects = ByKindAndName(Render("ha"));
  const YAML::Node sts = objects["StatefulSet/hetbench-coordinator"];
  ASSERT_TRUE(sts) << "no coordinator StatefulSet";
  EXPECT_EQ(sts["spec"]["replicas"].as<int>(), 2);
  EXPECT_EQ(sts["spec"]["podManagementPolicy"].as<std::string>(), "Parallel");
  EXPECT_FALSE(sts["spec"]["volumeClaimTemplates"]);
  const YAML::Node c = sts["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["readinessProbe"]["grpc"]["port"].as<int>(), 50051);
  EXPECT_FALSE(c["livenessProbe"]["grpc"]);
  EXPECT_EQ(c["livenessProbe"]["tcpSocket"]["port"].as<int>(), 50051);
  std::vector<std::string> args;
  for (const YAML::Node& a : c["args"]) args.push_back(a.as<std::string>());
  EXPECT_THAT(args, ::testing::Contains("--db=$(HETBENCH_DB)"));
  EXPECT_EQ(c["env"][0]["name"].as<std::string>(), "HETBENCH_DB");
  EXPECT_EQ(c["env"][0]["valueFrom"]["secretKeyRef"]["name"].as<std::string>(), "hetbench-postgres");
  EXPECT_EQ(c["env"][0]["valueFrom"]["secretKeyRef"]["key"].as<std::string>(), "url");
  for (const YAML::Node& m : c["volumeMounts"]) EXPECT_NE(m["mountPath"].as<std::string>(), "/var/lib/hetbench");
  const YAML::Node secret = objects["Secret/hetbench-postgres"];
  ASSERT_TRUE(secret);
  EXPECT_THAT(secret["stringData"]["url"].as<std::string>(), ::testing::StartsWith("postgresql://"));
  EXPECT_EQ(secret["metadata"]["namespace"].as<std::string>(), "hetbench");
}

}  // namespace
