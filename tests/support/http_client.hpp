// A small blocking HTTP/1.1 client over POSIX sockets for tests of spited's HTTP API: requests
// with Content-Length or chunked responses, keep-alive reuse, server-sent events read as they
// arrive, and raw TCP connections for what a well-behaved client never sends. Every read has a
// timeout; failures throw http_error (Catch2 reports the message).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace spite::test {

struct http_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using http_headers = std::vector<std::pair<std::string, std::string>>;

struct http_response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; repeated headers joined by ", "
  std::string body;

  std::string header(const std::string& lower_name) const;
  nlohmann::json json() const;  // the body parsed; throws http_error (with the body) when it is not JSON
};

// One TCP connection with a read buffer and a timeout on every read and write.
class tcp_connection {
 public:
  tcp_connection(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout);
  ~tcp_connection();
  tcp_connection(const tcp_connection&) = delete;
  tcp_connection& operator=(const tcp_connection&) = delete;

  void send(std::string_view data);
  // Some bytes into the buffer; false at end of stream. Throws on timeout.
  bool fill();
  std::string read_line();               // up to CRLF (removed); throws at end of stream
  std::string read_exact(std::size_t n);
  std::string read_to_end();             // until the peer closes
  // True when the peer closed within `timeout` (whatever it sent before is discarded); false
  // when the connection is still open then.
  bool closed_within(std::chrono::milliseconds timeout);
  // True while the peer has not closed (non-blocking peek).
  bool open();
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
  std::chrono::milliseconds timeout_;
  std::string buffer_;
  friend class http_client;
  friend class sse_stream;
};

// Server-sent events of one streamed response, read as the server sends them.
class sse_stream {
 public:
  int status() const noexcept { return status_; }
  const std::map<std::string, std::string>& headers() const noexcept { return headers_; }
  std::string header(const std::string& lower_name) const;
  // The next event's data (its `data:` lines joined by "\n"); nullopt when the response ended.
  // Comment lines (":...") and other fields are skipped.
  std::optional<std::string> next();
  // Every remaining event.
  std::vector<std::string> rest();
  // Drops the connection now, as a client that goes away mid-stream does.
  void disconnect();
  // Raw body text read so far (for messages).
  const std::string& raw() const noexcept { return raw_; }

 private:
  friend class http_client;
  sse_stream(std::shared_ptr<tcp_connection> c, http_response head);
  bool more_body();  // appends the next piece of the body to pending_; false at its end

  std::shared_ptr<tcp_connection> conn_;
  int status_ = 0;
  std::map<std::string, std::string> headers_;
  bool chunked_ = false, ended_ = false;
  std::optional<std::size_t> remaining_;  // Content-Length left, if not chunked
  std::string pending_;                   // body bytes not parsed into events yet
  std::string raw_;
};

// Requests on one kept-alive connection, opened again when the server closed it.
class http_client {
 public:
  explicit http_client(std::uint16_t port, std::string host = "127.0.0.1",
                       std::chrono::milliseconds timeout = std::chrono::seconds(30));
  http_response request(const std::string& method, const std::string& path, const http_headers& headers = {},
                        const std::string& body = "");
  http_response get(const std::string& path, const http_headers& headers = {}) { return request("GET", path, headers); }
  http_response post(const std::string& path, const nlohmann::json& body, const http_headers& headers = {});
  // Sends a request and returns once the status line and headers arrived; the body is read as
  // events. While the stream is alive this client must not be used for anything else.
  sse_stream stream(const std::string& method, const std::string& path, const http_headers& headers = {},
                    const std::string& body = "");
  sse_stream stream_post(const std::string& path, const nlohmann::json& body, const http_headers& headers = {});
  // Connections opened so far (1 while keep-alive holds).
  int connections_opened() const noexcept { return opened_; }
  void close() { conn_.reset(); }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 private:
  std::shared_ptr<tcp_connection> connection();
  void send_request(tcp_connection& c, const std::string& method, const std::string& path, const http_headers& headers,
                    const std::string& body);
  http_response read_head(tcp_connection& c);

  std::string host_;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp_connection> conn_;
  bool reusable_ = false;
  int opened_ = 0;
};

}  // namespace spite::test
