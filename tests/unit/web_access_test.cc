// Who may read the web UI (server/http/web_access.h): its names (the DNS
// rebinding guard), the origin of posted forms, tokens and session cookies.
#include "server/http/web_access.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetbench::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kClient[] = "client-token-0123456789";
constexpr char kAgent[] = "agent-token-0123456789";

Authorizer WithTokens() {
  auto table = TokenTable::Parse(absl::StrCat("client ", kClient, "\nagent ", kAgent, "\n"), "test");
  EXPECT_TRUE(table.ok()) << table.status();
  return Authorizer(*std::move(table), false);
}

TEST(WebAccessTest, OnlyItsOwnNamesAreServed) {
  Authorizer open;
  WebAccess access({"127.0.0.1", 8080, {"bench.lab", "proxy.lab:443"}, false}, &open);
  for (const char* ok : {"127.0.0.1:8080", "127.0.0.1", "localhost:8080", "LOCALHOST:8080", "[::1]:8080",
                         "bench.lab:8080", "bench.lab", "proxy.lab:443"}) {
    EXPECT_TRUE(access.HostAllowed(ok)) << ok;
  }
  for (const char* bad : {"", "evil.example", "evil.example:8080", "127.0.0.1:9999", "bench.lab:81", "proxy.lab",
                          "127.0.0.1.evil.example:8080", "localhost.:8080"}) {
    EXPECT_FALSE(access.HostAllowed(bad)) << bad;
  }
  WebAccess any({"0.0.0.0", 8080, {}, false}, &open);
  EXPECT_FALSE(any.HostAllowed("0.0.0.0:8080")) << "the wildcard is not a name";
  EXPECT_TRUE(any.HostAllowed("localhost:8080"));
}

TEST(WebAccessTest, AFormPostedFromAnotherOriginIsNotItsOwn) {
  Authorizer open;
  WebAccess access({"127.0.0.1", 8080, {}, false}, &open);
  EXPECT_TRUE(access.OriginAllowed(""));
  EXPECT_TRUE(access.OriginAllowed("http://127.0.0.1:8080"));
  EXPECT_TRUE(access.OriginAllowed("https://localhost:8080"));
  EXPECT_FALSE(access.OriginAllowed("https://evil.example"));
  EXPECT_FALSE(access.OriginAllowed("null"));
}

TEST(WebAccessTest, WithoutTokensEveryRequestIsLetIn) {
  Authorizer open;
  WebAccess access({"127.0.0.1", 8080, {}, false}, &open);
  EXPECT_TRUE(access.Check("", "", absl::Now()).ok());
}

TEST(WebAccessTest, ABrowserLogsInOnceAndKeepsASessionNotTheToken) {
  const Authorizer auth = WithTokens();
  WebAccess access({"127.0.0.1", 8080, {}, /*tls=*/true, absl::Hours(1)}, &auth);
  const absl::Time t0 = absl::FromUnixSeconds(1'000'000);
  EXPECT_EQ(access.Check("", "", t0).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(access.Check("", "", t0).error_message(), HasSubstr("log in at /login"));
  EXPECT_TRUE(access.Check(absl::StrCat("Bearer ", kClient), "", t0).ok());
  EXPECT_EQ(access.Check(absl::StrCat("Bearer ", kAgent), "", t0).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  EXPECT_EQ(access.Login("not-a-token-at-all-xx", t0).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(access.Login(kAgent, t0).status().code(), absl::StatusCode::kPermissionDenied);
  auto id = access.Login(kClient, t0);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->size(), 64u);
  EXPECT_THAT(*id, Not(HasSubstr(kClient)));
  EXPECT_NE(*access.Login(kClient, t0), *id) << "each login its own session";
  const std::string cookie = absl::StrCat("theme=dark; ", WebAccess::kCookie, "=", *id);
  EXPECT_TRUE(access.Check("", cookie, t0 + absl::Minutes(59)).ok());
  EXPECT_FALSE(access.Check("", absl::StrCat(WebAccess::kCookie, "=", std::string(64, 'a')), t0).ok());
  EXPECT_THAT(access.Check("", cookie, t0 + absl::Minutes(61)).error_message(), HasSubstr("the session has ended"));
  auto again = access.Login(kClient, t0);
  const std::string cookie2 = absl::StrCat(WebAccess::kCookie, "=", *again);
  EXPECT_TRUE(access.Check("", cookie2, t0).ok());
  access.Logout(cookie2);
  EXPECT_FALSE(access.Check("", cookie2, t0).ok());

  const std::string set = access.SessionCookie(*again);
  EXPECT_THAT(set, HasSubstr("HttpOnly"));
  EXPECT_THAT(set, HasSubstr("SameSite=Strict"));
  EXPECT_THAT(set, HasSubstr("; Secure"));
  EXPECT_THAT(set, HasSubstr("Max-Age=3600"));
  WebAccess plain({"127.0.0.1", 8080, {}, /*tls=*/false}, &auth);
  EXPECT_THAT(plain.SessionCookie("x"), Not(HasSubstr("Secure")));
  EXPECT_THAT(plain.ClearedCookie(), HasSubstr("Max-Age=0"));
}

}  // namespace
}  // namespace hetbench::server
