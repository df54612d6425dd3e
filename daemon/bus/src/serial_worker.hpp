// One thread that runs posted tasks one at a time, in order. A task gets `cancelled` = true
// instead of running normally when the worker is stopped with cancel_pending before reaching it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "spite/core/log.hpp"

namespace spite::bus {

class serial_worker {
 public:
  using task = std::function<void(bool cancelled)>;
  enum class posted { queued, full, closed };

  // `capacity`: how many tasks may wait behind the running one.
  serial_worker(const char* name, std::size_t capacity)
      : name_(name), capacity_(capacity), thread_([this] { loop(); }) {}
  ~serial_worker() { stop(false); }
  serial_worker(const serial_worker&) = delete;
  serial_worker& operator=(const serial_worker&) = delete;

  posted post(task t) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) return posted::closed;
      if (queue_.size() >= capacity_) return posted::full;
      queue_.push_back(std::move(t));
    }
    cv_.notify_one();
    return posted::queued;
  }

  // Refuses new tasks, lets the running one finish, runs (or cancels) the waiting ones, joins.
  void stop(bool cancel_pending) {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
      if (cancel_pending) cancel_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

 private:
  void loop() {
    for (;;) {
      task t;
      bool cancelled = false;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return closed_ || !queue_.empty(); });
        if (queue_.empty()) return;
        t = std::move(queue_.front());
        queue_.pop_front();
        cancelled = cancel_;
      }
      try {
        t(cancelled);
      } catch (const std::exception& e) {
        log::error("bus: ", name_, ": ", e.what());
      } catch (...) {
        log::error("bus: ", name_, ": unknown exception");
      }
    }
  }

  const char* name_;
  std::size_t capacity_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<task> queue_;
  bool closed_ = false;
  bool cancel_ = false;
  std::thread thread_;  // last: starts when everything above exists
};

}  // namespace spite::bus
