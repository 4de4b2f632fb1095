#include "common/coordinator_target.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hetbench {
namespace {

// "host:port" or "[v6]:port" -> (host, port).
bool SplitHostPort(const std::string& entry, std::string* host, std::string* port) {
  if (!entry.empty() && entry[0] == '[') {
    const size_t close = entry.find(']');
    if (close == std::string::npos || close + 1 >= entry.size() || entry[close + 1] != ':') return false;
    *host = entry.substr(1, close - 1);
    *port = entry.substr(close + 2);
  } else {
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos) return false;
    *host = entry.substr(0, colon);
    *port = entry.substr(colon + 1);
  }
  return !host->empty() && !port->empty();
}

}  // namespace

absl::StatusOr<CoordinatorTarget> ResolveCoordinatorTarget(const std::string& servers) {
  if (servers.find(',') == std::string::npos) return CoordinatorTarget{servers, false};
  std::vector<std::string> v4, v6;
  for (absl::string_view raw : absl::StrSplit(servers, ',')) {
    const std::string entry(absl::StripAsciiWhitespace(raw));
    std::string host, port;
    if (!SplitHostPort(entry, &host, &port)) {
      return absl::InvalidArgumentError(absl::StrCat("server address '", entry, "' in '", servers,
                                                     "': write HOST:PORT, comma-separated for a leader and standbys"));
    }
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      return absl::UnavailableError(
          absl::StrCat("server address '", entry, "': cannot resolve '", host, "': ", gai_strerror(rc)));
    }
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      if (a->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof(text));
        v4.push_back(absl::StrCat(text, ":", port));
      } else if (a->ai_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text, sizeof(text));
        v6.push_back(absl::StrCat("[", text, "]:", port));
      }
      break;  // one address per entry
    }
    freeaddrinfo(found);
  }
  // A target has one scheme: IPv4 when every entry has an IPv4 address.
  if (!v4.empty() && v6.empty()) return CoordinatorTarget{absl::StrCat("ipv4:", absl::StrJoin(v4, ",")), true};
  if (v4.empty() && !v6.empty()) return CoordinatorTarget{absl::StrCat("ipv6:", absl::StrJoin(v6, ",")), true};
  return absl::InvalidArgumentError(
      absl::StrCat("server addresses '", servers, "' mix IPv4 and IPv6; list addresses of one family"));
}

void AddCoordinatorTargetArguments(const std::string& servers, const CoordinatorTarget& target,
                                   grpc::ChannelArguments* args) {
  if (!target.several) return;
  args->SetServiceConfigJSON(
      R"({"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}})");
  args->SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args->SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args->SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  const std::string first(absl::StripAsciiWhitespace(servers.substr(0, servers.find(','))));
  args->SetString(GRPC_ARG_DEFAULT_AUTHORITY, first);
}

}  // namespace hetbench
