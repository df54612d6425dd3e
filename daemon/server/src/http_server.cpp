// Boost.Beast lives in this file only: it is expensive to compile.
#include "spite/server/http_server.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include "spite/core/log.hpp"

namespace spite::server {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

const char* status_reason(int status) {
  const auto s = http::obsolete_reason(static_cast<http::status>(status));
  return s.empty() ? "Unknown" : s.data();
}

namespace {

class session;

// Queued output of one connection; guarded by the session's strand.
struct outgoing {
  std::string bytes;
  bool last = false;  // the response ends after this
};

class responder_impl final : public http_responder {
 public:
  responder_impl(std::shared_ptr<session> s, bool keep_alive, std::size_t max_buffer, const header_list& extra)
      : session_(std::move(s)), keep_alive_(keep_alive), max_buffer_(max_buffer), extra_(extra) {}

  void respond(int status, std::string content_type, std::string body, header_list headers) override;
  void begin_stream(int status, std::string content_type, header_list headers) override;
  bool write(std::string data) override;
  void end_stream() override;
  bool closed() const override { return closed_.load(); }
  void on_close(std::function<void()> f) override {
    bool now = false;
    {
      std::lock_guard lock(mutex_);
      if (closed_) now = true;
      else close_hooks_.push_back(std::move(f));
    }
    if (now) f();
  }

  // From the session, on its strand.
  void client_gone() {
    std::vector<std::function<void()>> hooks;
    {
      std::lock_guard lock(mutex_);
      if (closed_.exchange(true)) return;
      hooks.swap(close_hooks_);
    }
    for (auto& h : hooks) h();
  }
  void drained(std::size_t n) { queued_ -= n; }

 private:
  std::string head(int status, const std::string& content_type, const header_list& headers, bool chunked,
                   std::size_t length) const;
  void enqueue(std::string bytes, bool last);

  std::weak_ptr<session> session_;
  bool keep_alive_;
  std::size_t max_buffer_;
  header_list extra_;  // a copy: a responder may outlive the server
  std::mutex mutex_;
  std::atomic<bool> closed_{false};
  std::atomic<std::size_t> queued_{0};
  std::atomic<bool> started_{false}, ended_{false};
  std::vector<std::function<void()>> close_hooks_;
};

struct server_state;

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, server_state& server);
  void start() { read_request(); }
  void send(std::string bytes, bool last);  // any thread
  void close();                             // any thread

 private:
  friend class responder_impl;
  void read_request();
  void read_header();
  void on_request(beast::error_code ec);
  void answer_error(int status, const std::string& message, bool close_after);
  void write_next();
  void watch_disconnect();
  void finish_response();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  server_state& server_;
  std::deque<outgoing> out_;
  bool writing_ = false;
  bool watching_ = false;
  bool responding_ = false;
  bool close_after_ = false;
  bool closed_ = false;
  std::shared_ptr<responder_impl> responder_;

 public:
  // Waiting for a request with nothing received: the first to go when the bound is reached.
  std::atomic<bool> idle{false};
};

struct server_state {
  http_options options;
  route_handler handler;
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{io.get_executor()};
  tcp::acceptor acceptor{io};
  asio::thread_pool workers;
  std::vector<std::thread> threads;
  std::mutex sessions_mutex;
  std::list<std::weak_ptr<session>> sessions;
  std::atomic<int> open{0};
  std::atomic<std::uint64_t> accepted{0}, refused{0}, requests{0};
  std::atomic<bool> accepting{true};
  std::uint16_t port = 0;

  explicit server_state(const http_options& o, route_handler h)
      : options(o), handler(std::move(h)), workers(static_cast<std::size_t>(std::max(1, o.worker_threads))) {}

  // Closes one connection that waits for a request with nothing received, so that a flood of idle
  // connections cannot lock new clients out; false when every connection is busy.
  bool evict_idle() {
    std::lock_guard lock(sessions_mutex);
    for (auto& w : sessions) {
      auto s = w.lock();
      if (s && s->idle.exchange(false)) {
        s->close();
        return true;
      }
    }
    return false;
  }

  void accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) {
        if (!accepting) {
          socket.close();
        } else if (open.load() >= options.max_connections && !evict_idle()) {
          // Over the bound: a short answer rather than a silent hang.
          refused++;
          static const std::string body =
              R"({"error":{"message":"too many connections","type":"server_error","param":null,"code":null}})";
          static const std::string busy =
              "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: "
              "close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
          beast::error_code ignored;
          asio::write(socket, asio::buffer(busy), ignored);
          socket.shutdown(tcp::socket::shutdown_both, ignored);
        } else {
          accepted++;
          auto s = std::make_shared<session>(std::move(socket), *this);
          {
            std::lock_guard lock(sessions_mutex);
            sessions.remove_if([](const std::weak_ptr<session>& w) { return w.expired(); });
            sessions.push_back(s);
          }
          s->start();
        }
      }
      accept();
    });
  }
};

session::session(tcp::socket socket, server_state& server) : stream_(std::move(socket)), server_(server) {
  server_.open++;
  beast::error_code ec;
  stream_.socket().set_option(tcp::no_delay(true), ec);
}

// The idle timeout covers the wait for a request; once its first bytes arrive the header timeout
// rules (a partial request is not held for the idle timeout).
void session::read_request() {
  if (buffer_.size() > 0) return read_header();
  stream_.expires_after(server_.options.idle_timeout);
  idle = true;
  stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
    self->idle = false;
    if (ec) return self->on_request(ec);
    self->buffer_.commit(n);
    self->read_header();
  });
}

void session::read_header() {
  parser_.emplace();
  parser_->body_limit(server_.options.max_body);
  parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header));
  stream_.expires_after(server_.options.header_timeout);
  http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec) return self->on_request(ec);
    self->stream_.expires_after(self->server_.options.header_timeout);
    if (self->parser_->content_length() && *self->parser_->content_length() > self->server_.options.max_body) {
      return self->on_request(http::error::body_limit);
    }
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     [self](beast::error_code ec2, std::size_t) { self->on_request(ec2); });
  });
}

void session::answer_error(int status, const std::string& message, bool close_after) {
  const std::string body = R"({"error":{"message":")" + message +
                           R"(","type":"invalid_request_error","param":null,"code":null}})";
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) +
                     "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& [k, v] : server_.options.extra_headers) head += k + ": " + v + "\r\n";
  head += close_after ? "Connection: close\r\n\r\n" : "\r\n";
  responding_ = true;
  close_after_ = close_after;
  out_.push_back({head + body, true});
  write_next();
}

void session::on_request(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
      ec == asio::error::connection_reset || ec == asio::error::eof) {
    return close();
  }
  if (ec == http::error::body_limit) {
    return answer_error(413, "request body larger than " + std::to_string(server_.options.max_body) + " bytes", true);
  }
  if (ec == http::error::header_limit) return answer_error(431, "request headers too large", true);
  if (ec) return answer_error(400, "malformed HTTP request: " + ec.message(), true);
  server_.requests++;
  auto req = parser_->release();
  http_request r;
  r.method = std::string(req.method_string());
  r.target = std::string(req.target());
  r.path = r.target.substr(0, r.target.find('?'));
  for (const auto& f : req) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(f.value());
  }
  r.body = std::move(req.body());
  beast::error_code ignored;
  const auto ep = stream_.socket().remote_endpoint(ignored);
  r.remote = ep.address().to_string() + ":" + std::to_string(ep.port());
  responding_ = true;
  close_after_ = !req.keep_alive();
  stream_.expires_never();  // a response may stream for minutes
  header_list headers = server_.options.extra_headers;
  // CORS: the allowed origin is named back to the browser (or "*" when any may call).
  const auto& cors = server_.options.cors_origins;
  const std::string origin = r.header("origin");
  if (std::find(cors.begin(), cors.end(), "*") != cors.end()) {
    headers.emplace_back("Access-Control-Allow-Origin", "*");
  } else if (!origin.empty() && std::find(cors.begin(), cors.end(), origin) != cors.end()) {
    headers.emplace_back("Access-Control-Allow-Origin", origin);
    headers.emplace_back("Vary", "Origin");
  }
  responder_ = std::make_shared<responder_impl>(shared_from_this(), req.keep_alive(), server_.options.max_stream_buffer,
                                                headers);
  watch_disconnect();
  auto responder = responder_;
  asio::post(server_.workers, [this_server = &server_, r = std::move(r), responder]() mutable {
    try {
      this_server->handler(r, responder);
    } catch (const std::exception& e) {
      log::error("http: handler failed: ", e.what());
      if (!responder->closed()) {
        responder->respond(500, "application/json",
                           R"({"error":{"message":"internal error","type":"server_error","param":null,"code":null}})", {});
      }
    }
  });
}

// While a response is pending, a readable socket means the client closed (or pipelines, which
// the next read handles): a generation for a client that left is cancelled at its next step.
void session::watch_disconnect() {
  watching_ = true;
  stream_.socket().async_wait(tcp::socket::wait_read, asio::bind_executor(stream_.get_executor(),
      [self = shared_from_this()](beast::error_code ec) {
        self->watching_ = false;
        if (self->closed_) return;
        if (!self->responding_) return self->read_request();  // the response ended first
        if (ec) return;
        char c;
        const ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
          if (self->responder_) self->responder_->client_gone();
          self->close();
        }
        // n > 0: a pipelined request waits in the socket for the next read.
      }));
}

void session::send(std::string bytes, bool last) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), bytes = std::move(bytes), last]() mutable {
    if (self->closed_) return;
    self->out_.push_back({std::move(bytes), last});
    self->write_next();
  });
}

void session::write_next() {
  if (writing_ || out_.empty() || closed_) return;
  writing_ = true;
  auto bytes = std::make_shared<std::string>(std::move(out_.front().bytes));
  const bool last = out_.front().last;
  out_.pop_front();
  stream_.expires_after(std::chrono::seconds(30));  // a client that stops reading is dropped
  asio::async_write(stream_, asio::buffer(*bytes), [self = shared_from_this(), bytes, last](beast::error_code ec, std::size_t n) {
    self->writing_ = false;
    self->stream_.expires_never();
    if (self->responder_) self->responder_->drained(n);
    if (ec) {
      if (self->responder_) self->responder_->client_gone();
      return self->close();
    }
    if (last) return self->finish_response();
    self->write_next();
  });
}

void session::finish_response() {
  responding_ = false;
  responder_.reset();
  if (close_after_) {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    return close();
  }
  // The disconnect watch holds the socket's read side: let it hand over to the next read.
  if (watching_) {
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  } else {
    read_request();
  }
}

void session::close() {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    self->closed_ = true;
    if (self->responder_) self->responder_->client_gone();
    self->responder_.reset();
    beast::error_code ignored;
    self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    self->stream_.close();
    self->server_.open--;
  });
}

std::string responder_impl::head(int status, const std::string& content_type, const header_list& headers, bool chunked,
                                 std::size_t length) const {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) + "\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  h += chunked ? std::string("Transfer-Encoding: chunked\r\n") : "Content-Length: " + std::to_string(length) + "\r\n";
  for (const auto& [k, v] : extra_) h += k + ": " + v + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  if (!keep_alive_) h += "Connection: close\r\n";
  return h + "\r\n";
}

void responder_impl::enqueue(std::string bytes, bool last) {
  if (auto s = session_.lock()) {
    queued_ += bytes.size();
    s->send(std::move(bytes), last);
  }
}

void responder_impl::respond(int status, std::string content_type, std::string body, header_list headers) {
  if (closed_ || started_.exchange(true)) return;
  ended_ = true;
  enqueue(head(status, content_type, headers, false, body.size()) + body, true);
}

void responder_impl::begin_stream(int status, std::string content_type, header_list headers) {
  if (closed_ || started_.exchange(true)) return;
  enqueue(head(status, content_type, headers, true, 0), false);
}

bool responder_impl::write(std::string data) {
  if (closed_ || ended_ || !started_) return false;
  if (queued_.load() > max_buffer_) return false;  // the client does not keep up
  if (data.empty()) return true;
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  enqueue(size + data + "\r\n", false);
  return true;
}

void responder_impl::end_stream() {
  if (closed_ || !started_ || ended_.exchange(true)) return;
  enqueue("0\r\n\r\n", true);
}

}  // namespace

struct http_server::impl : server_state {
  using server_state::server_state;
};

http_server::http_server(std::shared_ptr<impl> p) : impl_(std::move(p)) {}

namespace {
void start_threads(server_state& st) {
  st.port = st.acceptor.local_endpoint().port();
  st.accept();
  for (int i = 0; i < std::max(1, st.options.io_threads); ++i) st.threads.emplace_back([s = &st] { s->io.run(); });
}
}  // namespace

result<std::unique_ptr<http_server>> http_server::listen(const http_options& options, route_handler handler) {
  auto st = std::make_shared<impl>(options, std::move(handler));
  beast::error_code ec;
  const auto address = asio::ip::make_address(options.host, ec);
  if (ec) return make_error(errc::invalid_argument, "[server] host: '" + options.host + "' is not an IP address");
  const tcp::endpoint ep(address, options.port);
  st->acceptor.open(ep.protocol(), ec);
  if (!ec) st->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) st->acceptor.bind(ep, ec);
  if (!ec) st->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(errc::io, "cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " + ec.message());
  }
  start_threads(*st);
  return std::unique_ptr<http_server>(new http_server(std::move(st)));
}

result<std::unique_ptr<http_server>> http_server::adopt(int listen_fd, const http_options& options, route_handler handler) {
  auto st = std::make_shared<impl>(options, std::move(handler));
  beast::error_code ec;
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return make_error(errc::io, "socket activation: the http socket is not a socket");
  }
  st->acceptor.assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), listen_fd, ec);
  if (ec) return make_error(errc::io, "socket activation: http socket: " + ec.message());
  start_threads(*st);
  return std::unique_ptr<http_server>(new http_server(std::move(st)));
}

http_server::~http_server() {
  stop_accepting();
  {
    std::lock_guard lock(impl_->sessions_mutex);
    for (auto& w : impl_->sessions) {
      if (auto s = w.lock()) s->close();
    }
  }
  impl_->workers.join();  // handlers in flight return (their responders are closed)
  impl_->work.reset();
  impl_->io.stop();
  for (auto& t : impl_->threads) t.join();
  beast::error_code ignored;
  impl_->acceptor.close(ignored);  // no thread runs now; the posted close may not have
}

std::uint16_t http_server::port() const noexcept { return impl_->port; }

void http_server::stop_accepting() {
  if (!impl_->accepting.exchange(false)) return;
  // A raw pointer: the handler may never run once the I/O threads stop, and a shared_ptr left in
  // the queue of the io_context the state owns would keep the state alive forever.
  asio::post(impl_->io, [st = impl_.get()] {
    beast::error_code ignored;
    st->acceptor.close(ignored);
  });
}

http_stats http_server::stats() const {
  return {impl_->accepted.load(), impl_->refused.load(), impl_->requests.load(), impl_->open.load()};
}

}  // namespace spite::server
