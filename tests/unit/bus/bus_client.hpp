// The test's side of org.spite.Daemon1: a daemon whose callbacks record what the bus asked, and a
// client on its own sdbus-c++ connection.
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "private_bus.hpp"
#include "spite/bus/daemon_bus.hpp"

namespace spite::test {

struct fake_daemon {
  std::mutex mutex;
  std::string state = "starting";
  std::vector<std::string> models = {"stories260K"};
  std::vector<std::string> calls;         // "load NAME PATH", "unload NAME", "reload"
  std::optional<error> fail;              // the next method returns this
  bool throw_next = false;                // the next method throws

  void set_state(const std::string& s) {
    std::lock_guard lock(mutex);
    state = s;
  }
  std::vector<std::string> recorded() {
    std::lock_guard lock(mutex);
    return calls;
  }

  result<void> record(const std::string& call) {
    std::lock_guard lock(mutex);
    calls.push_back(call);
    if (throw_next) {
      throw_next = false;
      throw std::runtime_error("callback threw");
    }
    if (fail) {
      error e = *fail;
      fail.reset();
      return e;
    }
    return ok();
  }

  bus::daemon_callbacks callbacks() {
    bus::daemon_callbacks cb;
    cb.version = [] { return std::string("0.1.0-test"); };
    cb.state = [this] {
      std::lock_guard lock(mutex);
      return state;
    };
    cb.models = [this] {
      std::lock_guard lock(mutex);
      return models;
    };
    cb.load_model = [this](const std::string& name, const std::string& path) { return record("load " + name + " " + path); };
    cb.unload_model = [this](const std::string& name) { return record("unload " + name); };
    cb.reload = [this] { return record("reload"); };
    return cb;
  }
};

class bus_client {
 public:
  explicit bus_client(const private_bus& bus)
      : proxy_(sdbus::createProxy(bus.connect(), bus::service_name, bus::object_path)) {}

  sdbus::IProxy& proxy() { return *proxy_; }

  template <class T>
  T get(const std::string& property) {
    return proxy_->getProperty(property).onInterface(bus::interface_name).get<T>();
  }

  // "" when the call succeeds, else "ERROR.NAME: message".
  template <class... Args>
  std::string call(const std::string& method, const Args&... args) {
    return call_on(bus::interface_name, method, args...);
  }
  template <class... Args>
  std::string call_on(const std::string& interface, const std::string& method, const Args&... args) {
    try {
      auto message = proxy_->createMethodCall(interface, method);
      if constexpr (sizeof...(Args) > 0) (message << ... << args);
      proxy_->callMethod(message);
      return "";
    } catch (const sdbus::Error& e) {
      return e.getName() + ": " + e.getMessage();
    }
  }

 private:
  std::unique_ptr<sdbus::IProxy> proxy_;
};

inline std::string describe(const result<std::unique_ptr<bus::daemon_bus>>& r) {
  return r.ok() ? std::string("connected") : r.err().message;
}

}  // namespace spite::test
