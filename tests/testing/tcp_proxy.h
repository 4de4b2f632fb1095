#pragma once
/// A loopback TCP proxy for fault tests: forwards every connection made to
/// 127.0.0.1:port() to 127.0.0.1:upstream_port, and cuts them all on demand.
/// A cut shuts both sockets of every open connection at once, so bytes in
/// flight (in the proxy or in kernel buffers) are lost, as on a broken link.
/// It can also swallow what clients send while passing replies on: a link
/// that looks alive to the client while the server hears nothing.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <stdexcept>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace hetbench::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 16) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("tcp proxy: cannot listen on 127.0.0.1");
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~TcpProxy() {
    stop_ = true;
    acceptor_.join();
    CutAll();
    // Forwarders end once their sockets are shut.
    for (;;) {
      {
        absl::MutexLock l(&mu_);
        if (live_ == 0) break;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    absl::MutexLock l(&mu_);
    for (Link& link : links_) link.thread.join();
    close(listen_fd_);
  }

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  /// Cuts every open connection; returns how many there were.
  int CutAll() {
    absl::MutexLock l(&mu_);
    int cut = 0;
    for (Link& link : links_) {
      if (link.closed) continue;
      shutdown(link.client, SHUT_RDWR);
      shutdown(link.server, SHUT_RDWR);
      link.closed = true;
      ++cut;
    }
    return cut;
  }

  int64_t connections() const { return connections_.load(); }

  /// While refusing, new connections are accepted and closed at once (the
  /// peer is unreachable); open ones are cut.
  void SetRefusing(bool refusing) {
    refusing_ = refusing;
    if (refusing) CutAll();
  }

  /// While swallowing, bytes from clients are read and dropped; bytes from
  /// the server still reach them. Cut the links afterwards: their streams
  /// have lost bytes.
  void SetSwallowingClientBytes(bool swallowing) { swallowing_ = swallowing; }

 private:
  struct Link {
    int client = -1, server = -1;
    bool closed = false;  // cut or ended; the fds are closed by the forwarder
    std::thread thread;
  };

  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      if (refusing_) {
        close(client);
        continue;
      }
      const int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in up{};
      up.sin_family = AF_INET;
      up.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      up.sin_port = htons(static_cast<uint16_t>(upstream_port_));
      if (server < 0 || connect(server, reinterpret_cast<sockaddr*>(&up), sizeof(up)) != 0) {
        if (server >= 0) close(server);
        close(client);
        continue;
      }
      ++connections_;
      absl::MutexLock l(&mu_);
      links_.emplace_back();
      Link* link = &links_.back();
      link->client = client;
      link->server = server;
      ++live_;
      link->thread = std::thread([this, link] { Forward(link); });
    }
  }

  void Forward(Link* link) {
    char buf[64 * 1024];
    pollfd p[2] = {{link->client, POLLIN, 0}, {link->server, POLLIN, 0}};
    bool open = true;
    while (open) {
      if (poll(p, 2, 100) < 0) break;
      for (int i = 0; i < 2 && open; ++i) {
        if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = read(p[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          open = false;
          break;
        }
        if (i == 0 && swallowing_) continue;
        const int to = p[1 - i].fd;
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = send(to, buf + off, n - off, MSG_NOSIGNAL);
          if (w <= 0) {
            open = false;
            break;
          }
          off += w;
        }
      }
    }
    absl::MutexLock l(&mu_);
    if (!link->closed) {
      shutdown(link->client, SHUT_RDWR);
      shutdown(link->server, SHUT_RDWR);
      link->closed = true;
    }
    close(link->client);
    close(link->server);
    --live_;
  }

  const int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> refusing_{false};
  std::atomic<bool> swallowing_{false};
  std::atomic<int64_t> connections_{0};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::list<Link> links_ ABSL_GUARDED_BY(mu_);  // stable addresses for the forwarders
  int live_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hetbench::testing
