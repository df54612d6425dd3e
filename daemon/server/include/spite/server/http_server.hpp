// The HTTP/1.1 transport of spited (Boost.Beast, kept inside http_server.cpp): keep-alive,
// streamed responses (SSE over chunked encoding), a body limit (413), header and idle timeouts,
// a bound on connections, and disconnect detection while a response is pending. Routes receive
// a parsed request on a worker thread, never on an I/O thread, and answer through a responder
// that any thread may use.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spite/core/result.hpp"

namespace spite::server {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct http_request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // without the query
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string remote;  // "127.0.0.1:41234"
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// How a route answers: one respond(), or begin_stream() + write()... + end_stream(). Safe from
// any thread; calls after the client went away do nothing.
class http_responder {
 public:
  virtual ~http_responder() = default;
  virtual void respond(int status, std::string content_type, std::string body, header_list headers = {}) = 0;
  virtual void begin_stream(int status, std::string content_type, header_list headers = {}) = 0;
  // False once the client is gone or has let more than max_stream_buffer bytes pile up: the
  // route should stop producing (cancel its generation).
  virtual bool write(std::string data) = 0;
  virtual void end_stream() = 0;
  virtual bool closed() const = 0;
  // Runs once if the client goes away before the response ended (on an I/O thread; keep it short).
  virtual void on_close(std::function<void()> f) = 0;
};

using route_handler = std::function<void(const http_request&, std::shared_ptr<http_responder>)>;

struct http_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;          // 0: any free port (tests)
  int io_threads = 1;
  int worker_threads = 4;             // run the route handlers
  std::size_t max_body = 1 << 20;     // larger bodies get 413
  std::size_t max_header = 16 << 10;  // larger header blocks get 431
  std::chrono::seconds header_timeout{15};  // to receive a whole request once it started
  std::chrono::seconds idle_timeout{60};    // between requests on a kept-alive connection
  int max_connections = 512;                // more are answered 503 and closed
  std::size_t max_stream_buffer = 4 << 20;  // bytes queued for one slow client
  header_list extra_headers;                // added to every response
  std::vector<std::string> cors_origins;    // origins browsers may call from ("*": any); empty: none
};

struct http_stats {
  std::uint64_t connections_accepted = 0, connections_refused = 0, requests = 0;
  int connections_open = 0;
};

class http_server {
 public:
  static result<std::unique_ptr<http_server>> listen(const http_options& options, route_handler handler);
  // Serves on a listening TCP socket from systemd (socket activation, LISTEN_FDNAMES "http").
  static result<std::unique_ptr<http_server>> adopt(int listen_fd, const http_options& options, route_handler handler);
  ~http_server();  // stops accepting, closes every connection, joins the threads
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  std::uint16_t port() const noexcept;
  // New connections are refused from now on; responses in flight go on.
  void stop_accepting();
  http_stats stats() const;

 private:
  struct impl;
  explicit http_server(std::shared_ptr<impl> p);
  std::shared_ptr<impl> impl_;
};

// "Bad Request" for 400, ...
const char* status_reason(int status);

}  // namespace spite::server
