// The daemon's side of the control socket: accepts clients, checks their credentials, reads
// request lines and hands each request to a handler on its own thread, so that a slow command
// never blocks other clients.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "spite/control/protocol.hpp"
#include "spite/core/result.hpp"

namespace spite::control {

struct server_options {
  std::filesystem::path path;  // socket path (ignored when adopting a socket)
  unsigned mode = 0660;        // permissions of the socket file
  std::optional<gid_t> group;  // group owner of the socket and the group allowed in
  std::size_t max_line = default_max_line;
  int max_clients = 64;
  int max_requests_per_client = 16;  // requests in flight on one connection
};

// Where a request answers. Thread-safe; lines are written whole.
class responder {
 public:
  virtual ~responder() = default;
  virtual void event(nlohmann::json body) = 0;  // {"event": ..., ...}; id added
  virtual void result(nlohmann::json result) = 0;
  virtual void error(std::string_view code, std::string_view message) = 0;
  // True once the client went away or cancelled; long commands poll it.
  virtual bool cancelled() const = 0;
};

using handler = std::function<void(const nlohmann::json& request, responder& out)>;

class server {
 public:
  // Creates the socket at options.path (an existing socket file is replaced, anything else at
  // that path is refused).
  static result<std::unique_ptr<server>> listen(const server_options& options, handler h);
  // Serves on a listening socket received from systemd (socket activation).
  static result<std::unique_ptr<server>> adopt(int listen_fd, const server_options& options, handler h);
  ~server();  // stops accepting, cancels and joins every client
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  const std::filesystem::path& path() const noexcept;

 private:
  struct impl;
  explicit server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace spite::control
