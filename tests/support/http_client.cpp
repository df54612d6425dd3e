#include "http_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace spite::test {

namespace {

using clock_type = std::chrono::steady_clock;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Milliseconds left until `deadline`, at least 0.
int left_ms(clock_type::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
  return static_cast<int>(std::max<long long>(0, left));
}

std::string header_of(const std::map<std::string, std::string>& h, const std::string& name) {
  const auto it = h.find(name);
  return it == h.end() ? std::string() : it->second;
}

std::size_t parse_chunk_size(const std::string& line) {
  const std::string hex = trim(line.substr(0, line.find(';')));
  std::size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(hex, &used, 16);
  } catch (const std::exception&) {
    used = 0;
  }
  if (hex.empty() || used != hex.size() || n > (1ull << 32)) throw http_error("bad chunk size line '" + line + "'");
  return static_cast<std::size_t>(n);
}

}  // namespace

std::string http_response::header(const std::string& lower_name) const { return header_of(headers, lower_name); }

nlohmann::json http_response::json() const {
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    throw http_error("HTTP " + std::to_string(status) + ": the body is not JSON (" + e.what() + "): " + body.substr(0, 400));
  }
}

tcp_connection::tcp_connection(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw http_error(errno_text("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    ::close(fd_);
    throw http_error("not an IPv4 address: " + host);
  }
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) {
      const std::string why = errno_text("connect");
      ::close(fd_);
      throw http_error(why);
    }
    pollfd p{fd_, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, static_cast<int>(timeout_.count())) != 1 ||
        ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      ::close(fd_);
      throw http_error("connect to " + host + ":" + std::to_string(port) + ": " + (err ? std::strerror(err) : "timed out"));
    }
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

tcp_connection::~tcp_connection() {
  if (fd_ >= 0) ::close(fd_);
}

void tcp_connection::send(std::string_view data) {
  const auto deadline = clock_type::now() + timeout_;
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) throw http_error(errno_text("send"));
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, left_ms(deadline)) == 0) throw http_error("send: timed out");
  }
}

bool tcp_connection::fill() {
  const auto deadline = clock_type::now() + timeout_;
  for (;;) {
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      buffer_.append(buf, static_cast<std::size_t>(n));
      return true;
    }
    if (n == 0 || errno == ECONNRESET) return false;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) throw http_error(errno_text("recv"));
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, left_ms(deadline)) == 0) {
      throw http_error("read timed out after " + std::to_string(timeout_.count()) + " ms");
    }
  }
}

std::string tcp_connection::read_line() {
  for (;;) {
    const auto at = buffer_.find("\r\n");
    if (at != std::string::npos) {
      std::string line = buffer_.substr(0, at);
      buffer_.erase(0, at + 2);
      return line;
    }
    if (buffer_.size() > (1u << 20)) throw http_error("a line longer than 1 MiB");
    if (!fill()) throw http_error("connection closed in the middle of a line (after '" + buffer_.substr(0, 200) + "')");
  }
}

std::string tcp_connection::read_exact(std::size_t n) {
  while (buffer_.size() < n) {
    if (!fill()) {
      throw http_error("connection closed after " + std::to_string(buffer_.size()) + " of " + std::to_string(n) + " bytes");
    }
  }
  std::string out = buffer_.substr(0, n);
  buffer_.erase(0, n);
  return out;
}

std::string tcp_connection::read_to_end() {
  while (fill()) {
  }
  return std::exchange(buffer_, {});
}

bool tcp_connection::closed_within(std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  for (;;) {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n > 0) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, left_ms(deadline)) == 0) return false;
  }
}

bool tcp_connection::open() {
  char c;
  const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;
  if (n == 0) return false;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

http_client::http_client(std::uint16_t port, std::string host, std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {}

std::shared_ptr<tcp_connection> http_client::connection() {
  // A kept-alive connection the server has closed meanwhile (idle timeout) is replaced.
  if (conn_ && (!reusable_ || !conn_->open())) conn_.reset();
  if (!conn_) {
    conn_ = std::make_shared<tcp_connection>(host_, port_, timeout_);
    ++opened_;
  }
  conn_->set_timeout(timeout_);
  return conn_;
}

void http_client::send_request(tcp_connection& c, const std::string& method, const std::string& path,
                               const http_headers& headers, const std::string& body) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: " + host_ + ":" + std::to_string(port_) + "\r\n";
  bool has_length = false;
  for (const auto& [k, v] : headers) {
    req += k + ": " + v + "\r\n";
    has_length = has_length || lower(k) == "content-length" || lower(k) == "transfer-encoding";
  }
  if (!has_length && (!body.empty() || method == "POST" || method == "PUT")) {
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n";
  c.send(req + body);
}

http_response http_client::read_head(tcp_connection& c) {
  http_response r;
  const std::string status_line = c.read_line();
  if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) throw http_error("bad status line '" + status_line + "'");
  r.status = std::atoi(status_line.c_str() + 9);
  for (;;) {
    const std::string line = c.read_line();
    if (line.empty()) break;
    const auto colon = line.find(':');
    if (colon == std::string::npos) throw http_error("bad header line '" + line + "'");
    const std::string name = lower(trim(line.substr(0, colon)));
    const std::string value = trim(line.substr(colon + 1));
    auto [it, inserted] = r.headers.emplace(name, value);
    if (!inserted) it->second += ", " + value;
  }
  return r;
}

http_response http_client::request(const std::string& method, const std::string& path, const http_headers& headers,
                                   const std::string& body) {
  auto c = connection();
  reusable_ = false;
  send_request(*c, method, path, headers, body);
  http_response r = read_head(*c);
  const std::string te = lower(r.header("transfer-encoding"));
  bool reusable = lower(r.header("connection")) != "close";
  if (method == "HEAD" || r.status / 100 == 1 || r.status == 204 || r.status == 304) {
    // no body
  } else if (te.find("chunked") != std::string::npos) {
    for (;;) {
      const std::size_t n = parse_chunk_size(c->read_line());
      if (n == 0) {
        while (!c->read_line().empty()) {  // trailers
        }
        break;
      }
      r.body += c->read_exact(n);
      if (!c->read_line().empty()) throw http_error("chunk not followed by CRLF");
    }
  } else if (!r.header("content-length").empty()) {
    r.body = c->read_exact(static_cast<std::size_t>(std::stoull(r.header("content-length"))));
  } else {
    r.body = c->read_to_end();
    reusable = false;
  }
  reusable_ = reusable;
  if (!reusable) conn_.reset();
  return r;
}

http_response http_client::post(const std::string& path, const nlohmann::json& body, const http_headers& headers) {
  http_headers h = headers;
  h.emplace_back("Content-Type", "application/json");
  return request("POST", path, h, body.dump());
}

sse_stream http_client::stream(const std::string& method, const std::string& path, const http_headers& headers,
                               const std::string& body) {
  auto c = connection();
  reusable_ = false;
  conn_.reset();  // the stream owns the connection from now on
  send_request(*c, method, path, headers, body);
  http_response head = read_head(*c);
  return sse_stream(std::move(c), std::move(head));
}

sse_stream http_client::stream_post(const std::string& path, const nlohmann::json& body, const http_headers& headers) {
  http_headers h = headers;
  h.emplace_back("Content-Type", "application/json");
  h.emplace_back("Accept", "text/event-stream");
  return stream("POST", path, h, body.dump());
}

sse_stream::sse_stream(std::shared_ptr<tcp_connection> c, http_response head)
    : conn_(std::move(c)), status_(head.status), headers_(std::move(head.headers)) {
  chunked_ = lower(header_of(headers_, "transfer-encoding")).find("chunked") != std::string::npos;
  if (!chunked_ && !header_of(headers_, "content-length").empty()) {
    remaining_ = static_cast<std::size_t>(std::stoull(header_of(headers_, "content-length")));
  }
}

std::string sse_stream::header(const std::string& lower_name) const { return header_of(headers_, lower_name); }

bool sse_stream::more_body() {
  if (ended_ || !conn_) return false;
  std::string piece;
  if (chunked_) {
    const std::size_t n = parse_chunk_size(conn_->read_line());
    if (n == 0) {
      while (!conn_->read_line().empty()) {
      }
      ended_ = true;
      return false;
    }
    piece = conn_->read_exact(n);
    if (!conn_->read_line().empty()) throw http_error("chunk not followed by CRLF");
  } else if (remaining_) {
    if (*remaining_ == 0) {
      ended_ = true;
      return false;
    }
    if (conn_->buffer_.empty() && !conn_->fill()) throw http_error("connection closed before the end of the body");
    piece = conn_->read_exact(std::min(*remaining_, conn_->buffer_.size()));
    *remaining_ -= piece.size();
  } else {
    if (conn_->buffer_.empty() && !conn_->fill()) {
      ended_ = true;
      return false;
    }
    piece = std::exchange(conn_->buffer_, {});
  }
  raw_ += piece;
  pending_ += piece;
  return true;
}

std::optional<std::string> sse_stream::next() {
  std::optional<std::string> data;
  for (;;) {
    const auto nl = pending_.find('\n');
    if (nl == std::string::npos) {
      if (!more_body()) return std::nullopt;  // an unterminated event at the end is dropped
      continue;
    }
    std::string line = pending_.substr(0, nl);
    pending_.erase(0, nl + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      if (data) return data;
      continue;
    }
    if (line[0] == ':') continue;
    const auto colon = line.find(':');
    const std::string field = line.substr(0, colon);
    std::string value = colon == std::string::npos ? std::string() : line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    if (field == "data") data = data ? *data + "\n" + value : value;
  }
}

std::vector<std::string> sse_stream::rest() {
  std::vector<std::string> out;
  while (auto e = next()) out.push_back(std::move(*e));
  return out;
}

void sse_stream::disconnect() {
  conn_.reset();
  ended_ = true;
}

}  // namespace spite::test
