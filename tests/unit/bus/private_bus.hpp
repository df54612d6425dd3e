// A private dbus-daemon for one test: a session bus, or a system bus built from the machine's
// system.conf (listening in a temporary folder, its system.d replaced by the policy files the test
// gives). While it lives, DBUS_SESSION_BUS_ADDRESS or DBUS_SYSTEM_BUS_ADDRESS points at it, so
// sd-bus's default connections reach it.
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "process.hpp"
#include "shared_data.hpp"

namespace spite::test {

class private_bus {
 public:
  enum class kind { session, system };
  struct file {
    std::string name;
    std::string content;
  };

  // system: `policies` are written into the bus's system.d.
  explicit private_bus(kind k, const std::vector<file>& policies = {});
  ~private_bus();
  private_bus(const private_bus&) = delete;
  private_bus& operator=(const private_bus&) = delete;

  const std::string& address() const { return address_; }
  const std::filesystem::path& folder() const { return dir_.path(); }
  // A new client connection to this bus.
  std::unique_ptr<sdbus::IConnection> connect() const;

 private:
  temp_dir dir_;
  std::string address_;
  std::string variable_;
  std::optional<std::string> previous_;
  std::unique_ptr<background_process> daemon_;
};

// The machine's system bus configuration (from the dbus-daemon package); fails the test if absent.
std::string system_bus_config();

// Values handed from a bus thread to the test, waited for with a timeout.
template <class T>
class mailbox {
 public:
  void put(T value) {
    {
      std::lock_guard lock(mutex_);
      items_.push_back(std::move(value));
    }
    cv_.notify_all();
  }
  std::optional<T> take(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [this] { return !items_.empty(); })) return std::nullopt;
    T value = std::move(items_.front());
    items_.pop_front();
    return value;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

}  // namespace spite::test
