#include "spite/control/server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "spite/core/log.hpp"

namespace spite::control {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

// One client connection: a reader thread and a thread per request in flight.
struct connection : std::enable_shared_from_this<connection> {
  int fd = -1;
  std::mutex write_mutex;
  std::atomic<bool> closed{false};
  std::atomic<int> in_flight{0};
  std::mutex threads_mutex;
  std::vector<std::thread> requests;

  ~connection() {
    for (auto& t : requests) {
      if (t.joinable()) t.join();
    }
    if (fd >= 0) ::close(fd);
  }
  void send_line(const json& j) {
    std::lock_guard lock(write_mutex);
    if (closed) return;
    if (!write_all(fd, j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n")) closed = true;
  }
};

class connection_responder final : public responder {
 public:
  connection_responder(std::shared_ptr<connection> c, json id) : c_(std::move(c)), id_(std::move(id)) {}
  ~connection_responder() override {
    if (!final_sent_) error(codes::failed, "the command ended without an answer");
  }
  void event(json body) override {
    body["id"] = id_;
    c_->send_line(body);
  }
  void result(json r) override {
    if (final_sent_.exchange(true)) return;
    c_->send_line({{"id", id_}, {"event", "result"}, {"result", std::move(r)}});
  }
  void error(std::string_view code, std::string_view message) override {
    if (final_sent_.exchange(true)) return;
    c_->send_line({{"id", id_}, {"event", "error"}, {"error", {{"code", code}, {"message", message}}}});
  }
  bool cancelled() const override { return c_->closed; }

 private:
  std::shared_ptr<connection> c_;
  json id_;
  std::atomic<bool> final_sent_{false};
};

struct server::impl {
  server_options options;
  handler h;
  int listen_fd = -1;
  int stop_pipe[2] = {-1, -1};
  bool owns_path = false;
  std::thread acceptor;
  std::mutex clients_mutex;
  std::list<std::thread> client_threads;
  std::list<std::shared_ptr<connection>> clients;
  std::atomic<int> n_clients{0};

  ~impl() {
    if (stop_pipe[1] >= 0) {
      [[maybe_unused]] const auto n = ::write(stop_pipe[1], "x", 1);
    }
    if (acceptor.joinable()) acceptor.join();
    {
      std::lock_guard lock(clients_mutex);
      for (auto& c : clients) {
        c->closed = true;
        ::shutdown(c->fd, SHUT_RDWR);
      }
    }
    for (auto& t : client_threads) {
      if (t.joinable()) t.join();
    }
    // Requests still running finish here (they see closed() and stop), so that no connection is
    // destroyed by one of its own request threads.
    for (auto& c : clients) {
      std::lock_guard lock(c->threads_mutex);
      for (auto& t : c->requests) {
        if (t.joinable()) t.join();
      }
    }
    clients.clear();
    if (listen_fd >= 0) ::close(listen_fd);
    if (owns_path) {
      std::error_code ec;
      fs::remove(options.path, ec);
    }
    for (int fd : stop_pipe) {
      if (fd >= 0) ::close(fd);
    }
  }

  // Only our own user, root, or members of the configured group may talk to the daemon.
  bool peer_allowed(int fd, std::string& who) const {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
    who = "uid " + std::to_string(cred.uid) + " pid " + std::to_string(cred.pid);
    if (cred.uid == 0 || cred.uid == ::geteuid()) return true;
    if (options.group && cred.gid == *options.group) return true;
    // Supplementary groups are not in SO_PEERCRED; the socket's mode and group already keep
    // others out at connect(), so a peer that got here is in the socket's group.
    return options.group.has_value();
  }

  void serve_client(std::shared_ptr<connection> c) {
    std::string buffer;
    char chunk[8192];
    bool discarding = false;  // inside an over-long line: drop until its newline
    while (!c->closed) {
      pollfd p[2] = {{c->fd, POLLIN, 0}, {stop_pipe[0], POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (p[1].revents != 0) break;
      const ssize_t n = ::recv(c->fd, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<std::size_t>(n));
      for (;;) {
        const std::size_t nl = buffer.find('\n');
        if (nl == std::string::npos) {
          if (buffer.size() > options.max_line) {
            if (!discarding) {
              c->send_line({{"id", nullptr}, {"event", "error"},
                            {"error", {{"code", codes::too_large},
                                       {"message", "line longer than " + std::to_string(options.max_line) + " bytes"}}}});
            }
            discarding = true;
            buffer.clear();
          }
          break;
        }
        std::string line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        if (discarding) {
          discarding = false;
          continue;
        }
        if (line.size() > options.max_line) {
          c->send_line({{"id", nullptr}, {"event", "error"},
                        {"error", {{"code", codes::too_large},
                                   {"message", "line longer than " + std::to_string(options.max_line) + " bytes"}}}});
          continue;
        }
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        dispatch_line(c, line);
      }
    }
    c->closed = true;  // cancels this client's requests
    ::shutdown(c->fd, SHUT_RDWR);
  }

  void dispatch_line(const std::shared_ptr<connection>& c, const std::string& line) {
    json request = json::parse(line, nullptr, false);
    auto fail = [&](const json& id, std::string_view code, std::string message) {
      c->send_line({{"id", id}, {"event", "error"}, {"error", {{"code", code}, {"message", std::move(message)}}}});
    };
    if (request.is_discarded() || !request.is_object()) return fail(nullptr, codes::bad_request, "not a JSON object");
    const json id = request.contains("id") ? request["id"] : json();
    if (!id.is_number_integer() && !id.is_string()) return fail(nullptr, codes::bad_request, "\"id\" (a number or string) is required");
    if (!request.contains("cmd") || !request["cmd"].is_string()) return fail(id, codes::bad_request, "\"cmd\" (a string) is required");
    if (c->in_flight >= options.max_requests_per_client) {
      return fail(id, codes::busy, "too many requests in flight on this connection");
    }
    c->in_flight++;
    std::lock_guard lock(c->threads_mutex);
    c->requests.emplace_back([this, c, id, request = std::move(request)] {
      {
        connection_responder out(c, id);
        try {
          h(request, out);
        } catch (const std::exception& e) {
          out.error(codes::failed, std::string("internal error: ") + e.what());
        }
      }
      c->in_flight--;
    });
  }

  void accept_loop() {
    for (;;) {
      pollfd p[2] = {{listen_fd, POLLIN, 0}, {stop_pipe[0], POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        log::error("control socket: poll: ", std::strerror(errno));
        return;
      }
      if (p[1].revents != 0) return;
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      // A client that stops reading is dropped after this long instead of holding a request
      // thread in send() forever.
      const timeval send_timeout{30, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
      std::string who;
      if (!peer_allowed(fd, who)) {
        log::warn("control socket: refused ", who);
        write_all(fd, R"({"id":null,"event":"error","error":{"code":"forbidden","message":"not allowed"}})" "\n");
        ::close(fd);
        continue;
      }
      if (n_clients >= options.max_clients) {
        write_all(fd, R"({"id":null,"event":"error","error":{"code":"busy","message":"too many control clients"}})" "\n");
        ::close(fd);
        continue;
      }
      auto c = std::make_shared<connection>();
      c->fd = fd;
      std::lock_guard lock(clients_mutex);
      // Reap finished client threads so a long-lived daemon does not accumulate them.
      clients.remove_if([](const std::shared_ptr<connection>& x) { return x->closed && x.use_count() == 1; });
      clients.push_back(c);
      n_clients++;
      client_threads.emplace_back([this, c] {
        serve_client(c);
        n_clients--;
      });
    }
  }
};

server::server(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
server::~server() = default;
const fs::path& server::path() const noexcept { return impl_->options.path; }

result<std::unique_ptr<server>> server::adopt(int listen_fd, const server_options& options, handler h) {
  auto p = std::make_unique<impl>();
  p->options = options;
  p->h = std::move(h);
  p->listen_fd = listen_fd;
  if (::pipe2(p->stop_pipe, O_CLOEXEC) != 0) return make_error(errc::io, "pipe2 failed");
  impl* raw = p.get();
  p->acceptor = std::thread([raw] { raw->accept_loop(); });
  return std::unique_ptr<server>(new server(std::move(p)));
}

result<std::unique_ptr<server>> server::listen(const server_options& options, handler h) {
  const std::string path = options.path.string();
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return make_error(errc::invalid_argument, "control socket path '" + path + "' is empty or too long");
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return make_error(errc::invalid_argument, path + " exists and is not a socket");
    ::unlink(path.c_str());
  }
  std::error_code ec;
  fs::create_directories(options.path.parent_path(), ec);
  // Bound, listening and given its group and mode in a private directory beside the final
  // path, then renamed into place: a client never finds the socket before it accepts with its
  // final mode (one that did, between bind and chmod, was refused). Where the staging path
  // would not fit a socket address or its directory cannot be made, bound in place under a
  // umask that keeps it closed (connections refused with EACCES) until the chmod.
  const fs::path parent = options.path.parent_path().empty() ? fs::path(".") : options.path.parent_path();
  std::string staging = (parent / ".sXXXXXX").string();
  const bool staged = staging.size() + 2 < sizeof addr.sun_path && ::mkdtemp(staging.data()) != nullptr;
  const std::string bind_path = staged ? staging + "/s" : path;
  bool bound = false;  // only a socket this call created is removed on failure
  const auto fail = [&](int fd, const char* what) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (bound) ::unlink(bind_path.c_str());
    if (staged) ::rmdir(staging.c_str());
    return make_error(errc::io, path + ": " + what + ": " + why);
  };
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(-1, "socket");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, bind_path.c_str(), bind_path.size());
  const mode_t old_umask = staged ? 0 : ::umask(0777);
  bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (!staged) ::umask(old_umask);
  if (!bound) return fail(fd, "bind");
  if (::listen(fd, 64) != 0) return fail(fd, "listen");
  if (options.group && ::chown(bind_path.c_str(), static_cast<uid_t>(-1), *options.group) != 0) {
    log::warn("control socket: cannot give ", path, " to group ", *options.group, ": ", std::strerror(errno));
  }
  if (::chmod(bind_path.c_str(), options.mode & 0770) != 0) return fail(fd, "chmod");
  if (staged) {
    if (::rename(bind_path.c_str(), path.c_str()) != 0) return fail(fd, "rename");
    ::rmdir(staging.c_str());
  }
  auto s = adopt(fd, options, std::move(h));
  if (s) {
    (*s)->impl_->owns_path = true;
  } else {
    ::unlink(path.c_str());  // (the failed server closed the descriptor)
  }
  return s;
}

}  // namespace spite::control
