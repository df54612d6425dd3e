// spitectl's side of the control socket.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "spite/core/result.hpp"

namespace spite::control {

class client {
 public:
  static result<std::unique_ptr<client>> connect(const std::filesystem::path& socket);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // Sends `request` (an id is added) and calls on_event for each streamed event until the final
  // line, which is returned: the result object, or the daemon's error as an error.
  result<nlohmann::json> call(nlohmann::json request,
                              const std::function<void(const nlohmann::json&)>& on_event = {});

 private:
  explicit client(int fd) : fd_(fd) {}
  result<std::string> read_line();
  int fd_ = -1;
  long next_id_ = 1;
  std::string buffer_;
};

// The daemon's default control socket: $RUNTIME_DIRECTORY/spited.sock, else /run/spite/spited.sock.
std::filesystem::path default_socket_path();

}  // namespace spite::control
