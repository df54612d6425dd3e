#include "spite/control/client.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "spite/control/protocol.hpp"

namespace spite::control {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path default_socket_path() {
  if (const char* dir = std::getenv("RUNTIME_DIRECTORY"); dir != nullptr && *dir != '\0') {
    // systemd may pass several directories separated by ':'; the first is ours.
    std::string first(dir);
    first = first.substr(0, first.find(':'));
    return fs::path(first) / "spited.sock";
  }
  return "/run/spite/spited.sock";
}

result<std::unique_ptr<client>> client::connect(const fs::path& socket) {
  const std::string path = socket.string();
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return make_error(errc::invalid_argument, "control socket path '" + path + "' is empty or too long");
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(errc::io, std::string("socket: ") + std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return make_error(errc::not_found, "cannot reach spited at " + path + ": " + why);
  }
  return std::unique_ptr<client>(new client(fd));
}

client::~client() {
  if (fd_ >= 0) ::close(fd_);
}

result<std::string> client::read_line() {
  for (;;) {
    const std::size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    if (buffer_.size() > 64 * default_max_line) return make_error(errc::malformed, "spited sent an over-long line");
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error(errc::io, "spited closed the connection");
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

result<json> client::call(json request, const std::function<void(const json&)>& on_event) {
  const long id = next_id_++;
  request["id"] = id;
  const std::string line = request.dump() + "\n";
  for (std::string_view rest = line; !rest.empty();) {
    const ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error(errc::io, "cannot send to spited: " + std::string(std::strerror(errno)));
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  for (;;) {
    auto l = read_line();
    if (!l) return std::move(l).err();
    json j = json::parse(*l, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return make_error(errc::malformed, "spited sent a line that is not JSON");
    const std::string event = j.value("event", "");
    if (j.contains("id") && !j["id"].is_null() && j["id"] != id) continue;  // not ours
    if (event == "result") return j.contains("result") ? j["result"] : json::object();
    if (event == "error") {
      const json& e = j["error"];
      const std::string code = e.value("code", "failed");
      const errc c = code == codes::not_found ? errc::not_found
                     : code == codes::bad_request || code == codes::unknown_command ? errc::invalid_argument
                                                                                    : errc::unsupported;
      return make_error(c, "spited: " + e.value("message", code) + " (" + code + ")");
    }
    if (on_event) on_event(j);
  }
}

}  // namespace spite::control
