// Helpers for tests that run spited as a real process: the NOTIFY_SOCKET a service manager
// would own, and a raw control connection for what spitectl never sends.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace spite::test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// The NOTIFY_SOCKET a service manager would own: collects what spited tells systemd.
struct notify_socket {
  fs::path path;
  int fd = -1;
  std::string received;
  explicit notify_socket(const fs::path& p) : path(p) {
    fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, p.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~notify_socket() { ::close(fd); }
  // Reads datagrams until `text` has been received (or `timeout`).
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout = 20s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (received.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) received.append(buf, static_cast<std::size_t>(n)).append("\n");
    }
    return true;
  }
};

// A raw control connection, for what spitectl never sends.
struct raw_client {
  int fd = -1;
  std::string buffer;
  explicit raw_client(const fs::path& socket) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~raw_client() { ::close(fd); }
  void send(const std::string& data) {
    std::string_view rest = data;
    while (!rest.empty()) {
      const ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
      REQUIRE(n > 0);
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  nlohmann::json line() {
    for (;;) {
      const auto nl = buffer.find('\n');
      if (nl != std::string::npos) {
        auto j = nlohmann::json::parse(buffer.substr(0, nl));
        buffer.erase(0, nl + 1);
        return j;
      }
      pollfd p{fd, POLLIN, 0};
      REQUIRE(::poll(&p, 1, 10000) == 1);
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      REQUIRE(n > 0);
      buffer.append(buf, static_cast<std::size_t>(n));
    }
  }
};

inline bool wait_for_file(const fs::path& p, std::chrono::milliseconds timeout = 20s) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!fs::exists(p)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

}  // namespace spite::test
