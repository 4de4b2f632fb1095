// TLS, mutual TLS for agents and bearer tokens with roles, against an
// in-process coordinator: who gets in, who does not, and what they are told.
#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "client/cli.h"
#include "common/security.h"
#include "hetbench/v1/agent.grpc.pb.h"
#include "server/server.h"
#include "tests/testing/run_cli.h"
#include "tests/testing/temp_dir.h"

namespace hetbench {
namespace {

using ::testing::HasSubstr;

constexpr char kAgentToken[] = "agent-token-0123456789abcdef";
constexpr char kClientToken[] = "client-token-0123456789abcdef";

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A CA, a server certificate for 127.0.0.1, an agent certificate, and a
// rogue CA with its own "agent" certificate, made with the openssl tool.
void MakePki(const std::string& d) {
  Write(d + "/san.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; cd '" + d + "'; "
      "openssl req -x509 " + key + " -keyout ca.key -out ca.pem -days 2 -subj /CN=hetbench-test-ca 2>/dev/null; "
      "openssl req -x509 " + key + " -keyout rogue-ca.key -out rogue-ca.pem -days 2 -subj /CN=rogue 2>/dev/null; "
      "openssl req " + key + " -keyout server.key -out server.csr -subj /CN=coordinator 2>/dev/null; "
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
      "-extfile san.ext 2>/dev/null; "
      "openssl req " + key + " -keyout agent.key -out agent.csr -subj /CN=agent-1 2>/dev/null; "
      "openssl x509 -req -in agent.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out agent.pem -days 2 2>/dev/null; "
      "openssl req " + key + " -keyout rogue.key -out rogue.csr -subj /CN=agent-1 2>/dev/null; "
      "openssl x509 -req -in rogue.csr -CA rogue-ca.pem -CAkey rogue-ca.key -CAcreateserial -out rogue.pem "
      "-days 2 2>/dev/null";
  ASSERT_EQ(std::system(("/bin/sh -c \"" + script + "\"").c_str()), 0) << "openssl failed";
  Write(d + "/tokens", std::string("# role token\nagent ") + kAgentToken + "\nclient " + kClientToken + "\n");
  Write(d + "/agent.tok", std::string(kAgentToken) + "\n");
  Write(d + "/client.tok", std::string(kClientToken) + "\n");
  Write(d + "/unknown.tok", "not-a-known-token-000000000000\n");
}

using testing::Cli;
using testing::CliResult;

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MakePki(dir_.path());
    server::ServerConfig config;
    config.listen_address = "127.0.0.1:0";
    config.metrics_address = "";
    config.db_path = dir_.path() + "/jobs.db";
    config.security.tls_cert = P("server.pem");
    config.security.tls_key = P("server.key");
    config.security.tls_client_ca = P("ca.pem");
    config.security.require_agent_cert = true;
    config.security.token_file = P("tokens");
    server_ = std::make_unique<server::HetbenchServer>(config);
    absl::Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s;
    address_ = "127.0.0.1:" + std::to_string(server_->grpc_port());
  }
  void TearDown() override { server_->Shutdown(0.5); }

  std::string P(const std::string& name) const { return dir_.path() + "/" + name; }

  CliResult ListJobs(std::vector<std::string> flags) {
    std::vector<std::string> args = {"--server", address_, "--timeout", "5"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"get", "jobs"});
    return Cli(args);
  }

  // Opens Connect, says Hello and reads one reply: OK when welcomed, else the status the stream ended with.
  grpc::Status Connect(const ClientSecurity& sec, const std::string& token) {
    auto creds = MakeChannelCredentials(sec);
    EXPECT_TRUE(creds.ok()) << creds.status();
    auto stub = v1::AgentGateway::NewStub(grpc::CreateChannel(address_, *creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    AddToken(&ctx, token);
    auto stream = stub->Connect(&ctx);
    v1::AgentMessage hello;
    hello.mutable_hello()->set_agent_id("agent-1");
    stream->Write(hello);
    v1::CoordinatorMessage reply;
    const bool welcomed = stream->Read(&reply) && reply.has_welcome();
    if (welcomed) ctx.TryCancel();  // else the stream already ended with the refusal
    grpc::Status s = stream->Finish();
    return welcomed ? grpc::Status::OK : s;
  }

  ClientSecurity AgentTls(const std::string& cert = "agent") const {
    ClientSecurity s;
    s.tls_ca = P("ca.pem");
    if (!cert.empty()) {
      s.tls_cert = P(cert + ".pem");
      s.tls_key = P(cert + ".key");
    }
    return s;
  }

  testing::TempDir dir_{"hetbench-sec"};
  std::unique_ptr<server::HetbenchServer> server_;
  std::string address_;
};

TEST_F(SecurityTest, AClientWithTheCaAndAClientTokenIsServed) {
  CliResult r = ListJobs({"--tls-ca", P("ca.pem"), "--token-file", P("client.tok")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ID"));
}

TEST_F(SecurityTest, PlaintextAndWrongCaClientsAreRefused) {
  CliResult plain = ListJobs({"--token-file", P("client.tok")});
  EXPECT_EQ(plain.code, 1);
  EXPECT_THAT(plain.err, HasSubstr("cannot reach the coordinator"));
  CliResult rogue = ListJobs({"--tls-ca", P("rogue-ca.pem"), "--token-file", P("client.tok")});
  EXPECT_EQ(rogue.code, 1);
  EXPECT_THAT(rogue.err, HasSubstr("cannot reach the coordinator"));
}

TEST_F(SecurityTest, MissingUnknownAndWrongRoleTokensAreRefused) {
  CliResult none = ListJobs({"--tls-ca", P("ca.pem")});
  EXPECT_EQ(none.code, 1);
  EXPECT_THAT(none.err, HasSubstr("no bearer token"));
  CliResult unknown = ListJobs({"--tls-ca", P("ca.pem"), "--token-file", P("unknown.tok")});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("unknown bearer token"));
  EXPECT_THAT(unknown.err, ::testing::Not(HasSubstr("not-a-known-token")));  // never echoed back
  CliResult agent = ListJobs({"--tls-ca", P("ca.pem"), "--token-file", P("agent.tok")});
  EXPECT_EQ(agent.code, 1);
  EXPECT_THAT(agent.err, HasSubstr("a token of role agent may not call the client API"));
  // Submitting (a write) is refused the same way, and nothing is stored.
  CliResult submit = Cli({"--server", address_, "--tls-ca", P("ca.pem"), "--token-file", P("agent.tok"), "submit"});
  EXPECT_EQ(submit.code, 1);
  CliResult jobs = ListJobs({"--tls-ca", P("ca.pem"), "--token-file", P("client.tok")});
  EXPECT_THAT(jobs.out, ::testing::Not(HasSubstr("job-000001")));
}

TEST_F(SecurityTest, AgentsNeedTheirCertificateAndAnAgentToken) {
  EXPECT_TRUE(Connect(AgentTls(), kAgentToken).ok());
  grpc::Status no_cert = Connect(AgentTls(""), kAgentToken);
  EXPECT_EQ(no_cert.error_code(), grpc::StatusCode::UNAUTHENTICATED) << no_cert.error_message();
  EXPECT_THAT(no_cert.error_message(), HasSubstr("client certificate"));
  grpc::Status rogue_cert = Connect(AgentTls("rogue"), kAgentToken);  // signed by another CA: no handshake
  EXPECT_EQ(rogue_cert.error_code(), grpc::StatusCode::UNAVAILABLE) << rogue_cert.error_message();
  grpc::Status client_token = Connect(AgentTls(), kClientToken);
  EXPECT_EQ(client_token.error_code(), grpc::StatusCode::PERMISSION_DENIED) << client_token.error_message();
  grpc::Status no_token = Connect(AgentTls(), "");
  EXPECT_EQ(no_token.error_code(), grpc::StatusCode::UNAUTHENTICATED) << no_token.error_message();
}

TEST(SecurityConfigTest, BadConfigurationIsRefusedWithTheFlagToFix) {
  ServerSecurity only_cert;
  only_cert.tls_cert = "/x.pem";
  EXPECT_THAT(std::string(MakeServerCredentials(only_cert).status().message()), HasSubstr("--tls-key"));
  ServerSecurity mtls_plain;
  mtls_plain.require_agent_cert = true;
  EXPECT_THAT(std::string(MakeServerCredentials(mtls_plain).status().message()), HasSubstr("need TLS"));
  ClientSecurity missing;
  missing.tls_ca = "/nonexistent/ca.pem";
  EXPECT_THAT(std::string(MakeChannelCredentials(missing).status().message()),
              HasSubstr("--tls-ca /nonexistent/ca.pem: cannot be read"));
}

TEST(TokenTableTest, ParsesRolesAndRefusesBadLinesByLineNumber) {
  auto t = TokenTable::Parse("# comment\n\nagent aaaaaaaaaaaaaaaa\nclient bbbbbbbbbbbbbbbb\n", "tokens");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->count(Role::kAgent), 1u);
  EXPECT_EQ(*t->RoleOf("Bearer bbbbbbbbbbbbbbbb"), Role::kClient);
  EXPECT_FALSE(t->RoleOf("bbbbbbbbbbbbbbbb").ok());  // not "Bearer ..."
  EXPECT_THAT(std::string(TokenTable::Parse("agent short\n", "f").status().message()),
              HasSubstr("f:1: token shorter than 16"));
  EXPECT_THAT(std::string(TokenTable::Parse("\nadmin aaaaaaaaaaaaaaaa\n", "f").status().message()),
              HasSubstr("f:2: role \"admin\" is unknown"));
  EXPECT_THAT(std::string(TokenTable::Parse("agent aaaaaaaaaaaaaaaa\nclient aaaaaaaaaaaaaaaa\n", "f").status().message()),
              HasSubstr("f:2: token repeats"));
  auto refused = TokenTable::Parse("agent aaaaaaaaaaaaaaaa\n", "f")->RoleOf("Bearer secret-guess-1234567");
  EXPECT_THAT(std::string(refused.status().message()), ::testing::Not(HasSubstr("secret-guess")));
}

}  // namespace
}  // namespace hetbench
