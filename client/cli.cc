#include "client/cli.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <sstream>

#include "absl/strings/str_join.h"
#include "client/commands/command.h"
#include "common/coordinator_target.h"
#include "common/names.h"

namespace hetbench::client {

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  Common common;
  if (const char* env = std::getenv("HETBENCH_SERVER"); env != nullptr && *env) common.server = env;
  CLI::App app{"hetbench: benchmark one model across CPUs, GPUs, TPUs, DPUs and QPU simulators"};
  app.set_version_flag("--version", HetbenchVersion());
  app.require_subcommand(1);
  app.add_option("--server", common.server,
                 "coordinator address, or a comma-separated list of a leader and its standbys (or HETBENCH_SERVER)")
      ->capture_default_str();
  app.add_option("--tls-ca", common.security.tls_ca, "the coordinator's CA (PEM): use TLS")->envname("HETBENCH_TLS_CA");
  app.add_option("--token-file", common.security.token_file, "file holding this client's bearer token")
      ->envname("HETBENCH_TOKEN_FILE");
  app.add_option("--timeout", common.timeout_seconds, "deadline of each request, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  std::vector<std::unique_ptr<Command>> commands = AllCommands();
  std::vector<CLI::App*> subs;
  for (auto& c : commands) subs.push_back(c->Add(app, common));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream o, e2;
    const int code = app.exit(e, o, e2);
    out << o.str();
    err << e2.str();
    return code == 0 ? kExitOk : kExitUsage;
  }
  Command* chosen = nullptr;
  for (size_t i = 0; i < commands.size(); ++i) {
    if (subs[i]->parsed()) chosen = commands[i].get();
  }
  if (chosen == nullptr) {
    err << app.help();
    return kExitUsage;
  }
  auto format = ParseOutputFormat(common.output);
  if (!format.ok()) {
    err << "hetbench: " << format.status().message() << "\n";
    return kExitUsage;
  }
  // Every view names the formats it has: another is refused, never ignored.
  const std::vector<std::string> formats = chosen->Formats();
  if (std::find(formats.begin(), formats.end(), common.output) == formats.end()) {
    err << "hetbench: " << chosen->View() << " -o " << common.output << ": not a format of this view; use "
        << absl::StrJoin(formats, ", ") << "\n";
    return kExitUsage;
  }

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto credentials = MakeChannelCredentials(common.security);
  auto token = LoadCallerToken(common.security.token_file);
  if (!credentials.ok() || !token.ok()) {
    err << "hetbench: " << (credentials.ok() ? token.status() : credentials.status()).message() << "\n";
    return kExitUsage;
  }
  common.token = *token;
  auto target = ResolveCoordinatorTarget(common.server);
  if (!target.ok()) {
    err << "hetbench: --server: " << target.status().message() << "\n";
    return kExitUsage;
  }
  AddCoordinatorTargetArguments(common.server, *target, &args);
  auto channel = grpc::CreateCustomChannel(target->target, *credentials, args);
  auto stub = v1::Coordinator::NewStub(channel);
  Context ctx{common, channel, *stub, *format, out, err};
  return chosen->Run(ctx);
}

}  // namespace hetbench::client
